"""probes.rank: known fits first, then an accelerator, no fallback, fewer warnings, the
most specific match, built images, matrix order; a tie is said to be one."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.cpu import parse_cpuinfo
from probes.rank import explain, rank
from probes.types import CpuProbe, Device, DeviceProbe
from tests.fixtures.compose import CPUINFO

SKX = parse_cpuinfo((CPUINFO / "linux-rhel7-skylake_avx512").read_text())
CPU = CpuProbe(arch="x86_64", flags=SKX["flags"], isa_level=4, online=8, effective_cpus=8)
NO_GPU = DeviceProbe("nvidia", "absent", "no NVIDIA GPU visible")
AVX2 = {"name": "cpu-avx2", "device": "cpu", "requires": {"cpu_flags": ["avx2", "fma"]}}
AVX512 = {"name": "cpu-avx512", "device": "cpu", "requires": {"cpu_flags": ["avx512f", "avx512bw", "avx512vl"]}}


def cuda(sass, ptx, supported=()):
    req = {"cuda": "12.6", "min_driver": "560.28.03", "sass": sass, "ptx": ptx}
    if supported:
        req["supported"] = list(supported)
    return {"name": "cuda", "device": "nvidia", "requires": req}


def gpus(cc: str) -> DeviceProbe:
    return DeviceProbe("nvidia", "usable", devices=(Device(0, "GPU", "GPU-0", cc),), driver_version="570.86.15",
                       api_version="12.8")


def test_tie_is_said() -> None:
    fits, _ = rank({"cpu": CPU, "nvidia": NO_GPU}, [{"tag": "a", "kernel_sets": [AVX2]},
                                                    {"tag": "b", "kernel_sets": [AVX2]}])
    assert [f.tag for f in fits] == ["a", "b"]
    assert explain(fits) == ("kernel set cpu-avx2 (cpu); tie with b (same kernel set quality, specificity "
                             "and build state): a comes first in matrix.yaml")


def test_built_wins_over_an_equal_fit() -> None:
    images = [{"tag": "a", "kernel_sets": [AVX2]}, {"tag": "b", "kernel_sets": [AVX2]}]
    fits, _ = rank({"cpu": CPU}, images, {"a": False, "b": True})
    assert fits[0].tag == "b" and explain(fits).endswith("; built; a fits as well but is not built"), explain(fits)
    fits, _ = rank({"cpu": CPU}, images, {"a": None, "b": True})
    assert fits[0].tag == "b" and "of unknown build state" in explain(fits)


def test_most_specific_match_wins_over_matrix_order() -> None:
    images = [{"tag": "generic", "kernel_sets": [AVX2]}, {"tag": "tuned", "kernel_sets": [AVX512, AVX2]}]
    fits, _ = rank({"cpu": CPU}, images, {"generic": True, "tuned": False})
    assert [f.tag for f in fits] == ["tuned", "generic"], fits
    assert "more specific than generic (3 requirements met against 2)" in explain(fits)


def test_exact_sass_beats_compatible_sass_beats_ptx() -> None:
    images = [{"tag": "ptx", "kernel_sets": [cuda(["8.0"], ["8.0"])]},
              {"tag": "compat", "kernel_sets": [cuda(["9.0"], [])]},
              {"tag": "exact", "kernel_sets": [cuda(["9.0", "10.0"], [])]}]
    fits, _ = rank({"cpu": CPU, "nvidia": gpus("10.0")}, images)
    # ptx on cc 10.0 warns (JIT), so it ranks last anyway; exact SASS 10.0 beats 9.0's
    # (which does not run on major 10 at all: refused).
    assert [f.tag for f in fits] == ["exact", "ptx"], [(f.tag, f.key) for f in fits]
    fits, _ = rank({"cpu": CPU, "nvidia": gpus("9.0")}, images[1:] + [{"tag": "older-sass", "kernel_sets": [
        cuda(["8.0", "9.0"], [])]}])
    assert fits[0].specificity == 3


def test_unknown_fit_ranks_after_known_ones_cpu_included() -> None:
    images = [{"tag": "unknown-gpu", "kernel_sets": [cuda("unknown", "unknown", ["9.0"]), AVX2]},
              {"tag": "cpu", "kernel_sets": [AVX2]}]
    fits, _ = rank({"cpu": CPU, "nvidia": gpus("5.2")}, images)
    assert [f.tag for f in fits] == ["cpu", "unknown-gpu"], [(f.tag, f.key) for f in fits]
    fits, _ = rank({"cpu": CPU, "nvidia": gpus("9.0")}, images)  # the vendor lists 9.0: a known fit
    assert fits[0].tag == "unknown-gpu" and not fits[0].choice.warnings, fits[0]
