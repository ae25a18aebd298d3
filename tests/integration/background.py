"""Commands the integration tests run on threads of their own (the image sets of
``imagesets``, the image suites of test_images.py), and their stop when the session ends.

A session can end while one still runs: ``-x`` or ``--maxfail`` after a failure, an
interrupt. Its thread is not a daemon (a pool's), so the interpreter's exit would wait
for the command to end, up to its timeout (an hour for an image set). ``stop_all`` stops
what runs as Ctrl-C would: SIGINT, which build.py answers by moving no name and leaving
its stages to the next run. Each command is started through
``harness.with_default_signals``, so it gets that SIGINT however the test run was
started (a job started with ``&`` or ``nohup`` has SIGINT ignored, and so would its
children). A command whose turn comes after ``stop_all`` is not started.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

from tests.integration.harness import with_default_signals

_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen] = set()
_STOPPED = False


class Stopped(RuntimeError):
    """The session ended before the command's turn came."""


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` to its end, its output captured as text; killed past ``timeout`` seconds
    (then subprocess.TimeoutExpired is raised). Raises ``Stopped`` when ``stop_all`` came
    first."""
    with _LOCK:
        if _STOPPED:
            raise Stopped(f"the test session ended before {argv[1:3]} started")
        proc = subprocess.Popen(with_default_signals(argv), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _RUNNING.add(proc)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def stop_all() -> None:
    """SIGINT to every command still running; none starts after this."""
    global _STOPPED
    with _LOCK:
        _STOPPED = True
        running = list(_RUNNING)
    for proc in running:
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
