"""CPU probe: vendor, model, flags, x86-64 level, online CPUs, cgroup limits.

Reads root/proc/cpuinfo (its first MiB: the first processor's block and the processor
count, which only stands in when the online list is missing), root/sys/devices/system/
cpu/online and the cgroup files (see probes.cgroup), each through probes.fsread (regular
files only, non-blocking, capped). CPU lists count only CPU numbers below the online
list's highest + 1 (else probes.fsread.MAX_CPUS). When root is ``/`` the scheduler affinity
(sched_getaffinity) is taken into account too. Runs within its time budget like every
probe. Never raises: an unreadable /proc/cpuinfo, or a probe past its budget, gives state
``unusable`` with empty flags (the selection then only accepts kernel sets with no CPU
requirements).
"""
from __future__ import annotations

import math
import os
import time

from probes import cpuflags, fsread
from probes.cgroup import read_limits
from probes.types import UNUSABLE, USABLE, CpuProbe


def parse_cpuinfo(text: str) -> dict[str, object]:
    """/proc/cpuinfo text -> {vendor, model, arch, flags (frozenset), processors (int: the
    distinct ``processor`` numbers, at most probes.fsread.MAX_CPUS)}."""
    first: dict[str, str] = {}
    numbers: set[str] = set()  # each processor once, at most MAX_CPUS of them (issue 22 review)
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            continue
        key, val = key.strip(), val.strip()
        if key == "processor" and len(numbers) < fsread.MAX_CPUS:
            numbers.add(val)
        first.setdefault(key, val)
    processors = len(numbers)
    if "flags" in first:
        arch = "x86_64" if "lm" in first["flags"].split() else "x86"
        flags = frozenset(first["flags"].lower().split())
        vendor = first.get("vendor_id", "")
        model = first.get("model name", "")
    elif "Features" in first:
        arch = "aarch64" if first.get("CPU architecture", "8") >= "8" else "arm"
        flags = frozenset(first["Features"].lower().split())
        impl = first.get("CPU implementer", "")
        vendor = {"0x41": "ARM", "0x61": "Apple", "0xc0": "Ampere", "0x48": "HiSilicon",
                  "0x4e": "NVIDIA", "0x51": "Qualcomm"}.get(impl.lower(), impl)
        model = first.get("model name", "") or f"part {first.get('CPU part', '?')}"
    else:
        arch, flags, vendor, model = "", frozenset(), "", ""
    return {"vendor": vendor, "model": model, "arch": arch, "flags": flags,
            "processors": processors}


def _family(arch: str) -> str:
    """``x86`` for x86_64/i686, ``arm`` for aarch64/armv7l, else the name itself."""
    if arch in ("x86_64", "x86", "i386", "i686", "amd64"):
        return "x86"
    return "arm" if arch.startswith(("aarch64", "arm")) else arch


def _emulated(arch: str, flags: frozenset, notes: list[str],
              machine: str | None = None, auxv: bytes | None = None) -> tuple[str, frozenset]:
    """Under user-mode emulation (an arm64 image run by qemu-user on an x86-64 host),
    /proc/cpuinfo describes the host's CPU, not the one this process runs on: take the
    architecture from uname and, on aarch64, the features from AT_HWCAP/AT_HWCAP2 of
    /proc/self/auxv (which qemu emulates; probes.hwcap). Otherwise unchanged."""
    machine = machine or os.uname().machine
    if not arch or _family(arch) == _family(machine):
        return arch, flags
    if machine == "aarch64":
        from probes import hwcap  # only under emulation: struct and the tables cost 0.3 ms a start

        vec = hwcap.parse_auxv(auxv if auxv is not None else hwcap.read_auxv() or b"")
        flags = hwcap.aarch64_features(vec.get(hwcap.AT_HWCAP, 0), vec.get(hwcap.AT_HWCAP2, 0))
        notes.append(f"emulated aarch64 on a {arch} host: /proc/cpuinfo describes the host; "
                     "features from AT_HWCAP")
    else:
        flags = frozenset()
        notes.append(f"emulated {machine} on a {arch} host: /proc/cpuinfo describes the host; "
                     "CPU flags unknown")
    return machine, flags


def probe(root: str = "/", budget_s: float = 1.0) -> CpuProbe:
    """Probe the CPU within ``budget_s`` seconds (probes.budget); see the module
    docstring. Never raises: past the budget the result is ``unusable`` ("timeout")."""
    from probes.budget import BudgetExceeded, call_within

    t0 = time.monotonic()
    n = os.cpu_count() or 1
    try:
        r = call_within(lambda: _probe(root), budget_s, "CPU probe")
    except BudgetExceeded:
        r = CpuProbe(state=UNUSABLE, reason=f"timeout: the CPU probe did not finish within {budget_s:g} s: "
                     "CPU flags unknown", online=n, effective_cpus=n)
    except Exception as exc:  # noqa: BLE001 - a probe never raises
        r = CpuProbe(state=UNUSABLE, reason=f"probe failed: {type(exc).__name__}: {exc}",
                     online=n, effective_cpus=n)
    return r._replace(elapsed_ms=round((time.monotonic() - t0) * 1000, 2))


def _probe(root: str) -> CpuProbe:
    notes: list[str] = []
    text = fsread.read(root, "/proc/cpuinfo", fsread.LARGE)
    info = parse_cpuinfo(text or "")
    state, reason = USABLE, ""
    if text is None:
        state, reason = UNUSABLE, "/proc/cpuinfo unreadable: CPU flags unknown"
    arch = str(info["arch"]) or (os.uname().machine if root in ("", "/") else "")
    flags = info["flags"]
    assert isinstance(flags, frozenset)
    if root in ("", "/") and text is not None:
        arch, flags = _emulated(arch, flags, notes)
    level = cpuflags.isa_level(flags) if arch == "x86_64" else None

    online_txt = fsread.read(root, "/sys/devices/system/cpu/online")
    online_list = fsread.parse_range_list(online_txt) if online_txt else []
    online = len(online_list) or int(info["processors"]) or (os.cpu_count() or 1)  # type: ignore[call-overload]

    lim = read_limits(root)
    bound = online_list[-1] + 1 if online_list else fsread.MAX_CPUS
    cpuset = sum(1 for c in lim.cpuset if c < bound) if lim.cpuset else None
    cpuset = cpuset or None
    if root in ("", "/") and hasattr(os, "sched_getaffinity"):
        aff = len(os.sched_getaffinity(0))
        if cpuset is None or aff < cpuset:
            cpuset = aff if aff < online else cpuset
    candidates = [online]
    if cpuset:
        candidates.append(cpuset)
    if lim.quota_cpus:
        candidates.append(max(1, math.ceil(lim.quota_cpus - 1e-9)))
    effective = max(1, min(candidates))
    return CpuProbe(state=state, reason=reason, vendor=str(info["vendor"]), model=str(info["model"]),
                    arch=arch, flags=flags, isa_level=level, online=online, cpuset=cpuset,
                    quota_cpus=round(lim.quota_cpus, 3) if lim.quota_cpus else None,
                    memory_limit_bytes=lim.memory_bytes, effective_cpus=effective,
                    cgroup_version=lim.version, notes=tuple(notes))
