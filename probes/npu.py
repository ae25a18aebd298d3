"""Huawei Ascend NPU probe: device nodes, then ``npu-smi info`` when it is on PATH.

Nodes (Ascend docker runtime / MindX docs): /dev/davinci<N> per NPU chip, plus the shared
/dev/davinci_manager, /dev/devmm_svm and /dev/hisi_hdc that every container needs.
``npu-smi info`` prints a table whose rows per NPU are
``| 0     910B                | OK            | 70.0   34   0 / 0 |`` then
``| 0                         | 0000:C1:00.0  | 0   1197 / 13553   1365 / 32768 |``
(seen in many public READMEs, e.g. npu-smi 23.0.0 / 24.1.0 output). When another
container holds the devices, npu-smi fails with ``dcmi model initialized failed, because
the device is used. ret is -8020`` (Huawei knowledge base; gpustack and Ascend CI docs).
Driver version: root/usr/local/Ascend/driver/version.info, line ``Version=...``.
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

FAMILY = get("npu")  # nodes, control nodes, tool and its directories: probes.families
_ROW = re.compile(r"^\|\s*(\d+)\s+(\S+)\s*\|\s*(\S+)\s*\|")


def parse_npu_smi(text: str) -> list[tuple[int, str, str]]:
    """``npu-smi info`` text -> [(npu id, chip name, health)] from the first row of each NPU."""
    out = []
    for line in text.splitlines():
        m = _ROW.match(line.strip())
        if m and not m.group(2).startswith("0000:"):
            out.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def probe(root: str = "/", budget_s: float = 2.0, env: Mapping[str, str] | None = None) -> DeviceProbe:
    """Probe Ascend NPUs; never raises. States: absent (no /dev/davinci<N>, or
    ASCEND_RT_VISIBLE_DEVICES selects none: probes.visible), unusable (control nodes
    missing, no permission, busy, npu-smi timeout), usable. Only visible NPUs are listed."""
    env = os.environ if env is None else env
    return accel.timed("npu", lambda: _probe(root, budget_s, env), budget_s)


def _probe(root: str, budget_s: float, env: Mapping[str, str]) -> DeviceProbe:
    t0 = time.monotonic()
    nodes, stop, vis_notes = accel.gate(root, FAMILY, env)
    if stop:
        return stop
    info = fsread.read(root, "/usr/local/Ascend/driver/version.info") or ""
    m = re.search(r"^Version=(\S+)", info, re.MULTILINE)
    driver = m.group(1) if m else ""
    devs = [Device(index=i, node=p) for i, p in nodes]
    notes: list[str] = list(vis_notes)
    tool = fsread.which(root, FAMILY.tools[0], env.get("PATH"), FAMILY.tool_dirs)
    if tool is None:
        notes.append("npu-smi not found; chip names unknown")
        return DeviceProbe("npu", USABLE, devices=tuple(devs), driver_version=driver, notes=tuple(notes))
    left = max(0.1, budget_s - (time.monotonic() - t0))
    rc, out = fsread.run_tool([tool, "info"], left)
    if rc is None:
        return DeviceProbe("npu", UNUSABLE, accel.tool_failed("npu-smi info", out), devices=tuple(devs),
                           driver_version=driver)
    if "device is used" in out or "-8020" in out:
        return DeviceProbe("npu", UNUSABLE, "busy: the NPUs are held by another container or "
                           "process (npu-smi: 'because the device is used', ret -8020)",
                           devices=tuple(devs), driver_version=driver)
    if rc != 0:
        last = out.strip().splitlines()[-1][:160] if out.strip() else ""
        return DeviceProbe("npu", UNUSABLE, f"npu-smi info failed (exit {rc}) {last}".strip(),
                           devices=tuple(devs), driver_version=driver)
    rows = parse_npu_smi(out)
    if rows:
        devs = accel.keep_visible([Device(index=i, name=f"Ascend {name}", arch=name, health=h,
                                           node=f"/dev/davinci{i}") for i, name, h in rows], nodes) or devs
    m = re.search(r"Version:\s*(\S+)", out)
    driver = driver or (m.group(1) if m else "")
    healthy = [d for d in devs if d.health in ("", "OK", "Warning")]
    if not healthy:
        return DeviceProbe("npu", UNUSABLE, "every NPU reports Health " + devs[0].health,
                           devices=tuple(devs), driver_version=driver)
    return DeviceProbe("npu", USABLE, devices=tuple(healthy), driver_version=driver, notes=tuple(notes))
