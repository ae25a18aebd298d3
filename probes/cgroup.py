"""cgroup v1 and v2 limits of the process: CPU quota, cpuset and memory limit.

The process's own cgroup is resolved from root/proc/self/cgroup and the cgroup mounts in
root/proc/self/mountinfo (proc(5): fields ``id parent major:minor root mountpoint opts
... - fstype source superopts``). A cgroup path relative to the mount's root gives the
directory; where that directory is not there (a container without a cgroup namespace on
cgroup v1 sees its own cgroup mounted at the mount point) the mount point itself is used.
Limits are read at that directory and each ancestor up to the mount point; the tightest
wins. Without mountinfo, /sys/fs/cgroup's usual layouts are tried.

Files (kernel docs Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/):
v2 cpu.max ``"$MAX $PERIOD"`` (``max`` = no limit), cpuset.cpus.effective, memory.max;
v1 cpu.cfs_quota_us (-1 = no limit) / cpu.cfs_period_us, cpuset.effective_cpus or
cpuset.cpus, memory.limit_in_bytes (a huge value = no limit). Every file is read through
probes._fs (regular files only, non-blocking, at most 64 KiB; mountinfo 1 MiB); CPU lists
keep CPU numbers below probes._fs.MAX_CPUS; at most 64 ancestor directories are read.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from probes._record import NamedTuple

from probes import _fs

UNLIMITED_MEMORY = 1 << 60
MAX_DEPTH = 64  # cgroup directories read, the process's own and its ancestors


class Limits(NamedTuple):
    """cgroup limits; None means no limit found. quota_cpus in CPUs (1.5), memory in bytes."""

    version: int | None = None
    quota_cpus: float | None = None
    cpuset: tuple[int, ...] | None = None
    memory_bytes: int | None = None
    cpu_dir: str = ""


def _own_paths(root: str) -> tuple[dict[str, str], str | None]:
    """controller -> cgroup path (v1), and the v2 path ("0::/...") if any."""
    v1: dict[str, str] = {}
    v2 = None
    for line in (_fs.read(root, "/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            v2 = path
        for c in ctrls.split(","):
            if c:
                v1[c] = path
    return v1, v2


def _mounts(root: str) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, super options) of cgroup mounts."""
    out = []
    for line in (_fs.read(root, "/proc/self/mountinfo", _fs.LARGE) or "").splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        f = left.split()
        r = right.split()
        if len(f) < 5 or len(r) < 1 or r[0] not in ("cgroup", "cgroup2"):
            continue
        supers = set(r[2].split(",")) if len(r) > 2 else set()
        out.append((r[0], f[3].replace("\\040", " "), f[4].replace("\\040", " "), supers))
    return out


def _dirs(root: str, mountpoint: str, mount_root: str, path: str | None) -> list[str]:
    """The process's cgroup dir under mountpoint and its ancestors (machine paths)."""
    rel = ""
    if path is not None:
        p = path.rstrip("/")
        mr = mount_root.rstrip("/")
        if mr and p.startswith(mr + "/"):
            rel = p[len(mr):]
        elif mr and p == mr:
            rel = ""
        else:
            rel = p
    start = mountpoint.rstrip("/") + rel
    if not os.path.isdir(_fs.at(root, start)):
        start = mountpoint.rstrip("/")
    dirs = [start]
    while len(dirs[-1]) > len(mountpoint.rstrip("/")) and len(dirs) < MAX_DEPTH:
        up = os.path.dirname(dirs[-1])
        if up == dirs[-1]:  # "/" (a cgroup mounted at /): no further up
            break
        dirs.append(up)
    return dirs


def _first(root: str, dirs: list[str], name: str) -> str | None:
    val = _fs.read(root, f"{dirs[0]}/{name}")
    return val.strip() if val is not None else None


def _min_over(root: str, dirs: list[str], name: str, parse) -> float | None:  # type: ignore[no-untyped-def]
    best = None
    for d in dirs:
        raw = _fs.read(root, f"{d}/{name}")
        if raw is None:
            continue
        v = parse(raw.strip())
        if v is not None and (best is None or v < best):
            best = v
    return best


