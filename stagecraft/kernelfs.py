"""Whether a path lies on a kernel interface (procfs, sysfs, cgroupfs, ...) rather than
on a file system that keeps files: results and state must never go there.

``os.access`` cannot tell: for root it answers "writable" for most of /proc and /sys,
where creating a file then fails (or, for a file that exists, writes to the kernel).
The answer comes from the mount table (``/proc/self/mountinfo``, proc(5)): the file
system type of the longest mount point above the path. The table is read up to
``MOUNTINFO_MAX`` bytes; a table that cannot be read answers None (nothing known).
"""
from __future__ import annotations

import os

# Kernel interfaces (Documentation/filesystems in the kernel tree): none keeps a file
# that a program writes as a result.
KERNEL_TYPES = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "devpts", "bpf", "pstore", "efivarfs", "fusectl", "binfmt_misc", "mqueue", "selinuxfs",
    "autofs", "rpc_pipefs", "nsfs",
})
OCTAL = set("01234567")
MOUNTINFO_MAX = 1 << 20  # bytes; a host with thousands of mounts has a few hundred KiB


def _unescape(field: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space) decoded."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and set(field[i + 1:i + 4]) <= OCTAL:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """``[(mount point, file system type)]`` from mountinfo ``text``; malformed lines
    are skipped. Format: proc(5), ``/proc/[pid]/mountinfo``."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(" "), right.split(" ")
        if sep and len(fields) >= 5 and tail and tail[0]:
            mounts.append((_unescape(fields[4]), tail[0]))
    return mounts


def fs_type(path: str, mountinfo: str | None = None) -> str | None:
    """The file system type holding ``path`` (its links resolved; missing parts judged
    by their nearest existing parent's mount), or None when the table is unreadable."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", "rb") as f:
                mountinfo = f.read(MOUNTINFO_MAX).decode("utf-8", "replace")
        except OSError:
            return None
    target = os.path.realpath(path)
    best, kind = -1, None
    for point, fstype in parse_mountinfo(mountinfo):
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), fstype
    return kind


def kernel_interface(path: str, mountinfo: str | None = None) -> str:
    """``"on <type>, a kernel interface"`` when ``path`` lies on one (``KERNEL_TYPES``),
    else ""."""
    kind = fs_type(path, mountinfo)
    return f"on {kind}, a kernel interface, not a file system for results" if kind in KERNEL_TYPES else ""
