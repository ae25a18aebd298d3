"""Choose a kernel set: a pure function of probe results, declared sets and overrides.

``choose(probe_results, kernel_sets, overrides) -> Choice``: the first set, in declared
order, whose requirements hold; every earlier set comes back with the reason it was
passed over. Nothing here reads the machine.

CUDA facts used (NVIDIA "CUDA Compatibility", https://docs.nvidia.com/deploy/cuda-compatibility/,
and the CUDA Toolkit release notes' driver table):
- A CUDA x.y runtime runs on drivers >= the toolkit's minimum (11.8: 520.61.05).
- Minor-version compatibility: within a major release it also runs on older drivers
  down to the major's floor (11.x: >= 450.80.02, 12.x: >= 525.60.13), *except* that PTX
  JIT needs the newer driver: PTX built by a newer toolkit fails to load
  (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). So a GPU that needs PTX needs ``min_driver``.
- SASS for ``X.y`` runs on any GPU of the same major X with minor >= y (binary
  compatibility within a major); PTX for ``X.y`` is JIT-compiled for any GPU with
  capability >= X.y (CUDA C Programming Guide, "Binary / PTX Compatibility").

Exit codes carried by a refusal: EXIT_REFUSED (78, sysexits EX_CONFIG: this host cannot
run any of the image's kernel sets, or strict mode and the wanted device is not usable),
EXIT_USAGE (2: an override names an unknown kernel set or device).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, NamedTuple
else:
    from probes._record import NamedTuple

from probes import cpuflags
from probes.families import find
from probes.show import shown
from probes.types import FAMILIES, USABLE

UNKNOWN = "unknown"  # a build fact the matrix could not state (kernel_sets.schema.json)
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 78


class Overrides(NamedTuple):
    """User overrides. device: only consider sets of this family first (STAGECRAFT_DEVICE);
    kernel_set: choose this set if it can run (STAGECRAFT_KERNEL_SET); strict: refuse
    (EXIT_REFUSED) instead of falling back when the wanted device is not usable."""

    device: str | None = None
    kernel_set: str | None = None
    strict: bool = False


class Passed(NamedTuple):
    """A kernel set that was not chosen, and why."""

    name: str
    device: str
    reason: str


class Choice(NamedTuple):
    """The outcome. ``name``/``device``/``kernel_set`` are empty/None when refused;
    ``exit_code`` is 0 unless refused; ``fallback`` is True when the chosen device is not
    the wanted one (STAGECRAFT_DEVICE, else the first declared set's device); ``env`` is
    the chosen set's declared environment; ``warnings`` are things to tell the user."""

    name: str
    device: str
    kernel_set: Mapping[str, Any] | None
    passed_over: tuple[Passed, ...] = ()
    warnings: tuple[str, ...] = ()
    refused: bool = False
    exit_code: int = EXIT_OK
    message: str = ""
    wanted_device: str = ""
    fallback: bool = False
    env: Mapping[str, str] | None = None


def parse_version(text: str) -> tuple[int, ...]:
    """``"520.61.05"`` -> (520, 61, 5); non-numeric parts stop the parse; () when none."""
    out = []
    for part in str(text).strip().lstrip("v").split("."):
        digits = "".join(ch for ch in part if ch.isdecimal())
        if not digits or digits != part.strip():
            if digits and part.strip().startswith(digits):
                out.append(int(digits))
            break
        out.append(int(digits))
    return tuple(out)


def _cc(text: str) -> tuple[int, int]:
    major, _, minor = str(text).partition(".")
    return int(major), int(minor or 0)


def gpu_kernel_path(cc: str, sass: Sequence[str], ptx: Sequence[str]) -> str | None:
    """How a GPU of compute capability ``cc`` runs a set: ``"sass"`` (native), ``"ptx"``
    (JIT) or None (no kernel for it)."""
    dev = _cc(cc)
    for s in sass:
        m = _cc(s)
        if m[0] == dev[0] and m[1] <= dev[1]:
            return "sass"
    if any(_cc(p) <= dev for p in ptx):
        return "ptx"
    return None


def _ranges(nums: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> ``"0-3,5"``."""
    out: list[str] = []
    xs = sorted(nums)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def _group_label(devs: Sequence[Any]) -> str:
    """GPUs grouped by model: ``"GPU 0-7: 8x NVIDIA H200"``, ``"GPU 1: Tesla K40m"``."""
    by: dict[str, list[int]] = {}
    for d in devs:
        by.setdefault(d.name or "GPU", []).append(d.index)
    return "; ".join(f"GPU {_ranges(ix)}: {f'{len(ix)}x ' if len(ix) > 1 else ''}{name}"
                     for name, ix in by.items())


def _facts(value: Any) -> str:
    if value == UNKNOWN:
        return UNKNOWN
    return ", ".join(str(x) for x in value) or "none"


def check_nvidia(req: Mapping[str, Any], p: Any) -> tuple[bool, str, list[str]]:
    """(holds, reason when not, warnings) for an NVIDIA set against the nvidia probe.

    ``sass``/``ptx`` are lists of compute capabilities, or ``"unknown"`` (also when
    missing): a GPU the known lists cover runs; one they do not cover is refused when
    both facts are known, and accepted with an "unknown" warning otherwise, never
    silently."""
    if p is None:
        return False, "NVIDIA not probed", []
    if p.state != USABLE:
        return False, p.reason or "no usable NVIDIA GPU", []
    sass_v, ptx_v = req.get("sass", UNKNOWN), req.get("ptx", UNKNOWN)
    sass = [] if sass_v == UNKNOWN else [str(x) for x in sass_v]
    ptx = [] if ptx_v == UNKNOWN else [str(x) for x in ptx_v]
    unsure = UNKNOWN in (sass_v, ptx_v)
    warnings: list[str] = []
    said = [str(x) for x in req.get("supported", [])]  # the vendor says it runs there; form not stated
    paths = {d.index: gpu_kernel_path(d.arch, sass, ptx) or ("supported" if d.arch in said else None)
             or (UNKNOWN if unsure else None) for d in p.devices}
    doubt = [d for d in p.devices if paths[d.index] == UNKNOWN]
    if doubt:
        ccs = "/".join(sorted({d.arch for d in doubt}, key=_cc))
        warnings.append(f"unknown whether this build has kernels for cc {ccs} ({_group_label(doubt)}): "
                        f"the image declares SASS {_facts(sass_v)}, PTX {_facts(ptx_v)}; GPU work may fail "
                        "with 'no kernel image is available' (check paddle.version.cuda_archs() or "
                        "cuobjdump, and complete the matrix)")
    none = [d for d in p.devices if paths[d.index] is None]
    if none:
        built = f"SASS {_facts(sass_v)}; PTX {_facts(ptx_v)}"
        ccs = "/".join(sorted({d.arch for d in none}, key=_cc))
        reason = f"no kernels for cc {ccs} ({_group_label(none)}) in this set ({built})"
        if len(none) < len(p.devices):
            ok = [d.uuid or str(d.index) for d in p.devices if paths[d.index] is not None]
            reason += f"; to use the others, set CUDA_VISIBLE_DEVICES={','.join(ok)}"
        return False, reason, []
    jit = [d for d in p.devices if paths[d.index] == "ptx"]
    cuda = str(req.get("cuda", ""))
    need = str(req.get("min_driver", ""))
    compat = str(req.get("min_driver_compat", ""))
    drv = parse_version(p.driver_version)
    if need and drv and drv < parse_version(need):
        cuda_s = f" needed by CUDA {cuda}" if cuda else ""
        if compat and drv >= parse_version(compat) and not jit:
            warnings.append(f"driver {p.driver_version} < {need}: CUDA {cuda or '?'} runs under "
                            "minor-version compatibility (features that need a newer driver are unavailable)")
        elif compat and drv >= parse_version(compat):
            return False, (f"driver {p.driver_version} < {need}{cuda_s}: minor-version compatibility "
                           f"(>= {compat}) does not cover PTX JIT, which "
                           f"{_group_label(jit)} needs; upgrade the driver to >= {need}"), []
        else:
            tail = f" (minor-version compatibility needs >= {compat} and a PTX-free path)" if compat else ""
            return False, f"driver {p.driver_version} < {need}{cuda_s}{tail}", []
    if cuda and p.api_version and parse_version(p.api_version)[:1] < parse_version(cuda)[:1]:
        return False, f"the driver supports CUDA {p.api_version}, older than this set's CUDA {cuda}", []
    if jit:
        ccs = "/".join(sorted({d.arch for d in jit}, key=_cc))
        warnings.append(f"no native kernels for cc {ccs} ({_group_label(jit)}): PTX {', '.join(ptx)} is "
                        "JIT-compiled at start-up (can take minutes; keep CUDA_CACHE_PATH on a volume)")
    return True, "", warnings


def check_cpu(req: Mapping[str, Any], cpu: Any) -> tuple[bool, str, list[str]]:
    """(holds, reason, warnings) for a CPU set: ``arch``, ``isa_level``, ``cpu_flags``."""
    if cpu is None:
        return False, "CPU not probed", []
    arch = req.get("arch")
    if arch:
        allowed = [arch] if isinstance(arch, str) else list(arch)
        if cpu.arch not in allowed:
            return False, f"CPU is {cpu.arch or 'unknown'}, this set needs {' or '.join(allowed)}", []
    lvl_name = req.get("isa_level")
    if lvl_name:
        want = cpuflags.parse_level(str(lvl_name))
        if want is None:
            return False, f"unknown isa_level {lvl_name!r}", []
        have = cpu.isa_level
        if have is None:
            return False, f"CPU is {cpu.arch or 'unknown'}, not x86-64; this set needs x86-64-v{want}", []
        if have < want:
            miss = cpuflags.missing_for_level(cpu.flags, want)
            return False, (f"CPU {cpu.model or '?'} is x86-64-v{have}, this set needs x86-64-v{want} "
                           f"(missing {', '.join(miss[:6])}{', ...' if len(miss) > 6 else ''})"), []
    flags = [cpuflags.normalise(f) for f in req.get("cpu_flags", [])]
    if flags:
        if not cpu.flags:
            return False, f"CPU flags unknown ({cpu.reason or 'empty /proc/cpuinfo'}); this set needs {', '.join(flags)}", []
        miss = [f for f in flags if f not in cpu.flags]
        if miss:
            return False, f"CPU {cpu.model or '?'} lacks {', '.join(miss)}", []
    return True, "", []


def check_generic(req: Mapping[str, Any], p: Any, family: str) -> tuple[bool, str, list[str]]:
    """(holds, reason, warnings) for xpu/npu/amd/mlu sets (families whose record says
    ``requires="accel"``): ``arch`` (list of glob patterns matched against each device's
    arch, e.g. ``["gfx90a", "gfx94*"]``) and ``min_driver``."""
    if p is None:
        return False, f"{family} not probed", []
    if p.state != USABLE:
        return False, p.reason or f"no usable {family} device", []
    archs = [str(a) for a in req.get("arch", [])]
    if archs:
        import fnmatch  # only for a set with device arch globs: 0.2 ms of every other start

        bad = [d for d in p.devices if d.arch and not any(fnmatch.fnmatch(d.arch, a) for a in archs)]
        if bad and len(bad) == len(p.devices):
            return False, (f"device arch {', '.join(sorted({d.arch for d in bad}))} not in this set's "
                           f"{', '.join(archs)}"), []
    need = req.get("min_driver")
    if need and p.driver_version and parse_version(p.driver_version) < parse_version(str(need)):
        return False, f"driver {p.driver_version} < {need} needed by this set", []
    return True, "", []


def check(kset: Mapping[str, Any], probes: Mapping[str, Any]) -> tuple[bool, str, list[str]]:
    """Whether one kernel set holds on these probe results: the check its family's
    record names (probes.families ``requires``)."""
    dev = str(kset.get("device", ""))
    req = kset.get("requires") or {}
    fam = find(dev)
    if fam is None:
        return False, f"unknown device {dev!r}", []
    if fam.requires == "nvidia":
        return check_nvidia(req, probes.get(dev))
    if fam.requires == "cpu":
        return check_cpu(req, probes.get(dev))
    return check_generic(req, probes.get(dev), dev)


def _refuse(code: int, message: str, passed: list[Passed], wanted: str) -> Choice:
    return Choice(name="", device="", kernel_set=None, passed_over=tuple(passed), refused=True,
                  exit_code=code, message=message, wanted_device=wanted)


def choose(probe_results: Mapping[str, Any], kernel_sets: Sequence[Mapping[str, Any]],
           overrides: Overrides | None = None) -> Choice:
    """The first kernel set that holds, in declared order (see the module docstring).

    probe_results: {family: DeviceProbe | CpuProbe}. kernel_sets: dicts as in
    kernel_sets.schema.json. Never raises for well-formed input; a refusal is a Choice
    with ``refused=True`` and an exit code."""
    ov = overrides or Overrides()
    sets = list(kernel_sets)
    names = [str(s.get("name")) for s in sets]
    wanted = ov.device or (str(sets[0].get("device")) if sets else "")
    warnings: list[str] = []
    passed: list[Passed] = []

    if ov.device and ov.device not in FAMILIES:
        return _refuse(EXIT_USAGE, f"STAGECRAFT_DEVICE={shown(ov.device)}: unknown device; use one of "
                       f"{', '.join(FAMILIES)}", [], wanted)
    if ov.device and not any(s.get("device") == ov.device for s in sets):
        return _refuse(EXIT_USAGE, f"STAGECRAFT_DEVICE={shown(ov.device)}: this image has no kernel set for it "
                       f"(it has: {', '.join(names) or 'none'})", [], wanted)
    if ov.kernel_set:
        if ov.kernel_set not in names:
            return _refuse(EXIT_USAGE, f"STAGECRAFT_KERNEL_SET={shown(ov.kernel_set)}: no such kernel set "
                           f"(this image has: {', '.join(names) or 'none'})", [], wanted)
        forced = sets[names.index(ov.kernel_set)]
        ok, why, warns = check(forced, probe_results)
        if ok:
            dev = str(forced.get("device"))
            return Choice(name=ov.kernel_set, device=dev, kernel_set=forced, warnings=tuple(warns),
                          message="forced by STAGECRAFT_KERNEL_SET", wanted_device=dev,
                          env=dict(forced.get("env") or {}))
        if ov.strict:
            return _refuse(EXIT_REFUSED, f"strict: forced kernel set {ov.kernel_set} cannot run here: {why}",
                           [Passed(ov.kernel_set, str(forced.get("device")), why)], wanted)
        warnings.append(f"forced kernel set {ov.kernel_set} cannot run here ({why}); choosing as usual")
        wanted = str(forced.get("device"))

    order = sets
    if ov.device:
        order = [s for s in sets if s.get("device") == ov.device]
        if not ov.strict:
            order += [s for s in sets if s.get("device") != ov.device]
    for s in order:
        ok, why, warns = check(s, probe_results)
        if not ok:
            passed.append(Passed(str(s.get("name")), str(s.get("device")), why))
            continue
        dev = str(s.get("device"))
        if ov.strict and dev != wanted:
            first = next((p for p in passed if p.device == wanted), None)
            why_w = first.reason if first else f"no {wanted} kernel set holds"
            return _refuse(EXIT_REFUSED, f"strict: wanted device {wanted} is not usable: {why_w}",
                           passed, wanted)
        fallback = bool(wanted) and dev != wanted
        msg = ""
        if fallback:
            first = next((p for p in passed if p.device == wanted), None)
            msg = f"fallback: {first.reason}" if first else f"fallback from {wanted}"
        return Choice(name=str(s.get("name")), device=dev, kernel_set=s, passed_over=tuple(passed),
                      warnings=tuple(warnings + warns), message=msg, wanted_device=wanted,
                      fallback=fallback, env=dict(s.get("env") or {}))
    if not sets:
        return _refuse(EXIT_REFUSED, "this image declares no kernel sets", passed, wanted)
    if ov.strict and ov.device:
        first = passed[0].reason if passed else "no kernel set"
        return _refuse(EXIT_REFUSED, f"strict: wanted device {wanted} is not usable: {first}", passed, wanted)
    detail = "; ".join(f"{p.name}: {p.reason}" for p in passed)
    return _refuse(EXIT_REFUSED, f"no kernel set in this image can run on this host ({detail})", passed, wanted)
