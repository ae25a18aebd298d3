"""Reading the machine through one root path (default ``/``), so tests can hand in a tree.

Fixture trees use plain files for device nodes: a probe only checks that a node exists
and that this process may open it read-write (``os.access``), never that it is a
character device.
"""
from __future__ import annotations

import os
import re


def at(root: str, path: str) -> str:
    """``path`` (absolute, as on the machine) seen under ``root``."""
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def read(root: str, path: str, limit: int = 1 << 20) -> str | None:
    """Text of root/path (at most ``limit`` bytes), or None when missing or unreadable."""
    try:
        with open(at(root, path), "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def listdir(root: str, path: str) -> list[str]:
    """Sorted names in root/path; empty when missing or unreadable."""
    try:
        return sorted(os.listdir(at(root, path)))
    except OSError:
        return []


def exists(root: str, path: str) -> bool:
    return os.path.exists(at(root, path))


def numbered(root: str, directory: str, prefix: str) -> list[tuple[int, str]]:
    """Entries ``<prefix><N>`` in root/directory as (N, absolute machine path), by N."""
    pat = re.compile(re.escape(prefix) + r"(\d+)$")
    out = []
    for name in listdir(root, directory):
        m = pat.match(name)
        if m:
            out.append((int(m.group(1)), directory.rstrip("/") + "/" + name))
    return sorted(out)


def may_open_rw(root: str, path: str) -> bool:
    """Whether this process may open root/path read-write (permission bits, uid, groups)."""
    return os.access(at(root, path), os.R_OK | os.W_OK)


def which(root: str, name: str, env_path: str | None, extra: tuple[str, ...] = ()) -> str | None:
    """First executable ``name`` in PATH (plus ``extra`` dirs) under root, as a real path."""
    dirs = [d for d in (env_path or "/usr/local/bin:/usr/bin:/bin").split(":") if d]
    for d in [*dirs, *extra]:
        p = at(root, d.rstrip("/") + "/" + name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def run_tool(argv: list[str], timeout_s: float) -> tuple[int | None, str]:
    """Run a vendor tool; (exit code, stdout+stderr text). Exit code None on timeout or
    when it cannot be started (the text says which). Never raises."""
    import subprocess  # only here: tools run only when device nodes are present

    try:
        cp = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=max(timeout_s, 0.05), check=False)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:.1f} s"
    except OSError as exc:
        return None, f"cannot run: {exc}"
    return cp.returncode, cp.stdout.decode("utf-8", "replace")


def parse_range_list(text: str) -> list[int]:
    """Kernel CPU list ``"0-3,8,10-11"`` -> [0, 1, 2, 3, 8, 10, 11]; bad parts are skipped."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if hi else a
        except ValueError:
            continue
        out.extend(range(a, b + 1))
    return out
