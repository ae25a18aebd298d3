"""Signals of a run: SIGTERM handled as Ctrl-C, and a Ctrl-C or SIGTERM that a finalizer
swallowed sent again (stagecraft.cli installs both around a command)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C (every ``except KeyboardInterrupt`` takes it); carries
    its signal so that one a finalizer swallowed is sent again as itself."""

    signum = signal.SIGTERM


def terminate(signum: int, frame: Any) -> None:
    """The SIGTERM handler of a run: raises ``Terminated``."""
    raise Terminated


REDELIVER_S = 0.05  # a swallowed Ctrl-C or SIGTERM comes again this long after (s)


@contextmanager
def redelivered_interrupts() -> Iterator[None]:
    """Inside the block, a Ctrl-C or SIGTERM that a finalizer swallowed comes again.

    Python runs a signal's handler at the next bytecode of the main thread, wherever that
    is; when it is inside a ``__del__`` or a weakref callback (a socket, a subprocess, a
    temporary file being collected), the KeyboardInterrupt it raises cannot propagate:
    CPython prints "Exception ignored in ... KeyboardInterrupt" and goes on, and the run
    finishes as if no signal had come (the fault suite met it: a SIGINT 3.3 s into a
    build, exit 0). The block's ``sys.unraisablehook`` (Python docs) takes such an
    interrupt quietly and sends its signal (SIGINT, or SIGTERM for ``Terminated``) to
    this process again ``REDELIVER_S`` later from a timer thread, by when the finalizer
    has ended, so the run stops and says so. Any other unraisable exception goes to the
    hook that was there before, which the block puts back. Left open: a second signal
    inside the hook's own few microseconds is printed and lost with the first."""
    import threading

    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            sig = getattr(unraisable.exc_type, "signum", signal.SIGINT)
            again = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), sig))
            again.daemon = True  # never holds the interpreter's exit
            again.start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
