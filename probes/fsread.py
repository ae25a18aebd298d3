"""Reading the machine through one root path (default ``/``), so tests can hand in a tree.

Every file a probe or the entrypoint reads goes through ``read_bytes`` / ``read``: only a
regular file is read (a FIFO, a device node, a socket or a directory where a file is
expected reads as missing), it is opened non-blocking (a FIFO or a device can never hold
the start) and at most ``limit`` bytes of it are read. /proc and /sys attribute files are
regular files, so the machine's own files pass. Vendor tools run through ``run_tool``:
its output is read up to a cap, the tool and its process group are killed at the budget.

Fixture trees use plain files for device nodes: a probe only checks that a node exists
and that this process may open it read-write (``os.access``), never that it is a
character device.
"""
from __future__ import annotations

import os
import stat

SMALL = 64 << 10  # bytes: a /sys or cgroup attribute (a CPU list of 8192 CPUs is < 48 KiB)
LARGE = 1 << 20  # bytes: /proc/cpuinfo, /proc/self/mountinfo, a vendor tool's output
MAX_ENTRIES = 1 << 16  # names listed from one directory
# Linux's CONFIG_NR_CPUS is at most 8192 (arch/x86/Kconfig, MAXSMP; arm64 allows 4096):
# no CPU list the kernel writes names a CPU number at or above it.
MAX_CPUS = 8192
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def at(root: str, path: str) -> str:
    """``path`` (absolute, as on the machine) seen under ``root``."""
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def read_file(path: str, limit: int = SMALL) -> bytes | None:
    """The first ``limit`` bytes of the regular file at ``path`` (a real path), or None
    when it is missing, unreadable or not a regular file (FIFO, device, socket,
    directory). Opens with O_NONBLOCK after a stat, and checks the opened file again
    (fstat), so a node swapped in between is not read either. Never blocks on a FIFO or
    a device; never raises."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, _FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            b = os.read(fd, min(left, LARGE))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_bytes(root: str, path: str, limit: int = SMALL) -> bytes | None:
    """``read_file`` of root/path."""
    return read_file(at(root, path), limit)


def read(root: str, path: str, limit: int = SMALL) -> str | None:
    """Text of root/path (its first ``limit`` bytes, UTF-8 with replacement), or None when
    missing, unreadable or not a regular file (see ``read_file``)."""
    data = read_bytes(root, path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def listdir(root: str, path: str) -> list[str]:
    """Sorted names in root/path (at most MAX_ENTRIES of them); empty when missing or
    unreadable."""
    out: list[str] = []
    try:
        with os.scandir(at(root, path)) as it:
            for entry in it:
                out.append(entry.name)
                if len(out) >= MAX_ENTRIES:
                    break
    except (OSError, ValueError):
        return []
    return sorted(out)


def exists(root: str, path: str) -> bool:
    return os.path.exists(at(root, path))


def numbered(root: str, directory: str, prefix: str) -> list[tuple[int, str]]:
    """Entries ``<prefix><N>`` in root/directory as (N, absolute machine path), by N."""
    out = []
    for name in listdir(root, directory):
        n = name[len(prefix):]  # 1 to 9 ASCII digits (not ``re``: off the start path)
        if name.startswith(prefix) and 0 < len(n) <= 9 and n.isascii() and n.isdigit():
            out.append((int(n), directory.rstrip("/") + "/" + name))
    return sorted(out)


def may_open_rw(root: str, path: str) -> bool:
    """Whether this process may open root/path read-write (permission bits, uid, groups)."""
    return os.access(at(root, path), os.R_OK | os.W_OK)


def which(root: str, name: str, env_path: str | None, extra: tuple[str, ...] = ()) -> str | None:
    """First executable ``name`` in PATH (plus ``extra`` dirs) under root, as a real path.
    Only absolute PATH entries count (a relative one would depend on the working
    directory); at most 64 entries are looked at."""
    dirs = [d for d in (env_path or "/usr/local/bin:/usr/bin:/bin").split(":") if d.startswith("/")][:64]
    for d in [*dirs, *extra]:
        p = at(root, d.rstrip("/") + "/" + name)
        try:
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        except ValueError:  # a NUL in a PATH entry
            continue
    return None


def run_tool(argv: list[str], timeout_s: float, limit: int = LARGE) -> tuple[int | None, str]:
    """Run a vendor tool; (exit code, stdout+stderr text, at most ``limit`` bytes). Exit
    code None when it cannot be started, runs past ``timeout_s`` seconds or prints more
    than ``limit`` bytes (the text says which): it is then killed with its process group.
    Never raises, never waits past the budget for the tool or a child holding its pipe."""
    from probes._tool import run

    return run(argv, timeout_s, limit)


def parse_range_list(text: str, bound: int = MAX_CPUS) -> list[int]:
    """Kernel CPU list ``"0-3,8,10-11"`` -> [0, 1, 2, 3, 8, 10, 11]: CPU numbers below
    ``bound`` only (the kernel names none at or above NR_CPUS, see MAX_CPUS; a caller
    that knows the machine's CPUs passes their count), each once, in order. Bad parts
    (not ``N`` or ``N-M`` in ASCII digits, or M < N) are skipped. ``bound`` is capped at
    MAX_CPUS, and ranges are clipped and merged before they are expanded, so the cost is
    O(parts log parts + the CPUs listed) whatever the numbers say."""
    bound = max(0, min(bound, MAX_CPUS))
    spans = []
    for part in text.strip().split(","):
        lo, dash, hi = part.strip().partition("-")
        if not _number(lo) or (dash and not _number(hi)):
            continue
        a = int(lo)
        b = int(hi) if dash else a
        if a <= b and a < bound:
            spans.append((a, min(b, bound - 1)))
    out: list[int] = []
    for a, b in sorted(spans):
        if out and a <= out[-1]:
            a = out[-1] + 1
        out.extend(range(a, b + 1))
    return out


def _number(text: str) -> bool:
    """1 to 12 ASCII digits (int() would also take signs, spaces, ``_`` and other
    scripts' digits, none of which the kernel writes)."""
    return 0 < len(text) <= 12 and text.isascii() and text.isdigit()
