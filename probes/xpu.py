"""Kunlunxin (Kunlun) XPU probe: device nodes, then ``xpu_smi -m`` when it is on PATH.

Nodes: /dev/xpu<N> per device and /dev/xpuctrl (Kunlunxin's container docs pass both
with --device). ``xpu_smi -m`` prints one whitespace-separated line per device; open
parsers read field 1 as the device id, field 18 as total memory in MiB and the last
fields, in parentheses, as the model name (swanlab's kunlunxin collector;
Project-HAMi-style device plugins read ``fields[21]``). The layout is inferred from those
parsers, so this probe treats every field except the id as optional.
Driver version: ``xpu_smi -q`` ``Driver Version`` line is not read on the start path.
"""
from __future__ import annotations

import os
import re
import time

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping

from probes import accel, fsread
from probes.families import get
from probes.types import UNUSABLE, USABLE, Device, DeviceProbe

FAMILY = get("xpu")  # nodes, control node, tool and its directories: probes.families


def parse_xpu_smi_m(text: str) -> list[Device]:
    """``xpu_smi -m`` text -> Devices (index, name, memory_bytes where present)."""
    devs = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 2 or not f[1].isdecimal():
            continue
        name = ""
        m = re.search(r"\(([^)]*)\)\s*$", line)
        if m:
            name = m.group(1).strip()
        mem = None
        if len(f) > 18 and f[18].isdecimal():
            mem = int(f[18]) * 1024 * 1024
        devs.append(Device(index=int(f[1]), name=name, arch=name.split()[-1] if name else "",
                           memory_bytes=mem, node=f"/dev/xpu{int(f[1])}"))
    return devs


def probe(root: str = "/", budget_s: float = 2.0, env: Mapping[str, str] | None = None) -> DeviceProbe:
    """Probe Kunlun XPUs; never raises. absent: no /dev/xpu<N>, or XPU_VISIBLE_DEVICES
    selects none (probes.visible); unusable: /dev/xpuctrl missing, no permission, busy or
    xpu_smi failing; usable otherwise. Only visible devices are listed."""
    env = os.environ if env is None else env
    return accel.timed("xpu", lambda: _probe(root, budget_s, env), budget_s)


def _probe(root: str, budget_s: float, env: Mapping[str, str]) -> DeviceProbe:
    t0 = time.monotonic()
    nodes, stop, notes = accel.gate(root, FAMILY, env)
    if stop:
        return stop
    devs = [Device(index=i, node=p) for i, p in nodes]
    tool = fsread.which(root, FAMILY.tools[0], env.get("PATH"), FAMILY.tool_dirs)
    if tool is None:
        return DeviceProbe("xpu", USABLE, devices=tuple(devs),
                           notes=(*notes, "xpu_smi not found; models unknown"))
    rc, out = fsread.run_tool([tool, "-m"], max(0.1, budget_s - (time.monotonic() - t0)))
    if rc is None:
        return DeviceProbe("xpu", UNUSABLE, accel.tool_failed("xpu_smi -m", out), devices=tuple(devs))
    low = out.lower()
    if "busy" in low or "in use" in low or "occupied" in low:
        return DeviceProbe("xpu", UNUSABLE, "busy: xpu_smi says the devices are in use: "
                           + out.strip().splitlines()[-1][:160], devices=tuple(devs))
    if rc != 0:
        last = out.strip().splitlines()[-1][:160] if out.strip() else ""
        return DeviceProbe("xpu", UNUSABLE, f"xpu_smi -m failed (exit {rc}) {last}".strip(), devices=tuple(devs))
    parsed = accel.keep_visible(parse_xpu_smi_m(out), nodes)
    return DeviceProbe("xpu", USABLE, devices=tuple(parsed or devs), notes=tuple(notes))
