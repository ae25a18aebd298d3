"""Cambricon MLU probe: /dev/cambricon_dev<N>, /dev/cambricon_ctl, then ``cnmon``.

``cnmon`` (CNMON v4/v5) prints a table whose first row per card reads
``| 0     /   MLU370-X8    v1.1.6 | ...`` and whose header carries ``Driver v5.10.13``
or a ``Driver`` column (PaddlePaddle's MLU install guide shows both layouts).
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

FAMILY = get("mlu")  # nodes, control node and tool: probes.families
_CARD = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+(MLU\S*)\s+(v\S+)\s*\|(.*)$")


def parse_cnmon(text: str) -> tuple[list[Device], str]:
    """cnmon table -> (Devices, driver version)."""
    devs, driver = [], ""
    m = re.search(r"Driver\s+v(\d[\w.]*)", text)
    if m:
        driver = m.group(1)
    for line in text.splitlines():
        c = _CARD.match(line.strip())
        if c:
            devs.append(Device(index=int(c.group(1)), name=c.group(3), arch=c.group(3),
                               node=f"/dev/cambricon_dev{int(c.group(1))}"))
            if not driver:
                d = re.search(r"\bv(\d+\.\d+[\w.]*)", c.group(5))
                driver = d.group(1) if d else ""
    return devs, driver


def probe(root: str = "/", budget_s: float = 2.0, env: Mapping[str, str] | None = None) -> DeviceProbe:
    """Probe Cambricon MLUs; never raises. absent: no /dev/cambricon_dev<N>, or
    MLU_VISIBLE_DEVICES / CN_VISIBLE_DEVICES selects none (probes.visible); unusable:
    control node missing, no permission, cnmon failing. Only visible MLUs are listed."""
    env = os.environ if env is None else env
    return accel.timed("mlu", lambda: _probe(root, budget_s, env), budget_s)


def _probe(root: str, budget_s: float, env: Mapping[str, str]) -> DeviceProbe:
    t0 = time.monotonic()
    nodes, stop, notes = accel.gate(root, FAMILY, env)
    if stop:
        return stop
    devs = [Device(index=i, node=p) for i, p in nodes]
    tool = fsread.which(root, FAMILY.tools[0], env.get("PATH"), FAMILY.tool_dirs)
    if tool is None:
        return DeviceProbe("mlu", USABLE, devices=tuple(devs), notes=(*notes, "cnmon not found; models unknown"))
    rc, out = fsread.run_tool([tool], max(0.1, budget_s - (time.monotonic() - t0)))
    if rc is None:
        return DeviceProbe("mlu", UNUSABLE, accel.tool_failed("cnmon", out), devices=tuple(devs))
    if rc != 0:
        return DeviceProbe("mlu", UNUSABLE, f"cnmon failed (exit {rc})", devices=tuple(devs))
    parsed, driver = parse_cnmon(out)
    parsed = accel.keep_visible(parsed, nodes)
    return DeviceProbe("mlu", USABLE, devices=tuple(parsed or devs), driver_version=driver, notes=tuple(notes))
