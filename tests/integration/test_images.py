"""Every image of the matrix, built once per engine that builds it, validated by its
testinfra suites (the GPU images on the host engine only: tests/integration/engines.py)."""

from __future__ import annotations

import pytest

from stagecraft.platforms import host_platform
from tests.integration.conftest import engine_pairs
from tests.integration.harness import SPECS, buildable_here

TAGS, SKIPPED = buildable_here()


@pytest.mark.parametrize("engine, tag", engine_pairs([s.tag for s in SPECS]), indirect=["engine"])
def test_suites_pass(engine, tag, engine_built):
    if tag in SKIPPED:
        pytest.skip(SKIPPED[tag])
    proc = engine.cli("test", "--tag", tag, timeout=1800)
    assert proc.returncode == 0, f"{tag} on the {engine.name} engine: suites failed:\n{proc.stderr[-6000:]}"
    assert "PASS" in proc.stdout, proc.stdout


def test_second_build_builds_nothing(engine, engine_built):
    args = ["--platform", host_platform()]
    for tag in engine_built:
        args += ["--tag", tag]
    proc = engine.cli(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 stage(s) built" in proc.stderr and "nothing to build" in proc.stderr, proc.stderr[-2000:]
