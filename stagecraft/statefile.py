"""Files of the state directory (test records, SBOMs, run manifests, the tag journal):
written whole or not at all, read back bounded and checked.

A run can die at any instant (SIGKILL, a full disk, the machine stopping), and the next
run reads what it left. ``write_atomic`` writes a temporary file in the same directory,
``fsync``s it, renames it over the target and ``fsync``s the directory (rename(2) is
atomic within one file system; the fsyncs make the new name and its content survive a
crash, as SQLite's and Git's writers do), so a reader sees the old file or the whole new
one, never a truncated one. Only a regular file or nothing is replaced: a directory,
FIFO, device or socket at the path is left alone (``FileExistsError``).

``read_json`` reads at most ``limit`` bytes of a regular file and parses it; a file that
is not whole JSON of the expected shape (an older version's truncated write, a disk that
filled mid-write under another tool) is reported as unreadable, never taken as valid.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

LIMIT = 16 * 1024 * 1024  # bytes: the largest state file read back (an SBOM is ~1 MB)


class Unreadable(ValueError):
    """A state file that exists but is not whole JSON of the expected shape; ``path`` is
    the file, the message says what is wrong in a few words."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def write_atomic(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    """Write ``text`` (str as UTF-8) to ``path`` whole, or leave ``path`` as it was.

    The parent directory must exist. Raises ``FileExistsError`` when something other
    than a regular file is at ``path``, and ``OSError`` (ENOSPC, EDQUOT, EACCES, ...)
    when the write fails; then the temporary file is removed and ``path`` is untouched."""
    data = text.encode() if isinstance(text, str) else text
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise FileExistsError(0, "not a regular file; left alone", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename == tmp:  # chmod or rename of the temporary file: name the state file
            exc = OSError(exc.errno, exc.strerror, str(path)) if exc.errno is not None else exc
        raise named(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


def named(exc: OSError, path: Path | str) -> OSError:
    """``exc`` itself when it names a file (or has no errno), else an OSError of the same
    errno and words naming ``path`` (Python maps the errno to its built-in subclass:
    EACCES gives PermissionError; a subclass of its own is not kept): a write or fsync on
    an open file, the usual place a full disk is met, raises with no file name, and the
    one-line message would not say where."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def write_json(path: Path, doc: Any, mode: int = 0o644) -> None:
    """``write_atomic`` of ``doc`` as indented, key-sorted JSON with a final newline."""
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n", mode)


def _sync_dir(directory: Path) -> None:
    """fsync a directory so a rename in it is durable; file systems that refuse (some
    FUSE and network ones: EINVAL) are left as they are."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json(path: Path, limit: int = LIMIT) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when nothing is there. Reads at most
    ``limit`` bytes (O_NONBLOCK: a FIFO put there answers at once). Raises ``Unreadable``
    for anything but a whole JSON object in a regular file, ``OSError`` when the file
    cannot be opened (permissions)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen: a directory raises there
        os.close(fd)
        raise Unreadable(path, "not a regular file")
    with os.fdopen(fd, "rb") as f:
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise Unreadable(path, f"larger than {limit} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError included
        raise Unreadable(path, f"not whole JSON ({str(exc)[:80]}): cut short or damaged") from None
    if not isinstance(doc, dict):
        raise Unreadable(path, f"a JSON {type(doc).__name__}, not an object")
    return doc
