"""Where the start-up report goes: a runtime directory that works with a read-only root
filesystem and any uid.

Order (first writable wins): $STAGECRAFT_REPORT (a file path), $XDG_RUNTIME_DIR/stagecraft,
/run/stagecraft, /tmp/stagecraft-<uid>, /dev/shm/stagecraft-<uid>. Docker mounts /dev/shm
as a tmpfs even with --read-only, so the chain ends somewhere writable in practice.
A directory we create is mode 0700; one that exists but belongs to another uid is skipped.
The file is written to a temporary name and renamed, so readers never see half a report.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping

FILE = "report.json"


def candidates(env: Mapping[str, str]) -> list[str]:
    """Report file paths to try, in order."""
    uid = os.getuid()
    out = []
    if env.get("STAGECRAFT_REPORT"):
        out.append(env["STAGECRAFT_REPORT"])
    if env.get("XDG_RUNTIME_DIR"):
        out.append(os.path.join(env["XDG_RUNTIME_DIR"], "stagecraft", FILE))
    out += ["/run/stagecraft/" + FILE, f"/tmp/stagecraft-{uid}/{FILE}", f"/dev/shm/stagecraft-{uid}/{FILE}"]
    return out


def _usable_dir(d: str, explicit: bool) -> bool:
    """A directory we may write the report into: ours (or, when the user named the path,
    any writable one). Creates it (0700) when missing."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.stat(d)
    except OSError:
        return False
    if not os.access(d, os.W_OK | os.X_OK):
        return False
    return explicit or st.st_uid == os.getuid()


def write(text: str, env: Mapping[str, str]) -> str | None:
    """Write the report; return its path, or None when no candidate was writable."""
    for path in candidates(env):
        d = os.path.dirname(path) or "."
        if not _usable_dir(d, explicit=path == env.get("STAGECRAFT_REPORT")):
            continue
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
            return path
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return None


def find(env: Mapping[str, str]) -> str | None:
    """The newest existing report among the candidates, or None."""
    found = [p for p in candidates(env) if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else None
