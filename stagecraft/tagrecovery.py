"""The tag phase's record on disk, so that a run killed half-way through it (SIGKILL, a
crash, the machine stopping) leaves names the next run puts back, and two runs on one
state directory never move names at the same time.

``tagging.apply_tags`` holds SIGINT and SIGTERM and puts names back itself; SIGKILL
cannot be held. So, before the first name moves, the phase writes
``<state>/tags/pending-<engine>.json`` (``statefile.write_atomic``) with every name's
image before and after, and removes it once every name is moved or put back. The phase
runs under an exclusive ``flock`` (flock(2)) of ``<state>/tags/<engine>.lock``: a second
run on the same state directory and engine waits for the first one's phase, and a
pending file found by a run holding that lock is a dead run's. ``recover`` then puts
back every name of it that still points at the dead run's new image, and leaves alone
names that somebody moved since (write-ahead logging with undo, as databases recover a
transaction that did not commit). ``<engine>`` is a digest of the engine's ID (``docker
info``): a state directory used with two engines keeps a record per engine.
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
from typing import Any, Protocol

from . import statefile
from .errors import BuildError

SCHEMA = 1
WAIT_NOTE_S = 1.0  # seconds of waiting for another run's phase before saying so


class NameEngine(Protocol):
    """What recovery needs of ``engine.Engine``."""

    def image_id(self, ref: str) -> str | None: ...

    def tag(self, image_id: str, ref: str) -> None: ...

    def untag(self, ref: str) -> None: ...


def _paths(state_dir: Path, engine_key: str) -> tuple[Path, Path]:
    name = hashlib.sha256(engine_key.encode()).hexdigest()[:16]
    folder = state_dir / "tags"
    return folder / f"{name}.lock", folder / f"pending-{name}.json"


@contextmanager
def phase_lock(state_dir: Path, engine_key: str, stop: Callable[[], bool],
               say: Callable[[str], None]) -> Iterator[Path | None]:
    """Hold this state directory's tag lock for ``engine_key`` inside the block; yields
    the pending file's path, or None when ``stop()`` turned true while waiting for
    another run's phase (a held Ctrl-C: the caller moves nothing). Raises ``OSError``
    when the lock file cannot be made."""
    lock, pending = _paths(state_dir, engine_key)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        t0, said = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop():
                    yield None
                    return
                if not said and time.monotonic() - t0 > WAIT_NOTE_S:
                    say(f"waiting for another run's tag phase ({lock})")
                    said = True
                time.sleep(0.05)
        _sweep_temporaries(lock.parent)
        yield pending
    finally:
        os.close(fd)  # releases the lock


def _sweep_temporaries(folder: Path) -> None:
    """Under the lock: remove the temporary files of pending records that a SIGKILL left
    inside ``statefile.write_atomic`` (``.pending-*.json.*.tmp``, regular files only)."""
    for tmp in folder.glob(".pending-*.json.*.tmp"):
        try:
            if stat.S_ISREG(os.lstat(tmp).st_mode):
                tmp.unlink()
        except OSError:
            pass


class Progress:
    """How far a phase got: the index (in ``moves``) of each name it began to move, one
    per line, on disk (fdatasync) before the engine is asked. ``recover`` takes a name
    found with no image for one lost inside the engine's own move only when the dead run
    had begun moving it; any other missing name was removed by someone, and stays so."""

    def __init__(self, path: Path):
        """Open (make, or empty a regular file of ours at) ``path``. Raises ``OSError``
        for anything else there: a FIFO is not waited on (O_NONBLOCK), a symlink not
        followed, a directory or device refused."""
        self.path = path
        self.fd = -1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EEXIST, "not a regular file", str(path))
        os.ftruncate(fd, 0)
        self.fd = fd

    def mark(self, index: int) -> None:
        """Name ``index`` is about to move. Raises ``OSError`` (a full disk)."""
        os.write(self.fd, f"{index}\n".encode())
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _progress_path(pending: Path) -> Path:
    return pending.with_suffix(".progress")


def begin(pending: Path, moves: list[tuple[str, str]], before: dict[str, str | None]) -> Progress:
    """Record the phase about to start (every name's image before and after; its
    progress file, empty) before the first name moves; returns the progress to mark.
    Raises ``OSError`` (a full disk: then nothing may move)."""
    progress = Progress(_progress_path(pending))  # first: a record always has its progress
    try:
        statefile.write_json(pending, {"schema": SCHEMA, "pid": os.getpid(), "started": time.time(),
                                       "moves": [list(m) for m in moves], "before": before})
    except OSError:
        progress.close()
        raise
    return progress


def end(pending: Path, progress: Progress | None = None) -> None:
    """The phase is over (every name moved, or every one put back)."""
    pending.unlink(missing_ok=True)
    if progress is not None:
        progress.close()
    _progress_path(pending).unlink(missing_ok=True)


MAX_PROGRESS = 1 << 20  # bytes of a progress file read (a line per name)


def _begun(pending: Path) -> int | None:
    """How many names of the record the dead run had begun to move (the highest index
    marked, plus one); None when the record has no progress file (a record of a version
    before progress marks: every name counts as begun)."""
    try:
        fd = os.open(_progress_path(pending), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, MAX_PROGRESS).decode("ascii", "replace")
    finally:
        os.close(fd)
    marks = [int(x) for x in text.split() if x.isascii() and x.isdigit() and len(x) < 9]
    return max(marks) + 1 if marks else 0


def recover(engine: NameEngine, pending: Path, say: Callable[[str], None]) -> list[str]:
    """Under the phase lock: put back the names of a dead run's unfinished phase.

    Each name that points at the image the dead run moved it to, or at no image (lost
    inside the engine's own move), goes back to its image before (or is removed, when it
    had none); a name pointing elsewhere was moved since
    and stays; a name whose image before is gone from the engine (pruned since) stays on
    the dead run's new image, which was complete and had passed its tests before any
    name moved. The record is removed once every name is settled; returns the names put
    back. A record that is unreadable is set aside under a name of its own and said.
    Raises ``BuildError`` when a name cannot be put back (the record stays, so the next
    run finishes it; the message names the names already put back)."""
    try:
        doc = statefile.read_json(pending)
    except statefile.Unreadable as exc:
        aside = _set_aside(pending)
        say(f"warning: the tag record of an earlier run is unreadable ({exc.why}); set aside "
            f"as {aside.name}")
        return []
    except OSError as exc:
        raise BuildError(f"cannot read the tag record {pending} ({exc.strerror or exc}); "
                         "fix its permissions, then run again") from None
    if doc is None:
        return []
    moves, before = _parse(doc)
    begun = _begun(pending)
    if begun is not None:
        moves = moves[:begun]  # names the dead run never began to move are not its to settle
    put_back: list[str] = []
    kept: list[str] = []
    for ref, new in reversed(moves):
        try:
            _put_back_one(engine, ref, new, before.get(ref), put_back, kept)
        except Exception as exc:  # noqa: BLE001 - the engine's own errors, one line
            done = ", ".join(put_back) or "none"
            raise BuildError(f"an earlier run ended inside its tag phase and putting back its "
                             f"name {ref} failed ({str(exc)[:200]}); put back so far: {done}; "
                             "run the same command again to finish") from None
    end(pending)
    if put_back or kept:
        said = f"{len(put_back)} of {len(moves)} name(s) put back"
        if kept:
            said += (f"; {len(kept)} left on its tested new image, their image before being "
                     f"gone: {', '.join(kept)}")
        say(f"recovered: a run (pid {doc.get('pid', '?')}) ended inside its tag phase; {said}")
    return put_back[::-1]


def _put_back_one(engine: NameEngine, ref: str, new: str, old: str | None,
                  put_back: list[str], kept: list[str]) -> None:
    """Settle one name of a dead run's record (``recover``), noting it in ``put_back``
    or ``kept``."""
    now = engine.image_id(ref)
    if old == new or now == old or (now is not None and now != new):
        return  # never moved by that run (or to where it was), or moved by someone since
    # ``now`` is the new image, or no image at all: with the containerd image store a
    # name moves by delete-then-create (moby daemon/containerd/image_tag.go, TagImage),
    # so an engine killed inside that call loses the name; it goes back to its image.
    if old is None:
        engine.untag(ref)
    elif engine.image_id(old) is None:
        if now is None and engine.image_id(new) is not None:
            engine.tag(new, ref)  # lost inside the move: finish it, as its other names stay
        kept.append(ref)
        return
    else:
        engine.tag(old, ref)
    put_back.append(ref)


def _set_aside(pending: Path) -> Path:
    """Move an unreadable record out of the way under a new name (link, then unlink:
    nothing is replaced). Raises ``BuildError`` when something other than a regular
    file is at ``pending`` or the move fails."""
    aside = pending.with_name(f"{pending.stem}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.unreadable")
    try:
        if not stat.S_ISREG(os.lstat(pending).st_mode):
            raise BuildError(f"{pending} is not a file this tool wrote; remove it, then run again")
        os.link(pending, aside)
        os.unlink(pending)
    except OSError as exc:
        raise BuildError(f"cannot set aside the unreadable tag record {pending} "
                         f"({exc.strerror or exc}); remove it, then run again") from None
    return aside


def _parse(doc: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, str | None]]:
    """The moves and previous images of a record; a malformed entry ends the moves (their
    order is what progress marks count)."""
    moves: list[tuple[str, str]] = []
    for m in doc.get("moves") or []:
        if not (isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)):
            break
        moves.append((m[0], m[1]))
    raw = doc.get("before") if isinstance(doc.get("before"), dict) else {}
    before = {k: v for k, v in raw.items() if isinstance(k, str) and (v is None or isinstance(v, str))}
    return moves, before


def recover_now(engine: NameEngine, state_dir: Path, engine_key: str,
                say: Callable[[str], None]) -> list[str]:
    """``recover`` for a command that moves no name itself but reads them (``push``):
    takes the lock, waiting for a live run's phase, then recovers a dead one's."""
    _, pending = _paths(state_dir, engine_key)
    if not pending.exists():
        return []
    with phase_lock(state_dir, engine_key, lambda: False, say) as path:
        return recover(engine, path, say) if path is not None else []
