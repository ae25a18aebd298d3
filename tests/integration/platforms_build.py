"""The multi-platform image of test_platforms_emulated.py, built and tested in the
background.

Its arm64 half runs under emulation (qemu): about 7.5 minutes from nothing on this
project's 2-core machine when it is quiet (BENCHMARKS.md, "Platforms"), nearly all of it
one emulated process at a time. ``start()`` (called by conftest once the session has
collected a test that needs the image) begins the build on a thread, on the engine of
its own (``engines.get("platforms")``, a third container of the modern engine image),
then `build.py test` of the tag (every platform's suites, arm64 under emulation: about
2.5 minutes more). Both overlap the unit tests and the other engines' builds instead of
adding to them; the tests' fixtures wait for them with ``result()``. Nothing else builds
on that engine, so no other test sees its images appear.
"""

from __future__ import annotations

import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

from tests.integration import engines

TAG = "3.2.2-cpu"
# A repository of its own: these images never take the names other tests use.
REPOSITORY = "stagecraft-platforms/paddle"
TIMEOUT_S = 3600
# The system's temporary directory, read at import (conftest imports this module before
# any test runs). Not read later: a test that calls the CLI in this process points
# ``tempfile.tempdir`` (process-wide) at its run's scratch directory for the call's
# length (stagecraft.scratch.run_scratch) and removes that directory after it, and a
# state directory made there in this thread went with it, logs and all, mid-build.
_TMP = tempfile.gettempdir()

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="platforms-build")
_LOCK = threading.Lock()
_FUTURE: Future | None = None


@dataclass(frozen=True)
class Built:
    """The outcome: ``engine`` it ran on, its ``state`` directory (test records and logs
    of every later command on the tag go there too), the build's completed process
    (``--json``) and its wall time in seconds, then the test's (None when the build
    failed)."""

    engine: engines.TestEngine
    state: Path
    proc: CompletedProcess
    seconds: float
    tested: CompletedProcess | None
    test_seconds: float


def _build() -> Built:
    t0 = time.monotonic()
    # The shared engine first: its `up` makes the engine image both containers run (a
    # no-op once `make test`'s set-up did), so two `up`s never make it at once.
    engines.get("modern")
    engine = engines.get("platforms")
    state = Path(tempfile.mkdtemp(prefix="stagecraft-platforms-state-", dir=_TMP))
    proc = engine.cli("--tag", TAG, "--repository", REPOSITORY, "--state-dir", str(state),
                      "--json", timeout=TIMEOUT_S)
    seconds, t1 = time.monotonic() - t0, time.monotonic()
    tested = None
    if proc.returncode == 0:
        tested = engine.cli("test", "--tag", TAG, "--repository", REPOSITORY,
                            "--state-dir", str(state), timeout=TIMEOUT_S)
    return Built(engine, state, proc, seconds, tested, time.monotonic() - t1)


def start() -> Future:
    """Begin the build of ``TAG`` for every platform its group declares, then its test
    (once per process; later calls return the same future). Its ``result()`` is a
    ``Built``, or raises what the build raised (RuntimeError when the engine cannot
    start, subprocess.TimeoutExpired after ``TIMEOUT_S`` seconds)."""
    global _FUTURE
    with _LOCK:
        if _FUTURE is None:
            _FUTURE = _POOL.submit(_build)
        return _FUTURE
