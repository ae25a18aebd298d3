"""Where the start-up report goes: a runtime directory that works with a read-only root
filesystem and any uid.

Order (first writable wins): $STAGECRAFT_REPORT (an absolute file path, entrypoint.options),
$XDG_RUNTIME_DIR/stagecraft (when absolute: the XDG Base Directory spec says a relative
one is to be ignored), /run/stagecraft, /tmp/stagecraft-<uid>, /dev/shm/stagecraft-<uid>.
Docker mounts /dev/shm as a tmpfs even with --read-only, so the chain ends somewhere
writable in practice. A directory we create is mode 0700; one of ours that exists but is
a symbolic link or belongs to another uid is skipped.

Only regular files are written, and no node the entrypoint did not write is replaced
(issue 22: ``STAGECRAFT_REPORT=/dev/null`` turned /dev/null into a regular file). The
report is written to a new temporary file (O_EXCL, O_NOFOLLOW) next to the path, then:
- nothing at the path: hard-linked there (link(2) never replaces), the temporary removed;
- a regular file of this euid with one link whose content is a report (a restarted
  container's): renamed over it, after checking that the path still names the very file
  checked (device and inode), which leaves a window of microseconds in which only someone
  who may write that directory could swap the node;
- anything else (device, FIFO, socket, directory, symbolic link, someone else's file):
  left alone, and the next location is tried; ``write`` returns a line saying so.
"""
from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FILE = "report.json"
MAX_REPORT = 4 << 20  # bytes read of a report (one is a few KiB)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))


def candidates(env: Mapping[str, str]) -> list[str]:
    """Report file paths to try, in order."""
    uid = os.getuid()
    out = []
    if env.get("STAGECRAFT_REPORT"):
        out.append(env["STAGECRAFT_REPORT"])
    xdg = env.get("XDG_RUNTIME_DIR") or ""
    if xdg.startswith("/"):
        out.append(os.path.join(xdg, "stagecraft", FILE))
    out += ["/run/stagecraft/" + FILE, f"/tmp/stagecraft-{uid}/{FILE}", f"/dev/shm/stagecraft-{uid}/{FILE}"]
    return out


def _usable_dir(d: str, explicit: bool) -> bool:
    """A directory we may write the report into: ours, a real directory (or, when the user
    named the path, any writable one). Creates it (0700) when missing: with its parents
    when the user named the path ($STAGECRAFT_REPORT), else only its last component, so a
    runtime directory that does not exist ($XDG_RUNTIME_DIR=/nonexistent/dir) is skipped,
    never made: the XDG Base Directory spec has the system create it, not its users."""
    try:
        if explicit:
            os.makedirs(d, mode=0o700, exist_ok=True)
        else:
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:  # there already, or made by an entrypoint starting beside
                pass
        st = os.stat(d) if explicit else os.lstat(d)
    except (OSError, ValueError):
        return False
    if not stat.S_ISDIR(st.st_mode) or not os.access(d, os.W_OK | os.X_OK):
        return False
    return explicit or st.st_uid == os.getuid()


def kind(mode: int) -> str:
    """``"a FIFO"``, ``"a character device"``, ... for an lstat mode; ``"a file"`` otherwise."""
    return next((name for test, name in _KINDS if test(mode)), "a file")


def load(path: str) -> dict[str, Any] | None:
    """A report at ``path`` (a regular file, read non-blocking, at most MAX_REPORT bytes,
    probes.fsread) as a dict, or None when it is none."""
    import json

    from probes import fsread

    raw = fsread.read_file(path, MAX_REPORT)
    try:
        data = json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == 1 and "probes" in data else None


def _ours(path: str) -> tuple[tuple[int, int] | None, str]:
    """What stands at ``path``: (None, "") nothing; ((dev, ino), "") a report this euid
    wrote, which may be replaced; (None, what it is) anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as exc:
        return None, f"not checkable ({exc})"
    if not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            try:
                what += f" to {kind(os.stat(path).st_mode)}"
            except OSError:
                what += " to nothing"
        return None, what
    if st.st_uid != os.geteuid() or st.st_nlink != 1:
        return None, "a file this entrypoint did not write (another owner, or other links)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return None, f"not readable ({exc.strerror})"
    try:
        fst = os.fstat(fd)
    finally:
        os.close(fd)
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or load(path) is None:
        return None, "a file this entrypoint did not write"
    return (st.st_dev, st.st_ino), ""


def _tmp_file_at(path: str, data: bytes) -> None:
    """A new file at ``path`` holding ``data`` (O_EXCL, O_NOFOLLOW: never an existing
    node). Raises OSError (the file it created is removed again)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def _tmp_file(d: str, data: bytes) -> str | None:
    """A new file in ``d`` holding ``data`` (see _tmp_file_at); its path, or None."""
    tmp = os.path.join(d, f".{FILE}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    try:
        _tmp_file_at(tmp, data)
    except (OSError, ValueError):
        return None
    return tmp


def _place(tmp: str, path: str, old: tuple[int, int] | None, data: bytes) -> bool:
    """Put the written ``tmp`` at ``path``: link when nothing was there (on a filesystem
    without hard links, create it with O_EXCL and write ``data``: never a replacement,
    though a reader may see it half written), rename over the old report ``old``
    (device, inode) only while the path still names it."""
    try:
        if old is None:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError:
                _tmp_file_at(path, data)
            return True
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == old:
            os.replace(tmp, path)
            return True
    except OSError:
        pass
    return False


def write(text: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """Write the report; return (its path or None when no candidate was writable, and ""
    or one line naming the paths skipped because a node stands there that this
    entrypoint did not write). Never raises."""
    data = text.encode("utf-8", "surrogateescape")
    skipped: list[tuple[str, str]] = []
    written = None
    for path in candidates(env):
        d, base = os.path.split(path)
        if not base:
            skipped.append((path, "a directory"))
            continue
        if not _usable_dir(d or ".", explicit=path == env.get("STAGECRAFT_REPORT")):
            continue
        old, what = _ours(path)
        if what:
            skipped.append((path, what))
            continue
        tmp = _tmp_file(d or ".", data)
        if tmp is None:
            continue
        placed = _place(tmp, path, old, data)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if placed:
            written = path
            break
        skipped.append((path, "changed while the report was written"))
    return written, _skipped_line(skipped, written)


def _skipped_line(skipped: list[tuple[str, str]], written: str | None) -> str:
    if not skipped:
        return ""
    from probes.show import shown

    where = f"written to {written}" if written else "no writable location left"
    return (f"report not written to {', '.join(f'{shown(p, 200)} ({what})' for p, what in skipped)}: "
            f"never replaced; {where}")


def find(env: Mapping[str, str]) -> str | None:
    """The newest existing report among the candidates (regular files only), or None."""
    found = []
    for p in candidates(env):
        try:
            st = os.lstat(p)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((st.st_mtime, p))
    return max(found)[1] if found else None
