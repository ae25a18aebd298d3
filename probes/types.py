"""Result types shared by every probe: immutable records, plain data, JSON-friendly.

The records are named tuples (``typing.NamedTuple`` syntax, built by probes._record
without importing typing), frozen like ``@dataclass(frozen=True)`` (no attribute
assignment; ``r._replace(...)`` makes a changed copy) but without the ``dataclasses``
import, which alone cost about 20 ms of a 40 ms start-up budget on a small VM
(``python -X importtime``: dataclasses -> inspect -> ast, dis, tokenize); typing itself
cost 11-15 ms more.

States (the same three for every family):
- ``absent``: nothing of this family is visible to the process (no device nodes, no
  driver interface, or hidden on purpose, e.g. ``CUDA_VISIBLE_DEVICES=""``).
- ``unusable``: something is there but the process cannot use it; ``reason`` says why
  (no permission, driver not loaded, busy, timeout, library missing, ...).
- ``usable``: at least one device answers and may be used.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from probes._record import NamedTuple

from probes.families import NAMES

ABSENT = "absent"
UNUSABLE = "unusable"
USABLE = "usable"
STATES = (ABSENT, UNUSABLE, USABLE)

# The device families' names in probe order: a live view of probes.families' records
# ("nvidia", "xpu", "npu", "amd", "mlu", "cpu", then any registered before cpu).
FAMILIES = NAMES


class Device(NamedTuple):
    """One accelerator device as a probe saw it.

    index: the family's own index (NVML index, /dev/xpuN number, KFD node id, ...).
    arch: compute capability ``"9.0"`` (NVIDIA), gfx target ``"gfx90a"`` (AMD), chip name
    (Ascend ``"910B"``, Kunlun ``"R200"``, Cambricon ``"MLU370-X8"``); ``""`` when unknown.
    memory_bytes: total device memory in bytes, None when unknown.
    mig: NVIDIA only: MIG mode current state (True/False), None when not supported.
    mig_uuids: NVIDIA only: UUIDs of the MIG devices on this GPU (``MIG-...``).
    """

    index: int
    name: str = ""
    uuid: str = ""
    arch: str = ""
    memory_bytes: int | None = None
    node: str = ""
    mig: bool | None = None
    mig_uuids: tuple[str, ...] = ()
    health: str = ""


class DeviceProbe(NamedTuple):
    """What one accelerator family's probe found.

    family: one of FAMILIES minus ``cpu``. state: absent | unusable | usable.
    reason: one line, empty when usable. devices: the devices this process may use
    (after CUDA_VISIBLE_DEVICES and friends). driver_version: as the vendor prints it
    (``"550.54.15"``). api_version: NVIDIA's CUDA driver API version (``"12.4"``).
    notes: extra facts worth showing (warnings, what was hidden). elapsed_ms: probe time.
    """

    family: str
    state: str
    reason: str = ""
    devices: tuple[Device, ...] = ()
    driver_version: str = ""
    api_version: str = ""
    notes: tuple[str, ...] = ()
    elapsed_ms: float = 0.0


class CpuProbe(NamedTuple):
    """What the CPU probe found.

    arch: ``"x86_64"`` or ``"aarch64"`` (from /proc/cpuinfo, else the running kernel).
    flags: x86 ``flags`` or Arm ``Features`` from /proc/cpuinfo (lower case).
    isa_level: x86-64 micro-architecture level 1..4 (psABI), 0 when below v1, None off x86.
    online: CPUs the kernel has online. cpuset: CPUs in the process's cpuset (None: no
    limit found). quota_cpus: cgroup CPU quota in CPUs (quota/period, e.g. 1.5), None when
    unlimited. memory_limit_bytes: cgroup memory limit in bytes, None when unlimited.
    effective_cpus: min(online, cpuset, ceil(quota)), at least 1: the size for thread pools.
    cgroup_version: 1, 2 or None (not found).
    """

    state: str = USABLE
    reason: str = ""
    vendor: str = ""
    model: str = ""
    arch: str = ""
    flags: frozenset[str] = frozenset()
    isa_level: int | None = None
    online: int = 1
    cpuset: int | None = None
    quota_cpus: float | None = None
    memory_limit_bytes: int | None = None
    effective_cpus: int = 1
    cgroup_version: int | None = None
    notes: tuple[str, ...] = ()
    elapsed_ms: float = 0.0
    family: str = "cpu"


def to_jsonable(obj: object) -> object:
    """Turn probe results (records, tuples, frozensets) into JSON-ready data."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return {k: to_jsonable(getattr(obj, k)) for k in obj._fields}
    if isinstance(obj, (frozenset, set)):
        return sorted(obj)  # type: ignore[type-var]
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj
