"""One record per accelerator family: everything the probes, the entrypoint and the schemas
know about a family, in one place.

A record (``Family``) names the family's probe module, its device and control nodes, its
visibility variables and how its runtime reads them (``Visibility``), its vendor tools, how
the kernel sets of the family state their requirements, how the health check re-checks a
chosen device, and PaddlePaddle's spelling of its devices. What reads them:

- ``probes.probe_family`` / ``probe_all``: the probe module and the probe order;
- ``probes.accel.gate``: nodes, control nodes, the title in messages (xpu, npu, mlu);
- ``probes.visible``: the visibility variables, each runtime's parsing rule, the hiding
  spelling (the sources are in the records below and in probes.visible's docstring);
- ``probes.select.check``: ``requires`` (which requirement check a kernel set gets);
- ``entrypoint.envplan``: which families to hide on a fallback, and the notes' wording;
- ``entrypoint.health``: ``health`` and the control nodes it re-checks;
- ``stagecraft.familyschema``: the family enums of kernel_sets.schema.json and
  matrix.schema.json (a unit test holds the checked-in files equal to what it derives);
- ``device_strings()``: a unit test holds matrix.yaml's PaddlePaddle ``device_strings``
  equal to the records' ``device_string``.

A new family is one record here (or ``register(record)`` from outside, as the tests do),
one probe module with ``probe(root, budget_s, env) -> DeviceProbe``, and its fixtures.

Cheap to import on the entrypoint's start path: named tuples from probes._record (no
``typing``, no ``dataclasses``; see probes.types), no other import.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import NamedTuple
else:
    from probes._record import NamedTuple

REQUIRES = ("nvidia", "cpu", "accel")  # probes.select: check_nvidia, check_cpu, check_generic
HEALTH = ("nvml", "nodes", "none")  # entrypoint.health: check_nvidia, check_nodes, nothing


class Visibility(NamedTuple):
    """How a family's runtime reads its visibility variables (probes.visible applies it).

    slots: applied one after another, each filtering the devices the last one left; within
    a slot the first variable that is set is read and the rest ignored (Cambricon's
    ``CN_VISIBLE_DEVICES`` wins over ``MLU_VISIBLE_DEVICES``; HIP reads
    ``CUDA_VISIBLE_DEVICES`` only when ``HIP_VISIBLE_DEVICES`` is unset).
    hide: ``(variable, value)`` pairs that hide every device of the family. A variable
    earlier in the same slot that is set to a device list is emptied as well.
    early: the variables whose set-but-empty value hides the family before any device is
    read (lets a probe skip vendor tools); None: every variable. An alias one library
    reads (HIP's CUDA_VISIBLE_DEVICES) is not among them: the driver does not read it.
    strip: spaces around an entry are ignored (CANN: False, a space ends the list).
    ascending: IDs must ascend; the first that does not ends the list (CANN).
    repeat_empties: a repeated index selects no device at all (CNRT); else it ends the list.
    uuids: ``(variable, regular expression)``: an entry of that variable that fully
    matches is a device UUID (matched by prefix against the probe's UUIDs).
    runtime: the runtime's name in messages (``"CANN"``).
    parser: the module that applies these rules; ``probes.nvidia_visible`` for NVIDIA,
    whose rules (UUID prefixes, MIG, NVML order) are its own.
    source: where the rules are written (vendor documentation, runtime source).
    """

    slots: tuple[tuple[str, ...], ...]
    hide: tuple[tuple[str, str], ...]
    early: tuple[str, ...] | None = None
    strip: bool = True
    ascending: bool = False
    repeat_empties: bool = False
    uuids: tuple[tuple[str, str], ...] = ()
    runtime: str = ""
    parser: str = "probes.visible"
    source: str = ""

    def variables(self) -> tuple[str, ...]:
        """Every variable read, in slot order."""
        return tuple(v for slot in self.slots for v in slot)


class Family(NamedTuple):
    """One device family.

    name: the key everywhere (kernel sets' ``device``, STAGECRAFT_DEVICE, the report's
    ``probes``, matrix.yaml's ``device`` and ``device_strings``): ``[a-z][a-z0-9]*``.
    title: one device in messages (``"Kunlun XPU"``); plural: several, in the
    entrypoint's notes (``"Kunlun XPUs"``; NVIDIA's say ``"GPUs"``).
    probe: the module whose ``probe(root, budget_s, env)`` returns a DeviceProbe (CpuProbe
    for cpu, whose probe takes no env).
    requires: how a kernel set of the family states what it needs: ``nvidia`` (CUDA,
    drivers, SASS/PTX), ``cpu`` (arch, ISA level, flags), ``accel`` (device arch globs,
    min_driver) -- probes.select and kernel_sets.schema.json.
    health: what stagecraft-health re-checks: ``nvml``, ``nodes`` (the chosen devices'
    nodes and ``controls``), ``none``.
    nodes: the per-device node, ``<N>`` standing for the device number (``/dev/xpu<N>``).
    controls: nodes every container of the family needs besides the device nodes.
    visibility: the runtime's visibility variables (None: the family has none).
    tools: the vendor tools the probe runs when found; tool_dirs: searched after PATH.
    device_string: PaddlePaddle's spelling (``paddle.device.set_device``: cpu, gpu:x,
    xpu:x, npu:x, mlu:x; ROCm builds use gpu:x), an entrypoint.devicestring template.
    source: where the node layout is written.
    """

    name: str
    title: str
    plural: str
    probe: str
    requires: str = "accel"
    health: str = "nodes"
    nodes: str = ""
    controls: tuple[str, ...] = ()
    visibility: Visibility | None = None
    tools: tuple[str, ...] = ()
    tool_dirs: tuple[str, ...] = ()
    device_string: str = ""
    source: str = ""

    def node_parts(self) -> tuple[str, str]:
        """(directory, name prefix) of ``nodes``: ``("/dev", "xpu")`` for ``/dev/xpu<N>``."""
        head, _, tail = self.nodes.rpartition("/")
        return head, tail.replace("<N>", "")


_CNRT_UUID = r"(?s)(?=.{36}).*(?:-.*){4}"  # 36 characters or more, 4 dashes or more

NVIDIA = Family(
    "nvidia", "NVIDIA GPU", "GPUs", "probes.nvidia", requires="nvidia", health="nvml",
    nodes="/dev/nvidia<N>", controls=("/dev/nvidiactl",),
    visibility=Visibility(
        slots=(("NVIDIA_VISIBLE_DEVICES",), ("CUDA_VISIBLE_DEVICES",)),
        hide=(("CUDA_VISIBLE_DEVICES", ""),), runtime="CUDA", parser="probes.nvidia_visible",
        source="CUDA C Programming Guide, CUDA Environment Variables; NVIDIA Container "
               "Toolkit, docker-specialized.html (probes/nvidia_visible.py)"),
    tools=(), device_string="gpu:{index}",
    source="NVML (https://docs.nvidia.com/deploy/nvml-api/), probes/nvidia.py")

XPU = Family(
    "xpu", "Kunlun XPU", "Kunlun XPUs", "probes.xpu", nodes="/dev/xpu<N>",
    controls=("/dev/xpuctrl",),
    visibility=Visibility(
        slots=(("XPU_VISIBLE_DEVICES",),), hide=(("XPU_VISIBLE_DEVICES", ""),), runtime="XPU runtime",
        source="Kunlunxin's and FastDeploy's deployment guides; PaddlePaddle "
               "GetXPUDeviceCountImpl (paddle/fluid/platform/device/xpu/xpu_info.cc)"),
    tools=("xpu_smi",), tool_dirs=("/usr/local/xpu/bin", "/usr/local/xpu/tools"),
    device_string="xpu:{index}", source="Kunlunxin's container docs (--device /dev/xpuN /dev/xpuctrl)")

NPU = Family(
    "npu", "Ascend NPU", "Ascend NPUs", "probes.npu", nodes="/dev/davinci<N>",
    controls=("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
    visibility=Visibility(
        slots=(("ASCEND_RT_VISIBLE_DEVICES",),), hide=(("ASCEND_RT_VISIBLE_DEVICES", ""),),
        strip=False, ascending=True, runtime="CANN",
        source="CANN environment variable reference, envref_07_0028 (https://www.hiascend.com/"
               "document/detail/en/canncommercial/850/maintenref/envvar/envref_07_0028.html)"),
    tools=("npu-smi",), tool_dirs=("/usr/local/sbin", "/usr/local/Ascend/driver/tools"),
    device_string="npu:{index}", source="Ascend docker runtime / MindX docs")

AMD = Family(
    "amd", "AMD GPU", "AMD GPUs", "probes.amd", nodes="/dev/dri/renderD<N>",
    controls=("/dev/kfd",),
    visibility=Visibility(
        slots=(("ROCR_VISIBLE_DEVICES",), ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")),
        hide=(("ROCR_VISIBLE_DEVICES", ""),), early=("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
        uuids=(("ROCR_VISIBLE_DEVICES", r"(?is)GPU-.*"),), runtime="ROCr",
        source="ROCm GPU isolation techniques (https://rocm.docs.amd.com/en/latest/conceptual/"
               "gpu-isolation.html); HIP environment variables; rocr-runtime core/util/flag.h"),
    tools=(), device_string="gpu:{index}",
    source="ROCm docs, KFD Topology; Linux drivers/gpu/drm/amd/amdkfd/kfd_topology.c")

MLU = Family(
    "mlu", "Cambricon MLU", "Cambricon MLUs", "probes.mlu", nodes="/dev/cambricon_dev<N>",
    controls=("/dev/cambricon_ctl",),
    visibility=Visibility(
        slots=(("CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"),), hide=(("MLU_VISIBLE_DEVICES", ""),),
        repeat_empties=True, uuids=(("CN_VISIBLE_DEVICES", _CNRT_UUID), ("MLU_VISIBLE_DEVICES", _CNRT_UUID)),
        runtime="CNRT", source="torch_mlu _parse_visible_devices ('keep align with cnrt')"),
    tools=("cnmon",), device_string="mlu:{index}", source="PaddlePaddle's MLU install guide")

CPU = Family("cpu", "CPU", "CPUs", "probes.cpu", requires="cpu", health="none", device_string="cpu",
             source="/proc/cpuinfo, cgroup v1/v2 (probes/cpu.py)")

BUILT_IN = (NVIDIA, XPU, NPU, AMD, MLU, CPU)
_REGISTRY: dict[str, Family] = {f.name: f for f in BUILT_IN}


def records() -> tuple[Family, ...]:
    """Every family, in probe order (cpu last: the fallback of every image)."""
    return tuple(_REGISTRY.values())


def find(name: str) -> Family | None:
    """The record of family ``name``, or None when there is none."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def get(name: str) -> Family:
    """The record of family ``name``. Raises KeyError (naming the known ones) otherwise."""
    record = _REGISTRY.get(name) if isinstance(name, str) else None
    if record is None:
        raise KeyError(f"unknown device family {name!r}; expected one of {', '.join(_REGISTRY)}")
    return record


def device_strings() -> dict[str, str]:
    """{family: PaddlePaddle's device string template} for every family that has one."""
    return {f.name: f.device_string for f in _REGISTRY.values() if f.device_string}


def problems(record: Family) -> list[str]:
    """What is wrong with a record, each one short line; ``[]`` when it may be registered."""
    out = []
    name = record.name
    if not (isinstance(name, str) and name[:1].isascii() and name[:1].isalpha()
            and name.isascii() and name.isalnum() and name == name.lower()):
        out.append(f"name {name!r} must be lower-case letters and digits, starting with a letter")
    if record.requires not in REQUIRES:
        out.append(f"requires {record.requires!r} must be one of {', '.join(REQUIRES)}")
    if record.health not in HEALTH:
        out.append(f"health {record.health!r} must be one of {', '.join(HEALTH)}")
    if record.nodes and not (record.nodes.startswith("/dev/") and record.nodes.endswith("<N>")):
        out.append(f"nodes {record.nodes!r} must read /dev/<name><N>")
    out += [f"control node {c!r} must be under /dev/" for c in record.controls if not c.startswith("/dev/")]
    vis = record.visibility
    if vis is not None:
        names = vis.variables()
        out += [f"hide variable {k!r} is not among the visibility variables" for k, _ in vis.hide if k not in names]
        out += [f"early variable {k!r} is not among the visibility variables"
                for k in (vis.early or ()) if k not in names]
    return [f"family {name!r}: {p}" for p in out]


def register(record: Family) -> None:
    """Add a family (before cpu, which stays last). Raises ValueError, naming the problem,
    when the name is taken or the record is malformed (``problems``)."""
    found = problems(record)
    if record.name in _REGISTRY:
        found.insert(0, f"family {record.name!r} is registered already")
    if found:
        raise ValueError("; ".join(found))
    cpu = _REGISTRY.pop("cpu")
    _REGISTRY[record.name] = record
    _REGISTRY["cpu"] = cpu


def unregister(name: str) -> None:
    """Remove a family ``register`` added. Raises ValueError for a built-in family and
    KeyError for an unknown one."""
    if any(f.name == name for f in BUILT_IN):
        raise ValueError(f"family {name!r} is built in; it cannot be removed")
    get(name)
    del _REGISTRY[name]


class Names:
    """The family names as a live, read-only sequence (``in``, ``len``, iteration, index),
    so ``probes.types.FAMILIES`` sees a family ``register`` adds."""

    __slots__ = ()

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in _REGISTRY

    def __getitem__(self, i: int) -> str:
        return tuple(_REGISTRY)[i]

    def __repr__(self) -> str:
        return repr(tuple(_REGISTRY))

    def __eq__(self, other: object) -> bool:
        return tuple(_REGISTRY) == (tuple(other) if isinstance(other, (Names, tuple, list)) else other)

    __hash__ = None  # type: ignore[assignment]


NAMES = Names()
