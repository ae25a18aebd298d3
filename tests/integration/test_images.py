"""Every image of the matrix, built once, validated by its testinfra suites."""

from __future__ import annotations

import pytest

from stagecraft.platforms import host_platform
from tests.integration.harness import SPECS, buildable_here, run_cli

TAGS, SKIPPED = buildable_here()


@pytest.mark.parametrize("tag", [s.tag for s in SPECS])
def test_suites_pass(tag, built):
    if tag in SKIPPED:
        pytest.skip(SKIPPED[tag])
    proc = run_cli("test", "--tag", tag, timeout=1800)
    assert proc.returncode == 0, f"{tag}: suites failed:\n{proc.stderr[-6000:]}"
    assert "PASS" in proc.stdout, proc.stdout


def test_second_build_builds_nothing(built):
    args = ["--platform", host_platform()]
    for tag in TAGS:
        args += ["--tag", tag]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 stage(s) built" in proc.stderr and "nothing to build" in proc.stderr, proc.stderr[-2000:]
