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

import errno
import fcntl
import hashlib
import os
import stat
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


def _own_folder(folder: Path) -> None:
    """Make ``folder`` (mode 0755) or find it as a real directory of this user that no
    one else may write in; raises ``OSError`` otherwise (/run/lock is writable by every
    user: a folder or link made there by another must not choose where locks go)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o755)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(errno.EPERM, f"{folder} is not a directory of this user that only it may write in")


@contextmanager
def held(path: Path, what: str, say: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (made with its folder, mode 0644; the folder a
    directory of this user no one else may write in, the file a regular file of this
    user with one link, never reached through a symbolic link) inside the block, this
    process's pid written in it.
    While another process holds it, try again every ``POLL_S`` s, saying "waiting for
    ``what`` (held by pid N, S s so far; PATH)" after ``NOTE_AFTER_S`` s and every
    ``NOTE_EVERY_S`` s after; a signal handler that raises (Ctrl-C) ends the wait.
    Raises ``OSError`` when the file cannot be made or opened, or is not as said."""
    _own_folder(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
            raise OSError(errno.EPERM, "not a lock file of this user (another file type, owner or a hard link)")
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
