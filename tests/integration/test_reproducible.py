"""Bit-for-bit rebuilds, for real (issue 11): ``build.py verify-reproducible``.

- On the modern engine (Docker 26), 2.6.2-cpu is built (as the image suites build it:
  debootstrap from the lock, apt with checked .debs, pip --require-hashes; reused when
  they did), then its base is bootstrapped again and every stage rebuilt with no cache
  (`--no-cache`: every step runs again) on the same parent: every digest is the same.
  About 4 minutes when the image is built, 7 when not.
- The small `six` matrix has no lock, so no SOURCE_DATE_EPOCH: the check fails (exit 1)
  and names what differs (file times, the config's dates), with the full list on disk;
  the second images' names are gone afterwards.
- Every stage was exported as its steps left it (they fix their file times), with no
  rewrite pass (stagecraft/steptimes.py), as each second build's log says.
- Docker 20.10 (the host engine here) dates the history with the build's time: exit 2,
  saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from tests.integration import engines
from tests.integration.harness import six_project

RUN_TIMEOUT = 2400


def _verify(engine: engines.TestEngine, *args: str, cwd: Path | None = None):
    proc = engine.cli("verify-reproducible", "--json", *args, timeout=RUN_TIMEOUT,
                      **({"cwd": cwd} if cwd else {}))
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc, report


@pytest.fixture(scope="module")
def runner() -> engines.TestEngine:
    try:
        return engines.get("modern")
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `bash scripts/modern-engine.sh up` as root")


@pytest.mark.modern
def test_2_6_2_cpu_rebuilds_to_the_same_digests(runner, tmp_path):
    proc, report = _verify(runner, "2.6.2-cpu", "--platform", "linux/amd64",
                           "--state-dir", str(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert report["reproducible"] is True
    checks = {c["stage"]: c for c in report["stages"]}
    assert set(checks) == {"base-image", "base", "runtime", "label"}, list(checks)
    for c in checks.values():
        assert c["same"] and c["first"] == c["second"] and c["first"].startswith("sha256:"), c
    assert "reproducible: every stage rebuilt to the same digest (4 checked" in proc.stderr
    # The steps fixed every file time: no stage needed BuildKit's rewrite pass, and the
    # check before the load said so (stagecraft/steptimes.py).
    for stage in ("base", "runtime", "label"):
        log = Path(checks[stage]["log"]).read_text()
        assert "exported as the steps left it (no rewrite pass)" in log, stage
        assert "rewrite-timestamp=true" not in log and "exporting again" not in log, stage
    # The image the tag names is the one both builds gave.
    final = runner.client().api.inspect_image("stagecraft/paddle:2.6.2-cpu")["Id"]
    assert final == checks["label"]["first"]
    assert not [t for i in runner.client().images.list() for t in i.tags
                if t.startswith("stagecraft-verify/")]


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> Path:
    return six_project(tmp_path_factory.mktemp("six-repro"), "stagecraft-it/six-repro")


@pytest.mark.modern
def test_without_a_lock_the_differences_are_named(runner, six):
    state = six.parent / "state"
    proc, report = _verify(runner, "--matrix", str(six), "1.16.0-cpu", "--state-dir", str(state),
                           cwd=six.parent)
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert report["reproducible"] is False
    assert "no matrix.lock" in proc.stderr and "SOURCE_DATE_EPOCH" in proc.stderr
    assert "1.16.0-cpu: NOT reproducible:" in proc.stderr
    runtime = next(c for c in report["stages"] if c["stage"] == "runtime")
    assert not runtime["same"] and runtime["first"] != runtime["second"]
    assert any(": mtime " in line for line in runtime["differences"]), runtime["differences"]
    assert "image config created: differs" in runtime["differences"]
    details = Path(runtime["details"][0])
    assert details.is_file() and len(details.read_text().splitlines()) >= len(runtime["differences"])
    assert not [t for i in runner.client().images.list() for t in i.tags
                if t.startswith("stagecraft-verify/")]


@pytest.mark.skipif("host" not in engines.selected(), reason="the host engine is not tested in this run")
def test_docker_20_10_says_why_not():
    proc = engines.get("host").cli("verify-reproducible", "2.6.2-cpu", timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: verify-reproducible 2.6.2-cpu: impossible here: Docker 20.10")
    assert "rewrite-timestamp" in line and "Docker 25+" in line


def _route_build(runner, monkeypatch, tmp_path: Path, name: str, steps: str, *extra: str):
    """Engine.build (in this process, on the modern engine) of ``FROM <the bootstrapped
    base>`` + ``steps`` with the lock's epoch, as stage builds run it. Returns (image id,
    the build log's text)."""
    from stagecraft.engine import Engine

    for key, value in runner.env.items():
        monkeypatch.setenv(key, value)
    bases = [t for i in runner.client().images.list(name="stagecraft-base/debian")
             for t in i.tags if "amd64" in t]
    if not bases:  # run alone: build 2.6.2-cpu as the first test does (its base with it)
        proc = runner.cli("--tag", "2.6.2-cpu", "--platform", "linux/amd64", timeout=RUN_TIMEOUT)
        assert proc.returncode == 0, proc.stderr[-4000:]
        bases = [t for i in runner.client().images.list(name="stagecraft-base/debian")
                 for t in i.tags if "amd64" in t]
    base = bases[0]
    ctx = tmp_path / name
    ctx.mkdir()
    (ctx / "f.txt").write_text("context file\n")
    (ctx / "Dockerfile").write_text(f"FROM {base}\nARG SOURCE_DATE_EPOCH\n{steps}\n")
    log = tmp_path / f"{name}.log"
    engine = Engine()
    image = engine.build(ctx / "Dockerfile", ctx, log, tmp_path / f"{name}.iid", {},
                         source_date_epoch=EPOCH, extra_args=list(extra),
                         provenance_dir=tmp_path / "provenance")
    engine.tag(image, f"stagecraft-it/route:{name}")  # as a stage build names its image
    return image, log.read_text()


