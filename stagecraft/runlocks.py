"""Work two runs on one host must not do at once: ``held`` waits for an exclusive
``flock`` (flock(2)) on a file, writes the holder's pid into it, and while it waits says
which process holds it, again every ``NOTE_EVERY_S`` s. The kernel drops the lock when
the holder's process ends, however it ends (SIGKILL too), so a dead run never keeps the
next one waiting; a live one that never ends (stopped with Ctrl-Z, a hung mirror) does,
and the notes say so; Ctrl-C ends the wait.

Used for a base's bootstrap (builder.py): two runs that each found the base missing
would each run debootstrap for minutes, and the second import would take the name from
the first, leaving its image without one (found by review of the fault suite's cold
base trials, issue 24).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

NOTE_AFTER_S = 1.0  # seconds of waiting before the first note
NOTE_EVERY_S = 60.0  # then one note a minute
POLL_S = 0.1
HOLDER_BYTES = 64  # what is read of the holder's line


def lock_path(folder: Path, *parts: str) -> Path:
    """``folder/<sha256 of parts, 16 hex>.lock``: one lock per distinct ``parts`` (an
    engine's identity and a name in it), whatever characters they hold."""
    return folder / f"{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}.lock"


def _holder(fd: int) -> str:
    """The pid the holder wrote (``pid N``), or "another process" when it wrote none yet."""
    try:
        raw = os.pread(fd, HOLDER_BYTES, 0).decode("ascii", "replace").split()
    except OSError:
        raw = []
    return f"pid {raw[0]}" if raw and raw[0].isdigit() else "another process"


@contextmanager
def held(path: Path, what: str, say: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (made with its folder, mode 0644, its last
    part never a symbolic link) inside the block, this process's pid written in it.
    While another process holds it, try again every ``POLL_S`` s, saying "waiting for
    ``what`` (held by pid N, S s so far; PATH)" after ``NOTE_AFTER_S`` s and every
    ``NOTE_EVERY_S`` s after; a signal handler that raises (Ctrl-C) ends the wait.
    Raises ``OSError`` when the file cannot be made or opened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        t0 = time.monotonic()
        next_note = t0 + NOTE_AFTER_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= next_note:
                    say(f"waiting for {what} (held by {_holder(fd)}, {now - t0:.0f} s so far; {path})")
                    next_note = now + NOTE_EVERY_S
                time.sleep(POLL_S)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the lock holds without it; a waiter then says "another process"
        yield
    finally:
        os.close(fd)  # releases the lock
