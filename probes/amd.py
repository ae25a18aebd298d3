"""AMD GPU (ROCm) probe: /dev/kfd, /dev/dri/renderD*, and the KFD topology in sysfs.

Facts (ROCm docs "KFD Topology", Linux drivers/gpu/drm/amd/amdkfd/kfd_topology.c): each
node root/sys/class/kfd/kfd/topology/nodes/<N>/properties holds ``key value`` lines; GPU
nodes have ``simd_count`` > 0 (CPU nodes 0) and ``gfx_target_version`` =
major*10000 + minor*100 + stepping, so 90010 is gfx90a and 110000 gfx1100. ROCm
containers need ``--device /dev/kfd --device /dev/dri`` and the video/render group.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping

from probes import accel, fsread, visible
from probes.families import get
from probes.types import ABSENT, UNUSABLE, USABLE, Device, DeviceProbe

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
FAMILY = get("amd")  # render nodes and /dev/kfd: probes.families


def gfx_name(target_version: int) -> str:
    """KFD gfx_target_version (90010) -> ``"gfx90a"``."""
    major, rest = divmod(target_version, 10000)
    minor, step = divmod(rest, 100)
    return f"gfx{major}{minor:x}{step:x}"


def parse_properties(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        k, _, v = line.strip().partition(" ")
        try:
            out[k] = int(v.strip())
        except ValueError:
            continue
    return out


def probe(root: str = "/", budget_s: float = 1.0, env: Mapping[str, str] | None = None) -> DeviceProbe:
    """Probe AMD GPUs; never raises. absent: no /dev/kfd and no GPU in the topology, or
    ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES select none (probes.visible); unusable:
    /dev/kfd or render nodes missing, or no permission; usable otherwise. Only visible
    GPUs are listed; their ``uuid`` is ROCr's ``GPU-<unique_id in hex>``."""
    env = os.environ if env is None else env
    return accel.timed("amd", lambda: _probe(root, env), budget_s)


def _probe(root: str, env: Mapping[str, str]) -> DeviceProbe:
    why = visible.hidden_reason("amd", env)
    if why:
        return DeviceProbe("amd", ABSENT, why)
    gpus = []
    for node in fsread.listdir(root, TOPOLOGY):
        props = parse_properties(fsread.read(root, f"{TOPOLOGY}/{node}/properties") or "")
        if props.get("simd_count", 0) <= 0:
            continue
        name = (fsread.read(root, f"{TOPOLOGY}/{node}/name") or "").strip()
        gfx = gfx_name(props["gfx_target_version"]) if props.get("gfx_target_version") else name
        mem = parse_properties(fsread.read(root, f"{TOPOLOGY}/{node}/mem_banks/0/properties") or "")
        uid = props.get("unique_id")
        gpus.append(Device(index=int(node) if node.isdecimal() else len(gpus), name=name or gfx,
                           arch=gfx, memory_bytes=mem.get("size_in_bytes"),
                           uuid=f"GPU-{uid:016x}" if uid else "",
                           node=f"/dev/dri/renderD{props['drm_render_minor']}"
                           if "drm_render_minor" in props else ""))
    notes: list[str] = []
    if gpus:
        gpus, notes, why = visible.select("amd", gpus, env)
        if why:
            return DeviceProbe("amd", ABSENT, why, notes=tuple(notes))
    kfd = fsread.exists(root, "/dev/kfd")
    renders = fsread.numbered(root, *FAMILY.node_parts())
    if not kfd and not gpus:
        return DeviceProbe("amd", ABSENT, "no AMD GPU visible (no /dev/kfd, no GPU in KFD topology)")
    if not kfd:
        return DeviceProbe("amd", UNUSABLE, "the amdgpu driver is loaded but /dev/kfd is missing "
                           "(pass --device /dev/kfd --device /dev/dri)", devices=tuple(gpus))
    if not gpus:
        return DeviceProbe("amd", UNUSABLE, "/dev/kfd present but no GPU node in the KFD topology "
                           "(driver not loaded, or /sys not visible)")
    if not renders:
        return DeviceProbe("amd", UNUSABLE, "/dev/kfd present but no /dev/dri/renderD* (pass --device /dev/dri)",
                           devices=tuple(gpus))
    no = accel.denied(root, [*FAMILY.controls, *(p for _, p in renders)])
    if no:
        return DeviceProbe("amd", UNUSABLE, "no permission on " + ", ".join(no)
                           + " (add --group-add video / render)", devices=tuple(gpus))
    version = (fsread.read(root, "/sys/module/amdgpu/version") or "").strip()
    return DeviceProbe("amd", USABLE, devices=tuple(gpus), driver_version=version, notes=tuple(notes))
