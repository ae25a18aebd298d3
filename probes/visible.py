"""Which Kunlun, Ascend, AMD and Cambricon devices the process may use, from each
vendor's visibility variable, parsed as its runtime parses it; and how to hide them all.

Pure functions over the devices a probe found (in the runtime's own order: /dev/xpuN,
/dev/davinciN, KFD GPU nodes, /dev/cambricon_devN by N) and an environment mapping.
NVIDIA's CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES are in probes.nvidia_visible.

What each runtime accepts (the sources, per vendor):

- Kunlun XPU, ``XPU_VISIBLE_DEVICES``: comma-separated device indices ("0,1,2,3", as in
  Kunlunxin's and FastDeploy's deployment guides). A value that is empty or only spaces
  means no XPU: PaddlePaddle's ``GetXPUDeviceCountImpl`` (paddle/fluid/platform/device/
  xpu/xpu_info.cc) logs "XPU_VISIBLE_DEVICES is set to be empty. No XPU detected." and
  counts 0, and Paddle's TestEmptyVisibleDevices test runs on CPU with it. Hide: ``""``.
- Huawei Ascend, ``ASCEND_RT_VISIBLE_DEVICES`` (CANN environment variable reference,
  envref_07_0028, https://www.hiascend.com/document/detail/en/canncommercial/850/maintenref/envvar/envref_07_0028.html):
  logical device IDs separated by commas only, in ascending order; "other characters or
  invalid device IDs are not allowed ... only the device IDs before them are read"
  (``1, 2,3`` reads only 1: the space stops it; ``1,3,8`` on 8 devices reads 1 and 3).
  The guide names no "hide every device" value; by the rule above an empty value reads
  no ID, and it is the spelling Ascend's own CI uses to give torch_npu a pure CPU
  platform (vllm-ascend). Hide: ``""``.
- AMD ROCm (ROCm "GPU isolation techniques",
  https://rocm.docs.amd.com/en/latest/conceptual/gpu-isolation.html, and HIP's
  environment variable reference): ``ROCR_VISIBLE_DEVICES`` is a list of device indices
  or UUIDs (``GPU-<16 hex digits>``, the KFD node's ``unique_id``) and applies to every
  ROCm application; ``HIP_VISIBLE_DEVICES`` (HIP only) lists indices among the devices
  ROCR exposes (HIP reads ``CUDA_VISIBLE_DEVICES`` the same way when HIP_VISIBLE_DEVICES
  is unset). The ROCr runtime filters whenever ROCR_VISIBLE_DEVICES is *set*
  (rocr-runtime core/util/flag.h: ``IsEnvVarSet``), so an empty value exposes no GPU;
  AMD recommends ROCR_VISIBLE_DEVICES on Linux. Hide: ``ROCR_VISIBLE_DEVICES=""``.
- Cambricon MLU, ``MLU_VISIBLE_DEVICES`` (Cambricon's newer name ``CN_VISIBLE_DEVICES``
  wins when both are set): indices or device UUIDs, parsed like CUDA's list: the first
  entry that is not an index stops the list, a repeated index empties it (torch_mlu's
  ``_parse_visible_devices``, "keep align with cnrt"). An empty value selects none.
  Hide: ``MLU_VISIBLE_DEVICES=""`` (and ``CN_VISIBLE_DEVICES=""`` when that is set).

In every case a value that selects no device is taken at its word: the family is absent
and the entrypoint falls back (saying which variable and why); it never blocks the
command. Indices are the family's own device numbers in the runtime's order.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from probes.types import Device

from probes._show import shown

# family -> (variables read, in the order the runtime applies them; {variable: value} that
# hides every device of the family)
VARIABLES = {
    "xpu": (("XPU_VISIBLE_DEVICES",), {"XPU_VISIBLE_DEVICES": ""}),
    "npu": (("ASCEND_RT_VISIBLE_DEVICES",), {"ASCEND_RT_VISIBLE_DEVICES": ""}),
    "amd": (("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"), {"ROCR_VISIBLE_DEVICES": ""}),
    "mlu": (("CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"), {"MLU_VISIBLE_DEVICES": ""}),
}
NAMES = {"xpu": "Kunlun XPU", "npu": "Ascend NPU", "amd": "AMD GPU", "mlu": "Cambricon MLU"}


def _is_uuid(var: str, family: str, tok: str) -> bool:
    """A UUID entry: ROCR's ``GPU-<hex>``; CNRT's 36-character UUIDs."""
    if var == "ROCR_VISIBLE_DEVICES":
        return tok.upper().startswith("GPU-")
    return family == "mlu" and len(tok) >= 36 and tok.count("-") >= 4


def _index(tok: str) -> int | None:
    return int(tok) if tok.isascii() and tok.isdigit() else None  # "²".isdigit() is True


def _parse(var: str, value: str, pool: Sequence[Device], family: str) -> tuple[list[Device], list[str]]:
    """One variable's list applied to ``pool``: the devices it selects, in its order, and
    notes. Stops at the first entry the runtime would not read."""
    notes: list[str] = []
    chosen: list[Device] = []
    if value.strip() == "":
        return [], []
    last = -1
    seen: set[str] = set()
    blind = False
    for n, raw in enumerate(value.split(",")):
        tok = raw if family == "npu" else raw.strip()  # CANN: a space ends the list
        dev: Device | None = None
        i = _index(tok)
        if i is not None:
            if family == "npu" and i <= last:
                notes.append(f"{var} lists device IDs out of ascending order at {shown(tok)}; "
                             "CANN supports ascending order only, the rest is not read")
                break
            last = i
            dev = pool[i] if i < len(pool) else None
        elif _is_uuid(var, family, tok):
            if not any(d.uuid for d in pool):  # the probe could not read UUIDs here
                dev = next((d for d in pool if d not in chosen), None) if tok not in seen else None
                if dev is not None and not blind:
                    notes.append(f"{var} names devices by UUID, which this probe cannot read: "
                                 "counted as listed, which device each is stays unknown")
                    blind = True
            else:
                hits = [d for d in pool if d.uuid and d.uuid.lower().startswith(tok.lower())]
                dev = hits[0] if len(hits) == 1 else None
            seen.add(tok)
        if dev is None:
            if n == 0 or tok.strip():
                notes.append(f"{var} entry {shown(tok)} matches no {NAMES[family]}; "
                             "the runtime reads no entry from there on")
            break
        if dev in chosen:
            notes.append(f"{var} names {NAMES[family]} {dev.index} twice")
            if family == "mlu":  # CNRT: a repeated ordinal gives the empty set
                return [], notes
            break
        chosen.append(dev)
    return chosen, notes


def select(family: str, devices: Sequence[Device], env: Mapping[str, str]) -> tuple[list[Device], list[str], str]:
    """(devices the process may use, notes, reason when none) for ``family`` (xpu, npu,
    amd, mlu) under its visibility variables. ``devices``: every device the probe found,
    in the runtime's order. With no variable set, all devices and no notes. The reason
    names the variable and its value (quoted, escaped, bounded). Raises KeyError for a
    family without visibility variables."""
    variables, _ = VARIABLES[family]
    pool = list(devices)
    notes: list[str] = []
    if family == "mlu" and "CN_VISIBLE_DEVICES" in env:
        variables = ("CN_VISIBLE_DEVICES",)
    if family == "amd" and "HIP_VISIBLE_DEVICES" not in env and "CUDA_VISIBLE_DEVICES" in env:
        variables = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")  # HIP reads it as an alias
    for var in variables:
        value = env.get(var)
        if value is None:
            continue
        pool, more = _parse(var, value, pool, family)
        notes += more
        if not pool:
            why = (f"{var}={shown(value)} hides every {NAMES[family]}" if value.strip() == ""
                   else f"{var}={shown(value)} selects no {NAMES[family]}")
            if more:
                why += f" ({more[0]})"
            return [], notes, why
    return pool, notes, ""


def hidden_reason(family: str, env: Mapping[str, str]) -> str:
    """A reason when the environment hides every device of ``family`` whatever is there
    (a set-but-empty variable); ``""`` otherwise. Lets a probe skip vendor tools."""
    variables, _ = VARIABLES[family]
    if family == "mlu" and "CN_VISIBLE_DEVICES" in env:
        variables = ("CN_VISIBLE_DEVICES",)
    for var in variables:
        value = env.get(var)
        if value is not None and value.strip() == "":
            return f"{var}={shown(value)} hides every {NAMES[family]}"
    return ""


def hide(family: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables that hide every device of ``family`` from its runtime (see the module
    docstring for each spelling's source), less those already set that way."""
    _, spelling = VARIABLES[family]
    out = {k: v for k, v in spelling.items() if env.get(k) != v}
    if family == "mlu" and env.get("CN_VISIBLE_DEVICES", "") != "":
        out["CN_VISIBLE_DEVICES"] = ""  # CNRT reads it before MLU_VISIBLE_DEVICES
    return out