def _count(text: str) -> int | None:
    """A count the kernel writes: 1 to 20 ASCII digits (2**64 has 20), else None. int()
    would also take signs, ``_``, spaces and other scripts' digits, and a quota of 400
    digits divided by its period overflowed a float, which lost every limit (issue 22
    review)."""
    return int(text) if 0 < len(text) <= 20 and text.isascii() and text.isdigit() else None


def _quota(quota: str, period: str) -> float | None:
    """CPUs of a CFS quota and period (both in microseconds); None for no limit (``max``,
    v1's ``-1``) or a value the kernel does not write (zero, negative, not a count)."""
    q, p = _count(quota), _count(period)
    return q / p if q and p else None


def _v2_cpu(text: str) -> float | None:
    quota, _, period = text.partition(" ")
    return _quota(quota, period.strip())


def _int_limit(text: str) -> int | None:
    v = _count(text)  # "max" and anything else the kernel does not write: no limit
    return None if v is None or v >= UNLIMITED_MEMORY else v


def read_limits(root: str = "/") -> Limits:
    """The process's cgroup limits as seen under root. Never raises."""
    try:
        return _read(root)
    except Exception:  # noqa: BLE001 - limits are best effort
        return Limits()


def _read(root: str) -> Limits:
    v1paths, v2path = _own_paths(root)
    mounts = _mounts(root)
    if not mounts:  # no mountinfo: guess the usual layout
        if _fs.exists(root, "/sys/fs/cgroup/cgroup.controllers"):
            mounts = [("cgroup2", "/", "/sys/fs/cgroup", set())]
        else:
            for c, d in (("cpu", "cpu"), ("cpuset", "cpuset"), ("memory", "memory")):
                for cand in (d, "cpu,cpuacct", "cpuacct,cpu"):
                    if _fs.exists(root, f"/sys/fs/cgroup/{cand}"):
                        mounts.append(("cgroup", "/", f"/sys/fs/cgroup/{cand}", {c}))
                        break
    v1 = {c: m for m in mounts if m[0] == "cgroup" for c in m[3] if c in ("cpu", "cpuset", "memory")}
    v2m = next((m for m in mounts if m[0] == "cgroup2"), None)
    if v1:
        quota = cpuset = mem = None
        cpu_dir = ""
        if "cpu" in v1:
            _, mroot, mp, _ = v1["cpu"]
            dirs = _dirs(root, mp, mroot, v1paths.get("cpu"))
            cpu_dir = dirs[0]
            vals = []
            for d in dirs:
                q = _quota((_fs.read(root, f"{d}/cpu.cfs_quota_us") or "").strip(),
                           (_fs.read(root, f"{d}/cpu.cfs_period_us") or "").strip())
                if q is not None:
                    vals.append(q)
            quota = min(vals) if vals else None
        if "cpuset" in v1:
            _, mroot, mp, _ = v1["cpuset"]
            dirs = _dirs(root, mp, mroot, v1paths.get("cpuset"))
            txt = _first(root, dirs, "cpuset.effective_cpus") or _first(root, dirs, "cpuset.cpus")
            cpuset = tuple(_fs.parse_range_list(txt)) if txt else None
        if "memory" in v1:
            _, mroot, mp, _ = v1["memory"]
            dirs = _dirs(root, mp, mroot, v1paths.get("memory"))
            m = _min_over(root, dirs, "memory.limit_in_bytes", _int_limit)
            mem = int(m) if m is not None else None
        return Limits(1, quota, cpuset or None, mem, cpu_dir)
    if v2m is not None:
        _, mroot, mp, _ = v2m
        dirs = _dirs(root, mp, mroot, v2path)
        quota = _min_over(root, dirs, "cpu.max", _v2_cpu)
        txt = _first(root, dirs, "cpuset.cpus.effective")
        cpuset = tuple(_fs.parse_range_list(txt)) if txt else None
        m = _min_over(root, dirs, "memory.max", _int_limit)
        return Limits(2, quota, cpuset or None, int(m) if m is not None else None, dirs[0])
    return Limits()