EPOCH = 1783764997


@pytest.mark.modern
def test_each_export_route_gives_the_epoch_and_says_which_it_took(runner, monkeypatch, tmp_path):
    """The templates' route (steps fix their times: no rewrite pass), a plain RUN (the
    check finds its files newer than the epoch: exported again with rewrite-timestamp) and
    a COPY (rewrite at once). Each, built twice with no cache, gives one image."""
    from stagecraft.steptimes import FIX_TIMES

    client = runner.client()
    try:
        fixed = f"RUN mkdir -p /opt/route && echo fixed > /opt/route/f && {FIX_TIMES}"
        a, log = _route_build(runner, monkeypatch, tmp_path, "fixed1", fixed, "--no-cache")
        b, _ = _route_build(runner, monkeypatch, tmp_path, "fixed2", fixed, "--no-cache")
        assert a == b
        assert "exported as the steps left it (no rewrite pass)" in log
        assert "rewrite-timestamp=true" not in log

        plain = "RUN mkdir -p /opt/route && echo plain > /opt/route/f"
        a, log = _route_build(runner, monkeypatch, tmp_path, "plain1", plain, "--no-cache")
        b, _ = _route_build(runner, monkeypatch, tmp_path, "plain2", plain, "--no-cache")
        assert a == b
        commands = [ln for ln in log.splitlines() if ln.startswith("$ ")]
        assert "rewrite-timestamp=true" not in commands[0] and "rewrite-timestamp=true" in commands[1]
        assert f"entries newer than SOURCE_DATE_EPOCH={EPOCH} (layer " in log
        assert "opt/route" in log and "exporting again with rewrite-timestamp" in log

        a, log = _route_build(runner, monkeypatch, tmp_path, "copy1", "COPY f.txt /opt/route/", "--no-cache")
        commands = [ln for ln in log.splitlines() if ln.startswith("$ ")]
        assert "rewrite-timestamp=true" in commands[0] and "no rewrite pass" not in log
        # What the image holds is dated by the epoch on every route.
        for name, f in (("fixed1", "f"), ("plain1", "f"), ("copy1", "f.txt")):
            out = client.containers.run(f"stagecraft-it/route:{name}",
                                        ["stat", "-c", "%Y", "/opt/route", f"/opt/route/{f}"],
                                        remove=True).decode().split()
            assert out == [str(EPOCH), str(EPOCH)], (name, out)
    finally:
        for name in ("fixed1", "fixed2", "plain1", "plain2", "copy1"):
            try:
                client.images.remove(f"stagecraft-it/route:{name}", force=True)
            except docker.errors.DockerException:  # not made, or gone with its tag
                pass
