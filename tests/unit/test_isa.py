"""The CPU ISA mapping (probes/isa.py) on real /proc/cpuinfo captures (tests/fixtures/cpuinfo,
archspec-json): what oneDNN and MKL dispatch to on their own, and the caps a forced lower
kernel set gets. The top set never caps; a cap never names a level the host lacks."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes import isa
from probes.cpu import parse_cpuinfo
from tests.fixtures.compose import CPUINFO


def host(name: str) -> dict:
    return parse_cpuinfo((CPUINFO / name).read_text())


# capture -> (host class, oneDNN level, MKL level or None (non-Intel / not x86))
LEVELS = {
    "linux-unknown-sapphirerapids": ("amx", "AVX10_1_512_AMX", "AVX512_E4"),
    "linux-rocky8.5-zen4": ("avx512", "AVX512_CORE_BF16", None),
    "linux-centos7-cascadelake": ("avx512", "AVX512_CORE_VNNI", "AVX512_E1"),
    "linux-rhel7-skylake_avx512": ("avx512", "AVX512_CORE", "AVX512"),
    "linux-rhel7-haswell": ("avx2", "AVX2", "AVX2"),
    "linux-ubuntu20.04-zen3": ("avx2", "AVX2", None),
    "linux-rhel7-ivybridge": ("avx", "AVX", "AVX"),
    "linux-rhel6-piledriver": ("avx", "AVX", None),
    "linux-scientific7-k10": (None, None, None),
    "linux-amazon-neoverse_v1": (None, "SVE_256", None),
    "linux-rhel9-neoverse_v2": (None, "SVE_128", None),
}


@pytest.mark.parametrize("capture", sorted(LEVELS))
def test_levels_on_real_captures(capture: str) -> None:
    h = host(capture)
    cls, dnn, mkl = LEVELS[capture]
    assert isa.host_class(h["flags"], h["arch"]) == cls, capture
    assert isa.onednn_level(h["flags"], h["arch"], h["model"]) == dnn, capture
    assert isa.mkl_level(h["flags"], h["vendor"], h["arch"]) == mkl, capture


@pytest.mark.parametrize("capture", sorted(LEVELS))
def test_no_cap_is_the_top_sets_answer_everywhere(capture: str) -> None:
    h = host(capture)
    assert isa.caps(None, h["flags"], h["vendor"], h["arch"]) == ({}, ""), capture


# capture -> {isa_cap: expected variables}
FORCED = {
    "linux-unknown-sapphirerapids": {
        "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2_VNNI", "MKL_ENABLE_INSTRUCTIONS": "AVX2_E1"},
        "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX10_1_512", "MKL_ENABLE_INSTRUCTIONS": "AVX512_E3"},
        "avx": {"ONEDNN_MAX_CPU_ISA": "AVX", "MKL_ENABLE_INSTRUCTIONS": "AVX"}},
    "linux-rocky8.5-zen4": {
        "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},  # MKL ignores the variable on AMD
        "avx512": {}},
    "linux-centos7-cascadelake": {
        "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
        "avx512": {}},
    "linux-rhel7-haswell": {"avx2": {}, "avx512": {}, "avx": {"ONEDNN_MAX_CPU_ISA": "AVX",
                                                               "MKL_ENABLE_INSTRUCTIONS": "AVX"}},
    "linux-rhel7-ivybridge": {"avx": {}, "avx2": {}},
    "linux-amazon-neoverse_v1": {"avx2": {}, "avx": {}},
    "linux-rhel9-neoverse_v2": {"avx2": {}},
}


@pytest.mark.parametrize(("capture", "cap"), [(c, k) for c, d in sorted(FORCED.items()) for k in d])
def test_caps_of_a_lower_set(capture: str, cap: str) -> None:
    h = host(capture)
    got, note = isa.caps(cap, h["flags"], h["vendor"], h["arch"])
    assert got == FORCED[capture][cap], (capture, cap, note)
    assert bool(note) == bool(got), note
    if got and h["vendor"] != "GenuineIntel":
        assert "MKL cannot be capped on a non-Intel CPU" in note, note


@pytest.mark.parametrize("capture", sorted(LEVELS))
def test_a_cap_never_names_a_level_the_host_lacks(capture: str) -> None:
    """MKL falls back to its *default* (highest) path for a level the CPU lacks, so a cap
    must be a level the host has; and it is never above the host's own level."""
    h = host(capture)
    for cap in isa.CAP_CLASSES:
        got, _ = isa.caps(cap, h["flags"], h["vendor"], h["arch"])
        for var, table in (("ONEDNN_MAX_CPU_ISA", isa.ONEDNN_X64), ("MKL_ENABLE_INSTRUCTIONS", isa.MKL_X64)):
            if var in got:
                need = dict((n, f) for n, _, f in table)[got[var]]
                assert set(need) <= h["flags"], (capture, cap, got[var])


def test_unknown_cap_class_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown isa_cap 'avx3'"):
        isa.caps("avx3", frozenset({"avx2"}), "GenuineIntel")


def test_describe_names_what_the_libraries_pick() -> None:
    h = host("linux-rocky8.5-zen4")
    assert isa.describe(h["flags"], h["vendor"], h["arch"]) == \
        "oneDNN AVX512_CORE_BF16; MKL: non-Intel CPU (own dispatch)"
    h = host("linux-unknown-sapphirerapids")
    assert isa.describe(h["flags"], h["vendor"], h["arch"]) == "oneDNN AVX10_1_512_AMX; MKL AVX512_E4"
