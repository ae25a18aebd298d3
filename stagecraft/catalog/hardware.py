"""The machines the catalog answers for: GPU generations and models, driver versions,
CPU levels and platforms, turned into probe results (probes.types) as ``build.py probe``
gets them from a host. Data plus small pure functions.

Outside facts and their sources:
- Compute capability of each GPU model and the generation names: NVIDIA, "CUDA GPUs -
  Compute Capability", https://developer.nvidia.com/cuda-gpus.
- The CUDA driver API version each driver branch supports (what NVML reports as
  ``nvmlSystemGetCudaDriverVersion``): CUDA Toolkit Release Notes, table "CUDA Toolkit
  and Corresponding Driver Versions" (Linux, GA releases).
- x86-64 levels: the x86-64 psABI (probes/cpuflags.py holds their flags).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes import cpuflags
from probes.select import parse_version
from probes.types import ABSENT, USABLE, CpuProbe, Device, DeviceProbe

from .. import compat

# (generation, compute capabilities); the overview shows Pascal to Blackwell.
GENERATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kepler", ("3.5", "3.7")),
    ("Maxwell", ("5.0", "5.2")),
    ("Pascal", ("6.0", "6.1")),
    ("Volta", ("7.0",)),
    ("Turing", ("7.5",)),
    ("Ampere", ("8.0", "8.6")),
    ("Ada Lovelace", ("8.9",)),
    ("Hopper", ("9.0",)),
    ("Blackwell", ("10.0", "12.0")),
)

# (model, compute capability): the selector's list, oldest first.
GPU_MODELS: tuple[tuple[str, str], ...] = (
    ("Tesla K40", "3.5"), ("Tesla K80", "3.7"), ("Tesla M40", "5.2"), ("Tesla P100", "6.0"),
    ("GeForce GTX 1080", "6.1"), ("Tesla P4 / P40", "6.1"), ("Tesla V100", "7.0"),
    ("Tesla T4", "7.5"), ("GeForce RTX 2080", "7.5"), ("A100", "8.0"), ("A30", "8.0"),
    ("GeForce RTX 3090", "8.6"), ("A10 / A40", "8.6"), ("L4", "8.9"), ("L40S", "8.9"),
    ("GeForce RTX 4090", "8.9"), ("H100", "9.0"), ("H200", "9.0"), ("GH200", "9.0"),
    ("B200", "10.0"), ("GeForce RTX 5090", "12.0"), ("RTX PRO 6000 Blackwell", "12.0"),
)

# Lowest Linux driver of each CUDA release (GA), newest first: its CUDA driver API version.
DRIVER_API: tuple[tuple[str, str], ...] = (
    ("580.65.06", "13.0"), ("575.51.03", "12.9"), ("570.26", "12.8"), ("560.28.03", "12.6"),
    ("555.42.02", "12.5"), ("550.54.14", "12.4"), ("545.23.06", "12.3"), ("535.54.03", "12.2"),
    ("530.30.02", "12.1"), ("525.60.13", "12.0"), ("520.61.05", "11.8"), ("515.43.04", "11.7"),
    ("510.39.01", "11.6"), ("495.29.05", "11.5"), ("470.42.01", "11.4"), ("465.19.01", "11.3"),
    ("460.27.03", "11.2"), ("455.23", "11.1"), ("450.36.06", "11.0"), ("440.33.01", "10.2"),
    ("418.39", "10.1"),
)

# CPU choices: key -> (label, platform, arch, flags). Each x86 level holds its own and
# every lower level's flags; "x86-64-v2+avx" is Sandy/Ivy Bridge (AVX without AVX2),
# the floor of wheels compiled with -mavx.
_X86_BASE = frozenset().union(*(cpuflags.LEVELS[n] for n in (1, 2)))
CPUS: dict[str, tuple[str, str, str, frozenset[str]]] = {
    "x86-64-v1": ("x86-64-v1 (SSE2 only)", "linux/amd64", "x86_64", cpuflags.LEVELS[1]),
    "x86-64-v2": ("x86-64-v2 (SSE4.2, no AVX)", "linux/amd64", "x86_64", _X86_BASE),
    "x86-64-v2+avx": ("x86-64-v2 with AVX (Sandy Bridge, Ivy Bridge)", "linux/amd64", "x86_64",
                      _X86_BASE | {"avx", "xsave"}),
    "x86-64-v3": ("x86-64-v3 (AVX2: Haswell and newer, Zen 1-3), no AVX-512", "linux/amd64",
                  "x86_64", _X86_BASE | cpuflags.LEVELS[3]),
    "x86-64-v4": ("x86-64-v4 (AVX-512: Skylake-SP and newer, Zen 4)", "linux/amd64", "x86_64",
                  _X86_BASE | cpuflags.LEVELS[3] | cpuflags.LEVELS[4]),
    "aarch64": ("aarch64 (ARMv8-A with Advanced SIMD)", "linux/arm64", "aarch64",
                frozenset({"fp", "asimd"})),
}
PLATFORMS = ("linux/amd64", "linux/arm64")
NO_GPU = "none"


def generation(cc: str) -> str:
    """The generation name of compute capability ``cc`` (``"9.0"`` -> ``"Hopper"``);
    ``""`` when the table does not know it."""
    major = cc.split(".")[0]
    for name, ccs in GENERATIONS:
        if cc in ccs or (name == "Blackwell" and major in ("10", "11", "12")):
            return name
    return ""


def api_version(driver: str) -> str:
    """The CUDA driver API version of Linux driver ``driver`` (``"550.54.15"`` -> ``"12.4"``):
    the newest release whose minimum driver it meets; ``""`` below the table."""
    have = parse_version(driver)
    return next((api for floor, api in DRIVER_API if have >= parse_version(floor)), "")


def driver_grid() -> list[str]:
    """Driver versions at which some answer can change, ascending: every release floor of
    DRIVER_API and every ``min_driver``/``min_driver_compat`` of compatibility.yaml. The
    chooser only compares a driver with these, so a machine's answer is the answer of the
    greatest grid value at or below its driver."""
    values = {floor for floor, _ in DRIVER_API}
    for facts in compat.table()["cuda"].values():
        values.update(str(v) for k, v in facts.items() if k in ("min_driver", "min_driver_compat"))
    return sorted(values, key=parse_version)


def floor_driver(driver: str, grid: list[str]) -> str | None:
    """The greatest grid value <= ``driver``; None when ``driver`` is below the grid."""
    have = parse_version(driver)
    below = [g for g in grid if parse_version(g) <= have]
    return below[-1] if below else None


def machine_probes(cpu: str, cc: str, driver: str, gpu_name: str = "GPU") -> dict[str, Any]:
    """Probe results ({family: DeviceProbe | CpuProbe}) of a machine with CPU choice
    ``cpu`` (a CPUS key), one GPU of compute capability ``cc`` (NO_GPU: none) on Linux
    driver ``driver``, and no other accelerator. Raises KeyError for an unknown CPU key."""
    _label, _platform, arch, flags = CPUS[cpu]
    level = cpuflags.isa_level(flags) if arch == "x86_64" else None
    out: dict[str, Any] = {fam: DeviceProbe(fam, ABSENT, f"no {fam} device visible")
                           for fam in ("xpu", "npu", "amd", "mlu")}
    out["cpu"] = CpuProbe(arch=arch, flags=flags, isa_level=level, online=8, effective_cpus=8,
                          model=_label)
    if cc == NO_GPU:
        out["nvidia"] = DeviceProbe("nvidia", ABSENT, "no NVIDIA GPU visible")
    else:
        out["nvidia"] = DeviceProbe("nvidia", USABLE, devices=(Device(0, gpu_name, "GPU-0", cc),),
                                    driver_version=driver, api_version=api_version(driver))
    return out


def machine_of(probes: Mapping[str, Any], grid: list[str]) -> tuple[str, str, str] | None:
    """The selector's key ``(cpu, cc, driver)`` for real probe results (what ``build.py
    probe`` reads from a host): the CPU choice its flags amount to, the first usable GPU's
    compute capability (NO_GPU when none) and the driver's grid floor. None when the
    machine is outside the table (no NVIDIA GPU of one capability, a driver below it)."""
    cpu = probes.get("cpu")
    flags = frozenset(getattr(cpu, "flags", ()) or ())
    if getattr(cpu, "arch", "") == "aarch64":
        key = "aarch64"
    else:
        level = cpuflags.isa_level(flags)
        key = {0: "x86-64-v1", 1: "x86-64-v1", 2: "x86-64-v2", 3: "x86-64-v3"}.get(level, "x86-64-v4")
        if key == "x86-64-v2" and "avx" in flags:
            key = "x86-64-v2+avx"
    nv = probes.get("nvidia")
    if nv is None or nv.state != USABLE or not nv.devices:
        return key, NO_GPU, ""
    if len({d.arch for d in nv.devices}) != 1:
        return None
    floor = floor_driver(nv.driver_version, grid)
    return (key, nv.devices[0].arch, floor) if floor else None


def unmodelled_flags(kernel_sets: list[Mapping[str, Any]]) -> list[str]:
    """CPU flags some set requires that the CPU choices do not tell apart (a flag every
    choice has or none has is fine; one only some x86 levels have beyond their level's
    own flags would make the table guess), sorted."""
    known = frozenset().union(*(f for *_, f in CPUS.values()))
    need = {cpuflags.normalise(f) for ks in kernel_sets if ks.get("device") == "cpu"
            for f in (ks.get("requires") or {}).get("cpu_flags", [])}
    return sorted(need - known)
