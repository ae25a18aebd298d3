"""Which Kunlun, Ascend, AMD and Cambricon devices the process may use, from each
vendor's visibility variable, parsed as its runtime parses it; and how to hide them all.

Pure functions over the devices a probe found (in the runtime's own order: /dev/xpuN,
/dev/davinciN, KFD GPU nodes, /dev/cambricon_devN by N) and an environment mapping.
NVIDIA's CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES are in probes.nvidia_visible.
Each family's variables and its runtime's rule are data in its record (probes.families:
``Visibility``); this module applies them, so a new family needs no code here.

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

    from probes.families import Visibility
    from probes.types import Device

from probes.families import get
from probes.show import shown


def _rules(family: str) -> Visibility:
    """The family's visibility rules. Raises KeyError for a family without its own
    variables here (cpu; NVIDIA, whose lists probes.nvidia_visible reads)."""
    vis = get(family).visibility
    if vis is None or vis.parser != __name__:
        raise KeyError(f"device family {family!r} has no visibility variables read by {__name__}")
    return vis


def _read(vis: Visibility, env: Mapping[str, str]) -> list[str]:
    """The variables the runtime reads under ``env``: of each slot, the first one set."""
    out = []
    for slot in vis.slots:
        var = next((v for v in slot if v in env), None)
        if var is not None:
            out.append(var)
    return out


def _is_uuid(vis: Visibility, var: str, tok: str) -> bool:
    """A UUID entry: the variable's pattern (ROCR's ``GPU-<hex>``; CNRT's 36-character
    UUIDs) matches the whole entry."""
    pattern = dict(vis.uuids).get(var)
    if not pattern:
        return False
    import re

    return re.fullmatch(pattern, tok) is not None


def _index(tok: str) -> int | None:
    return int(tok) if tok.isascii() and tok.isdigit() else None  # "²".isdigit() is True


def _by_uuid(var: str, tok: str, pool: Sequence[Device], chosen: list[Device], seen: set[str],
             notes: list[str], blind: bool) -> tuple[Device | None, bool]:
    """(the device a UUID entry names or None, whether the blind note was given)."""
    if not any(d.uuid for d in pool):  # the probe could not read UUIDs here
        dev = next((d for d in pool if d not in chosen), None) if tok not in seen else None
        if dev is not None and not blind:
            notes.append(f"{var} names devices by UUID, which this probe cannot read: "
                         "counted as listed, which device each is stays unknown")
            blind = True
        return dev, blind
    hits = [d for d in pool if d.uuid and d.uuid.lower().startswith(tok.lower())]
    return (hits[0] if len(hits) == 1 else None), blind


def _parse(var: str, value: str, pool: Sequence[Device], family: str) -> tuple[list[Device], list[str]]:
    """One variable's list applied to ``pool``: the devices it selects, in its order, and
    notes. Stops at the first entry the runtime would not read."""
    fam = get(family)
    vis = _rules(family)
    notes: list[str] = []
    chosen: list[Device] = []
    if value.strip() == "":
        return [], []
    last = -1
    seen: set[str] = set()
    blind = False
    for n, raw in enumerate(value.split(",")):
        tok = raw.strip() if vis.strip else raw  # CANN: a space ends the list
        dev: Device | None = None
        i = _index(tok)
        if i is not None:
            if vis.ascending and i <= last:
                notes.append(f"{var} lists device IDs out of ascending order at {shown(tok)}; "
                             f"{vis.runtime} supports ascending order only, the rest is not read")
                break
            last = i
            dev = pool[i] if i < len(pool) else None
        elif _is_uuid(vis, var, tok):
            dev, blind = _by_uuid(var, tok, pool, chosen, seen, notes, blind)
            seen.add(tok)
        if dev is None:
            if n == 0 or tok.strip():
                notes.append(f"{var} entry {shown(tok)} matches no {fam.title}; "
                             "the runtime reads no entry from there on")
            break
        if dev in chosen:
            notes.append(f"{var} names {fam.title} {dev.index} twice")
            if vis.repeat_empties:  # CNRT: a repeated ordinal gives the empty set
                return [], notes
            break
        chosen.append(dev)
    return chosen, notes


def select(family: str, devices: Sequence[Device], env: Mapping[str, str]) -> tuple[list[Device], list[str], str]:
    """(devices the process may use, notes, reason when none) for ``family`` (xpu, npu,
    amd, mlu, or a registered family) under its visibility variables (probes.families).
    ``devices``: every device the probe found, in the runtime's order. With no variable
    set, all devices and no notes. The reason names the variable and its value (quoted,
    escaped, bounded). Raises KeyError for a family without visibility variables here."""
    vis = _rules(family)
    title = get(family).title
    pool = list(devices)
    notes: list[str] = []
    for var in _read(vis, env):
        value = env[var]
        pool, more = _parse(var, value, pool, family)
        notes += more
        if not pool:
            why = (f"{var}={shown(value)} hides every {title}" if value.strip() == ""
                   else f"{var}={shown(value)} selects no {title}")
            if more:
                why += f" ({more[0]})"
            return [], notes, why
    return pool, notes, ""


def hidden_reason(family: str, env: Mapping[str, str]) -> str:
    """A reason when the environment hides every device of ``family`` whatever is there
    (a set-but-empty variable the runtime itself reads); ``""`` otherwise. Lets a probe
    skip vendor tools. Raises KeyError as ``select`` does."""
    vis = _rules(family)
    for var in _read(vis, env):
        if vis.early is not None and var not in vis.early:
            continue
        if env[var].strip() == "":
            return f"{var}={shown(env[var])} hides every {get(family).title}"
    return ""


def hide(family: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables that hide every device of ``family`` from its runtime (the record's
    ``hide`` spelling, sources in the module docstring), less those already set that
    way; plus, emptied, a variable set to a list that its slot reads first (Cambricon's
    CN_VISIBLE_DEVICES before MLU_VISIBLE_DEVICES). ``{}`` for a family without
    visibility variables (cpu)."""
    vis = get(family).visibility
    if vis is None:
        return {}
    out = {k: v for k, v in vis.hide if env.get(k) != v}
    for var, value in vis.hide:
        slot = next((s for s in vis.slots if var in s), ())
        for first in slot[:slot.index(var)] if slot else ():
            if env.get(first, "") != "":
                out[first] = value
    return out
