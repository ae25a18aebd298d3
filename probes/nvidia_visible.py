"""Which NVIDIA GPUs the process may use: CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES.

Pure functions over a list of Devices (in NVML order) and an environment mapping.

Facts used (CUDA C Programming Guide, "CUDA Environment Variables",
https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables):
- CUDA_VISIBLE_DEVICES is a comma-separated list of device indices, GPU UUIDs
  (``GPU-...``, a unique prefix is enough) or MIG UUIDs (``MIG-<uuid>``, older drivers
  ``MIG-GPU-<uuid>/<gi>/<ci>``). Only the entries before the first invalid one are used,
  so ``""``, ``"-1"`` and ``"none"`` hide every GPU.
- NVML enumerates in PCI bus order and ignores CUDA_VISIBLE_DEVICES; CUDA's default order
  is FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID. Matching by UUID is exact;
  an index is read as an NVML (PCI bus order) index, and a note says so.
NVIDIA Container Toolkit (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/
latest/docker-specialized.html): NVIDIA_VISIBLE_DEVICES is read by the NVIDIA runtime hook,
never by CUDA. ``none``: the hook gives the driver but no GPU, so none is taken to be
there. ``void``, empty or unset: the hook does nothing, "the same behavior as runc"; GPUs
may still come another way, and they do under CDI (``podman run --device
nvidia.com/gpu=all``, Docker 25+): ``nvidia-ctk cdi generate`` writes
``NVIDIA_VISIBLE_DEVICES=void`` into every spec so the legacy hook stays out
(nvidia-container-toolkit, cmd/nvidia-ctk/cdi/generate/generate_test.go). So ``void`` and
empty hide nothing: the device nodes and NVML decide, as they do for CUDA. ``all`` or a
list of indices / UUIDs selects host GPUs; inside the container host indices no longer
match NVML's, so only UUIDs filter here.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

from probes.show import shown
from probes.types import Device


def hidden_reason(env: Mapping[str, str]) -> str | None:
    """A reason when the environment hides every GPU before any probing; else None.
    NVIDIA_VISIBLE_DEVICES=none hides them; ``void`` and empty do not (module docstring:
    CDI sets ``void`` and gives the GPUs itself)."""
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() == "none":
        return f"NVIDIA_VISIBLE_DEVICES={shown(nvd.strip())}: the container runtime passed no GPU"
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        first = cvd.split(",")[0].strip().lower()
        if first == "" or first == "none" or first.startswith("-"):
            return f"CUDA_VISIBLE_DEVICES={shown(cvd)} hides every GPU"
    return None


def _by_uuid_prefix(devices: Sequence[Device], token: str) -> Device | None:
    hits = [d for d in devices if d.uuid.lower().startswith(token.lower())]
    return hits[0] if len(hits) == 1 else None


def _by_mig(devices: Sequence[Device], token: str) -> Device | None:
    low = token.lower()
    if low.startswith("mig-gpu-"):  # MIG-GPU-<gpu uuid>/<gi>/<ci> (drivers before R470)
        return _by_uuid_prefix(devices, token[4:].split("/")[0])
    hits = [d for d in devices if any(m.lower().startswith(low) for m in d.mig_uuids)]
    return hits[0] if len(hits) == 1 else None


def visible(devices: Sequence[Device], env: Mapping[str, str]) -> tuple[list[Device], list[str]]:
    """The devices this process may use, in CUDA's order, and notes about the filtering.

    devices: every GPU NVML reports, in NVML order. Returns ([], [reason]) when none."""
    notes: list[str] = []
    why = hidden_reason(env)
    if why:
        return [], [why]
    pool = list(devices)
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() != "all":
        uuids = [t.strip() for t in nvd.split(",") if t.strip().upper().startswith(("GPU-", "MIG-"))]
        if uuids:
            keep = []
            for t in uuids:
                d = _by_mig(pool, t) if t.upper().startswith("MIG-") else _by_uuid_prefix(pool, t)
                if d is not None and d not in keep:
                    keep.append(d)
            pool = keep
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return pool, notes
    chosen: list[Device] = []
    used_index = False
    for raw in cvd.split(","):
        tok = raw.strip()
        dev: Device | None = None
        if tok.isascii() and tok.isdigit():  # "²".isdigit() is True
            used_index = True
            i = int(tok)
            dev = pool[i] if i < len(pool) else None
        elif tok.upper().startswith("MIG-"):
            dev = _by_mig(pool, tok)
        elif tok.upper().startswith("GPU-"):
            dev = _by_uuid_prefix(pool, tok)
        if dev is None:
            if tok:
                notes.append(f"CUDA_VISIBLE_DEVICES entry {shown(tok)} matches no GPU; CUDA ignores it and all after it")
            break
        if dev in chosen:
            notes.append(f"CUDA_VISIBLE_DEVICES names GPU {dev.index} twice")
            break
        chosen.append(dev)
    if used_index and env.get("CUDA_DEVICE_ORDER", "") != "PCI_BUS_ID":
        notes.append("CUDA_VISIBLE_DEVICES indices read in PCI bus order (NVML's); "
                     "set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA agrees")
    if not chosen:
        notes.insert(0, f"CUDA_VISIBLE_DEVICES={shown(cvd)} selects no GPU")
    return chosen, notes
