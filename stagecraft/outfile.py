"""Files the user names on the command line for a result (``render -o FILE``,
``bake -o FILE``): checked before anything runs, written whole or not at all.

``problem(path)`` says, from the file system alone (nothing is opened or created), why
``path`` cannot take the result: its directory is missing or not writable, or something
that is not a regular file is there already (a directory, a FIFO, which an open for
writing would wait on forever, a device, a socket). ``write_text(path, text)`` writes a
temporary file in the same directory and renames it over ``path``: the result appears
whole, and only ever over a regular file or nothing. A symbolic link is followed, as a
shell's ``>`` would: the file it points at is replaced and the link stays.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from . import kernelfs, statefile


def _target(path: str) -> Path:
    """The file ``path`` names, its symbolic links followed (missing parts kept)."""
    return Path(os.path.realpath(path))


def problem(path: str) -> str:
    """Why the result cannot be written to ``path``, or "" when it can. Reads the file
    system only (``stat``, ``access``)."""
    target = _target(path)
    parent = target.parent
    try:  # the node the path names, its links followed by the kernel: /dev/stdout on a
        # pipe is a FIFO there, while its realpath (/proc/PID/fd/pipe:[N]) names nothing
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return f"cannot look at it ({exc.strerror or exc})"
    if not parent.is_dir() and (mode is None or stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"directory {parent} does not exist"
    if mode is not None and stat.S_ISDIR(mode):
        return "is a directory"
    if mode is not None and not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        return f"is {kind}, not a regular file"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    return kernelfs.kernel_interface(str(parent))


def write_text(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in its directory and
    a rename: readers see the old file or the whole new one. An existing file keeps its
    permission bits; a new one gets 0666 less the umask, as ``open`` would give it.

    Nothing that was not checked is replaced: where nothing was at ``path``, the new file
    is linked into place (``link`` fails rather than replace what appeared since); where a
    regular file was, its device, inode and change time are checked again just before the rename, so a
    FIFO, device or other file put there meanwhile is left alone.
    Raises ``OSError`` when it cannot, and ``IsADirectoryError``/``FileExistsError``
    when ``path`` is not (or no longer) a regular file or nothing (see ``problem``):
    nothing but the temporary file, then removed, was written."""
    target = _target(path)
    why = problem(path)
    if why:
        raise (IsADirectoryError if why == "is a directory" else FileExistsError)(
            0, why, str(target))
    before = _identity(target)
    if before is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    else:
        mode = stat.S_IMODE(before.st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        _put(tmp, target, before)
    except OSError as exc:
        raise statefile.named(exc, target) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _identity(target: Path) -> os.stat_result | None:
    """``lstat`` of ``target``, or None when nothing is there."""
    try:
        return os.lstat(target)
    except FileNotFoundError:
        return None


def _same(st: os.stat_result) -> tuple[int, int, int]:
    """What identifies a file across a check and a rename: device, inode and change time
    (ns; a file made anew may get a freed inode number back, never the old change time)."""
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _put(tmp: str, target: Path, before: os.stat_result | None) -> None:
    """Move the written file ``tmp`` to ``target``, replacing only the regular file
    ``before`` (None: only nothing). Raises FileExistsError when ``target`` changed."""
    if before is None:
        try:
            os.link(tmp, target)  # fails with EEXIST instead of replacing a newcomer
        except FileExistsError:
            raise FileExistsError(0, "something was created there while writing; left alone", str(target)) from None
        except OSError as exc:  # a file system without hard links (EPERM, ENOTSUP)
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP) or _identity(target) is not None:
                raise
            os.replace(tmp, target)
        return
    now = _identity(target)
    if now is None or not stat.S_ISREG(now.st_mode) or _same(now) != _same(before):
        raise FileExistsError(0, "it was replaced, changed or removed while writing; left alone", str(target))
    os.replace(tmp, target)
