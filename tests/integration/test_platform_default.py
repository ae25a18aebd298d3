"""A multi-platform tag on an engine that keeps one platform per tag (Docker without the
containerd image store, as Debian 12's 20.10): the README's `build.py --tag 2.6.2-cpu`
builds the host's platform and says so; asking for several platforms explicitly is bad
input before anything is built. Runs on the host engine; skipped where it holds indexes."""

from __future__ import annotations

import json

import pytest

from stagecraft.engine import Engine
from stagecraft.platforms import host_platform
from tests.integration.harness import SPECS, run_cli

MULTI = next(s for s in SPECS if len(s.platforms) > 1 and host_platform() in s.platforms)


@pytest.fixture(scope="module")
def one_platform_engine():
    why = Engine().multi_platform()
    if not why:
        pytest.skip("this engine holds several platforms under one tag")
    return why


def test_explicit_platforms_the_engine_cannot_hold_are_refused(one_platform_engine, client):
    before = {i.id for i in client.images.list(all=True)}
    both = ",".join(MULTI.platforms)
    proc = run_cli("--tag", MULTI.tag, "--platform", both, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "under one tag" in lines[0] and "Docker" in lines[0], proc.stderr
    assert {i.id for i in client.images.list(all=True)} <= before, "an image was made"


def test_the_default_builds_the_host_platform_and_says_so(one_platform_engine):
    proc = run_cli("--tag", MULTI.tag, "--json", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:")]
    assert any(f"building {MULTI.tag} for {host_platform()} only" in ln for ln in notes), proc.stderr
    report = json.loads(proc.stdout)
    image = next(i for i in report["images"] if i["tag"] == MULTI.tag)
    assert list(image["platforms"]) == [host_platform()], image


def _plan(*argv: str) -> dict:
    proc = run_cli(*argv, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout)
    plan["notes"] = [ln for ln in proc.stderr.splitlines() if ln.startswith("note:")]
    return plan


def test_dry_run_shows_what_the_build_here_makes(one_platform_engine):
    """``--dry-run`` is the build's plan: the host's platform, with the build's note."""
    plan = _plan("--tag", MULTI.tag, "--dry-run")
    assert any(f"for {host_platform()} only" in ln for ln in plan["notes"]), plan["notes"]
    assert {s["platform"] for s in plan["stages"]} == {host_platform()}, plan["stages"]
    assert {b["platform"] for b in plan["bases"]} == {host_platform()}, plan["bases"]


def test_plan_and_a_stage_dry_run_keep_the_matrix_platforms(one_platform_engine):
    """``plan`` is the matrix's; ``--stage`` builds stage images (no tag holds two
    platforms), every declared platform, as its dry run says."""
    for plan in (_plan("plan", "--tag", MULTI.tag), _plan("--tag", MULTI.tag, "--dry-run", "--stage", "base")):
        assert not plan["notes"], plan["notes"]
        assert {s["platform"] for s in plan["stages"]} == set(MULTI.platforms), plan["stages"]
