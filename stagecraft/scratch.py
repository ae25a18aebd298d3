"""Scratch space of a run, and stage logs that two runs cannot truncate for each other.

Every temporary file and directory a run makes (build contexts, iid files, root
filesystems, ...) goes through ``tempfile``; ``run_scratch`` points ``tempfile`` at one
directory owned by the run, ``<tmp>/stagecraft-<uid>/run-<pid>-<start>``, and removes it
when the run ends, however it ends short of SIGKILL. A run killed with SIGKILL leaves it;
the next run that is not refused for its input removes, as it ends, every such directory
whose run is gone. A run holds an exclusive ``flock`` on ``.lock`` in its directory for
its whole life, so a directory whose lock can be taken is a dead run's, whatever pid
namespace either run is in (flock(2)); a directory without one (an older version's) is
judged by its name: the pid no longer exists, or exists with another start time
(``/proc/<pid>/stat`` field 22, see proc(5)), and is left alone where /proc cannot tell.
A refused run leaves the disk as it found it (issue 22: a run refused for its matrix file
had already swept the leftovers).

``claimed_log`` gives a run the stage log ``<stage>-<key>.log`` under an exclusive
``flock`` (flock(2)): a second run building the same stage at the same time writes
``<stage>-<key>.<pid>.log`` instead of truncating the first one's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import InputError


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (proc(5), field 22
    of ``/proc/<pid>/stat``), or None when there is no such process (or no /proc)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()[19]  # fields after "(comm)" start at field 3


LOCK = ".lock"  # in a run's directory: flock-ed by the run as long as it lives


def _owner_alive(name: str) -> bool:
    """Whether the run that made directory ``run-<pid>-<start>`` (one without a lock file)
    is still running; True where this cannot be told (not one of ours, no /proc)."""
    if start_time(os.getpid()) is None:
        return True  # no /proc: every pid would look gone
    try:  # run-<pid>-<start>, or run-<pid>-<start>-<random> (a name taken: mkdtemp)
        _, pid, start = name.split("-", 3)[:3]
        return start_time(int(pid)) == start
    except ValueError:
        return True  # not one of ours: leave it


def _private_base(base: Path) -> tuple[Path | None, bool]:
    """``base`` made (mode 0700) or found as a real directory of this user, and whether
    this call made it; (None, False) when it is something else (another user's, a
    symlink): then nothing is swept there."""
    try:
        base.mkdir(mode=0o700)
        made = True
    except FileExistsError:
        made = False
    except OSError:
        return None, False
    try:
        st = os.lstat(base)
    except OSError:
        return None, False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return None, False
    return base, made


MAKING_S = 60.0  # a directory without a lock this young may be a run's between mkdir and lock


def _being_made(entry: Path) -> bool:
    """Whether ``entry`` (a run directory with no lock file) changed in the last
    ``MAKING_S`` seconds: a run in another pid namespace, whose name cannot be judged
    from here, may be between making it and locking it (``_held_lock``)."""
    try:
        return abs(time.time() - os.lstat(entry).st_mtime) < MAKING_S  # a clock stepped back too
    except OSError:
        return False


def _remove_if_dead(entry: Path) -> bool:
    """Remove run directory ``entry`` when its run is gone; True when removed. With a lock
    file, the run is gone when its lock can be taken, and the directory is removed under
    that lock; without one, by its name (``_owner_alive``)."""
    try:
        fd = os.open(entry / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        if _owner_alive(entry.name) or _being_made(entry):
            return False
        shutil.rmtree(entry, ignore_errors=True)
        return True
    except OSError:
        return False  # a lock file we cannot open: leave the directory alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False  # held: the run is alive
    try:  # the lock of the file now at .lock, not one a run removed as it ended (its
        # directory then made again under the same name by a new run)
        st, now = os.fstat(fd), os.lstat(entry / LOCK)
        if st.st_nlink == 0 or (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
            os.close(fd)
            return False
    except OSError:
        os.close(fd)
        return False
    try:
        shutil.rmtree(entry, ignore_errors=True)
    finally:
        os.close(fd)
    return True


def run_alive(directory: Path) -> bool:
    """Whether the run whose scratch directory is ``directory`` still runs: its lock is
    held (or, without a lock file, its name says so: ``_owner_alive``). A directory that
    is gone is a dead run's; one whose lock cannot be opened is taken as alive. Things a
    run leaves outside its directory (its test containers) are judged by this."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return directory.is_dir() and _owner_alive(directory.name)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # held: the run is alive
    finally:
        os.close(fd)
    return False


def _held_lock(directory: Path) -> int:
    """This run's lock on ``directory`` (just made by this run): the file is made under
    a temporary name, flock-ed, and only then renamed ``.lock``; returns its fd. A sweep
    by another run that found ``.lock`` made but not yet locked would take the lock and
    remove a live run's directory; until ``.lock`` appears a sweep judges the directory
    by its name, which says this run is alive. Raises ``OSError``."""
    fd, name = tempfile.mkstemp(prefix=f"{LOCK}-", dir=directory)  # mode 0600, O_EXCL
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(name, directory / LOCK)  # atomic; no link(2), which vfat, SMB and many FUSE lack
    except BaseException:
        os.close(fd)
        raise
    return fd


def sweep(base: Path) -> list[Path]:
    """Remove the scratch directories under ``base`` whose run is gone; returns them."""
    removed = []
    for entry in base.glob("run-*"):
        if entry.is_dir() and not entry.is_symlink() and _remove_if_dead(entry):
            removed.append(entry)
    return removed


@contextmanager
def run_scratch(tmp: str | None = None) -> Iterator[Path]:
    """Inside the block, ``tempfile`` makes everything under this run's own directory
    (in ``tmp``, default the system's temporary directory), removed when the block ends.
    When the block ends other than by ``InputError`` (the run was not refused), the
    directories of dead runs are removed too. Yields the directory."""
    system = Path(tmp or tempfile.gettempdir())
    base, made_base = _private_base(system / f"stagecraft-{os.getuid()}")
    if base is None:
        mine = Path(tempfile.mkdtemp(prefix="stagecraft-run-", dir=system))
    else:
        mine = base / f"run-{os.getpid()}-{start_time(os.getpid()) or 0}"
        if mine.is_dir() and not mine.is_symlink():
            _remove_if_dead(mine)  # a dead run of the same pid and start time
        try:
            mine.mkdir(mode=0o700)
        except FileExistsError:  # a live run's name (another pid namespace), or not ours
            mine = Path(tempfile.mkdtemp(prefix=f"{mine.name}-", dir=base))
    try:
        lock = _held_lock(mine)
    except BaseException:
        shutil.rmtree(mine, ignore_errors=True)
        raise
    previous = tempfile.tempdir
    tempfile.tempdir = str(mine)
    refused = False
    try:
        yield mine
    except InputError:
        refused = True
        raise
    finally:
        tempfile.tempdir = previous
        shutil.rmtree(mine, ignore_errors=True)
        os.close(lock)
        if base is not None and not refused:
            sweep(base)
        elif base is not None and made_base:
            try:  # a refused run takes back the base it made, when nothing else is in it
                base.rmdir()
            except OSError:
                pass


@contextmanager
def claimed_log(path: Path) -> Iterator[Path]:
    """``path`` held for this run (an exclusive ``flock`` while the block runs), or,
    when another run holds it now, ``<stem>.<pid><suffix>`` beside it. Yields the path
    to write; the lock goes with the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    candidates = [path, path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")]
    for i, candidate in enumerate(candidates):
        fd = os.open(candidate, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if i == 0 else 0))
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield candidate
        finally:
            os.close(fd)  # releases the lock
        return
