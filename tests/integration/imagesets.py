"""The image sets of the integration tests (every buildable tag on the host engine, the
first CPU tag of each stage chain on the modern one: ``conftest.build_on``), built in the
background from the end of collection.

A `make test` run collects tests/unit and tests/integration, then runs the unit tests
first (about 5.5 minutes, no engine) while the engines sit idle; the image sets then
took 12.5 and 6.4 minutes more, one after the other (BENCHMARKS.md, "Third
measurement"). ``start`` (called by conftest once the session has collected a test
that needs an engine's images) begins the builds on a thread, one engine after the
other, so they run beside the unit tests. The first integration test waits
for them (``wait_all``, an autouse fixture of conftest): no test then sees images appear
on an engine while it counts them. A build that failed fails the tests that need its
images, with its output, as before.

The command and its environment are taken when the build starts, at collection: the
unit tests change ``os.environ`` and ``tempfile.tempdir`` for their own calls, which a
build started later on another thread would inherit.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from subprocess import CompletedProcess

from stagecraft.platforms import host_platform
from tests.integration import background, engines

TIMEOUT_S = 3600
_LOCK = threading.Lock()
_FUTURES: dict[str, Future] = {}
# One build at a time, the host's first (the order the tests asked for them before):
# what is won is the unit tests' minutes, not two engines' builds on two cores at once.
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image-set")


def build_args(engine: engines.TestEngine) -> list[str]:
    """`build.py` arguments of ``engine``'s image set: every buildable tag it builds,
    for the host's platform (the arm64 images are test_platforms_emulated.py's)."""
    from tests.integration.harness import SPECS, buildable_here

    tags, _ = buildable_here()
    by_tag = {s.tag: s for s in SPECS}
    args = ["--json", "--jobs", "2", "--platform", host_platform()]
    for tag in tags:
        if engine.builds(by_tag[tag]):
            args += ["--tag", tag]
    return args


def start(names: list[str]) -> None:
    """Begin the image set build of each engine of ``names`` not begun yet: the engine
    is started here (``engines.get``: `modern-engine.sh up`, a no-op when it answers)
    and the command and environment taken now (module docstring); the build runs on the
    pool's thread. An engine that cannot start makes a future that raises its error."""
    with _LOCK:
        for name in names:
            if name in _FUTURES:
                continue
            try:
                engine = engines.get(name)
            except RuntimeError as exc:
                failed: Future = Future()
                failed.set_exception(exc)
                _FUTURES[name] = failed
                continue
            argv = [sys.executable, str(engines.ROOT / "build.py"), *build_args(engine)]
            _FUTURES[name] = _POOL.submit(background.run, argv, engine.environ(), engines.ROOT, TIMEOUT_S)


def result(name: str) -> CompletedProcess | None:
    """The completed build of engine ``name`` (waited for), or None when none was
    started. Raises what the build raised (RuntimeError: the engine did not start;
    subprocess.TimeoutExpired)."""
    with _LOCK:
        future = _FUTURES.get(name)
    return future.result() if future is not None else None


def wait_all() -> None:
    """Wait until every build started has ended, however it ended (its error is the
    business of the tests that need its images: ``result``)."""
    with _LOCK:
        futures = list(_FUTURES.values())
    for future in futures:
        try:
            future.result()
        except Exception:  # noqa: BLE001, S110 - raised again by result() where it is needed
            pass


def stop() -> None:
    """The session ends: builds not begun are not begun, and one that still runs (a
    session ended before any integration test waited for it: ``-x`` in the unit tests,
    an interrupt) is interrupted (``background.stop_all``), so the interpreter's exit
    does not wait up to ``TIMEOUT_S`` for it."""
    _POOL.shutdown(wait=False, cancel_futures=True)
    background.stop_all()
