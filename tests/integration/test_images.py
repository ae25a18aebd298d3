"""Every image of the matrix, built once per engine that builds it, validated by its
testinfra suites (the GPU images on the host engine only: tests/integration/engines.py).

The suites of one engine's tags run ``SUITES_AT_ONCE`` at a time (``_suite_run``): the
first of them to run starts every tag of that engine this session selected, in pytest's
order, and each test waits for its own. A suite run is mostly waiting on its container
(``docker exec``, pip inside it, the framework's imports), so two overlap on two cores;
each is `build.py test` as a user runs it, and two runs on one state directory is a case
the product supports (its test records, SBOMs and reports are per image and tag).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from stagecraft.platforms import host_platform
from tests.integration import background
from tests.integration.conftest import engine_pairs
from tests.integration.harness import ROOT, SPECS, buildable_here

TAGS, SKIPPED = buildable_here()
# Two by default (this project's machines have two cores); STAGECRAFT_SUITES_AT_ONCE=1
# runs them one after another (BENCHMARKS.md compares the two).
SUITES_AT_ONCE = max(1, int(os.environ.get("STAGECRAFT_SUITES_AT_ONCE", "2")))
_LOCK = threading.Lock()
_RUNS: dict[str, dict[str, Future]] = {}  # engine name -> tag -> its `build.py test`
_POOLS: list[ThreadPoolExecutor] = []


@pytest.fixture(scope="module", autouse=True)
def _no_suites_after_the_module():
    """Runs still queued when the module ends (an interrupted or stopped session) are
    cancelled, and one still running is interrupted (``background.stop_all``, as the
    session's end does too): the interpreter's exit would otherwise wait for them."""
    yield
    for pool in _POOLS:
        pool.shutdown(wait=False, cancel_futures=True)


def _suite_run(request: pytest.FixtureRequest, engine, tag: str) -> subprocess.CompletedProcess:
    """`build.py test --tag TAG` on ``engine``, run by the engine's pool (module
    docstring); raises what the run raised (subprocess.TimeoutExpired)."""
    with _LOCK:
        if engine.name not in _RUNS:
            tags = [item.callspec.params["tag"] for item in request.session.items
                    if getattr(item, "originalname", "") == "test_suites_pass"
                    and item.callspec.params.get("engine") == engine.name
                    and item.callspec.params["tag"] not in SKIPPED]
            pool = ThreadPoolExecutor(max_workers=SUITES_AT_ONCE, thread_name_prefix=f"suites-{engine.name}")
            argv = [sys.executable, str(ROOT / "build.py"), "test", "--tag"]
            _RUNS[engine.name] = {t: pool.submit(background.run, [*argv, t], engine.environ(), ROOT, 1800)
                                  for t in dict.fromkeys(tags)}
            _POOLS.append(pool)
        run = _RUNS[engine.name].get(tag)
    return run.result() if run is not None else engine.cli("test", "--tag", tag, timeout=1800)


@pytest.mark.parametrize("engine, tag", engine_pairs([s.tag for s in SPECS]), indirect=["engine"])
def test_suites_pass(engine, tag, engine_built, request):
    if tag in SKIPPED:
        pytest.skip(SKIPPED[tag])
    proc = _suite_run(request, engine, tag)
    assert proc.returncode == 0, f"{tag} on the {engine.name} engine: suites failed:\n{proc.stderr[-6000:]}"
    assert "PASS" in proc.stdout, proc.stdout


def test_second_build_builds_nothing(engine, engine_built):
    args = ["--platform", host_platform()]
    for tag in engine_built:
        args += ["--tag", tag]
    proc = engine.cli(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 stage(s) built" in proc.stderr and "nothing to build" in proc.stderr, proc.stderr[-2000:]
