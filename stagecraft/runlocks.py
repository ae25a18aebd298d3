"""Work two runs sharing a state directory must not do at once: ``held`` waits for an
exclusive ``flock`` (flock(2)) on a file there and says once that it waits. The kernel
drops the lock when the holder's process ends, however it ends (SIGKILL too), so a dead
run never keeps the next one waiting.

Used for a base's bootstrap (builder.py): two runs that each found the base missing
would each run debootstrap for minutes, and the second import would take the name from
the first, leaving its image without one (the fault suite's cold base trials, issue 24).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

WAIT_NOTE_S = 1.0  # seconds of waiting before saying so
POLL_S = 0.1


def lock_path(folder: Path, *parts: str) -> Path:
    """``folder/<sha256 of parts, 16 hex>.lock``: one lock per distinct ``parts`` (an
    engine's identity and a name in it), whatever characters they hold."""
    return folder / f"{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}.lock"


@contextmanager
def held(path: Path, waiting: str, say: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (made with its folder, mode 0644, never
    through a symbolic link) inside the block. While another process holds it, try again
    every ``POLL_S`` s, saying ``waiting`` once after ``WAIT_NOTE_S`` s; a signal
    handler that raises (Ctrl-C) ends the wait. Raises ``OSError`` when the file cannot
    be made or opened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        t0, said = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and time.monotonic() - t0 > WAIT_NOTE_S:
                    say(waiting)
                    said = True
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock
