"""The chooser's rules one by one (pure; no probing)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.select import Overrides, check_nvidia, choose, gpu_kernel_path, parse_version
from probes.types import CpuProbe, Device, DeviceProbe

SASS = ["6.0", "7.0", "8.0", "9.0"]


@pytest.mark.parametrize("cc,path", [("8.0", "sass"), ("8.6", "sass"), ("8.9", "sass"), ("9.0", "sass"),
                                     ("7.5", "sass"), ("6.1", "sass"), ("10.0", "ptx"), ("12.0", "ptx"),
                                     ("5.2", None), ("3.5", None)])
def test_sass_and_ptx_rules(cc: str, path: str | None) -> None:
    assert gpu_kernel_path(cc, SASS, ["9.0"]) == path


def test_no_ptx_means_newer_major_has_no_kernels() -> None:
    assert gpu_kernel_path("10.0", SASS, []) is None


def test_parse_version() -> None:
    assert parse_version("520.61.05") == (520, 61, 5) and parse_version("11.8") == (11, 8)
    assert parse_version("570.86.15") > parse_version("520.61.05") > parse_version("470.82.01")


def _nv(driver: str, cc: str = "8.0", api: str = "12.4") -> DeviceProbe:
    return DeviceProbe("nvidia", "usable", devices=(Device(0, "GPU", "GPU-x", cc),), driver_version=driver,
                       api_version=api)


REQ = {"cuda": "11.8", "min_driver": "520.61.05", "min_driver_compat": "450.80.02", "sass": SASS, "ptx": ["9.0"]}


def test_driver_rules() -> None:
    assert check_nvidia(REQ, _nv("520.61.05"))[0]
    ok, _, warns = check_nvidia(REQ, _nv("450.80.02", api="11.0"))
    assert ok and "minor-version compatibility" in warns[0]
    ok, why, _ = check_nvidia(REQ, _nv("450.51.06", api="11.0"))
    assert not ok and "needs >= 450.80.02" in why
    ok, why, _ = check_nvidia(REQ, _nv("470.82.01", cc="10.0", api="11.4"))
    assert not ok and "PTX JIT" in why
    ok, why, _ = check_nvidia({**REQ, "cuda": "12.4", "min_driver": "550.54.14", "min_driver_compat": "525.60.13"},
                              _nv("470.82.01", api="11.4"))
    assert not ok and "525.60.13" in why


def _cpu(level: int) -> CpuProbe:
    from probes.cpuflags import LEVELS

    flags = frozenset().union(*(LEVELS[n] for n in range(1, level + 1)))
    return CpuProbe(arch="x86_64", flags=flags, isa_level=level, online=4, effective_cpus=4)


SETS = json.loads((REPO / "tests/fixtures/images/gpu-cuda11.8.json").read_text())["kernel_sets"]


def test_first_that_holds_with_reasons_for_earlier() -> None:
    c = choose({"nvidia": DeviceProbe("nvidia", "absent", "no GPU"), "cpu": _cpu(3)}, SETS)
    assert c.name == "cpu-avx2" and [p.name for p in c.passed_over] == ["cuda11.8-sm", "cpu-avx512"]
    assert c.fallback and c.message == "fallback: no GPU" and c.wanted_device == "nvidia"


def test_forced_device_not_in_image_is_usage_error() -> None:
    c = choose({"cpu": _cpu(3)}, SETS, Overrides(device="npu"))
    assert c.refused and c.exit_code == 2


def test_env_of_chosen_set_is_carried() -> None:
    c = choose({"nvidia": _nv("550.54.15"), "cpu": _cpu(3)}, SETS)
    assert c.name == "cuda11.8-sm" and "FLAGS_cudnn_dir" in c.env and not c.fallback


def test_schema_accepts_the_fixture_images() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "probes/kernel_sets.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for f in (REPO / "tests/fixtures/images").glob("*.json"):
        jsonschema.validate(json.loads(f.read_text())["kernel_sets"], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"name": "x", "device": "nvidia", "requires": {"sass": ["9.0"]}}], schema)


# Complete data or no claim: a build fact the matrix could not state is "unknown", and the
# chooser says so instead of accepting any GPU silently.
@pytest.mark.parametrize(("sass", "ptx", "cc", "ok", "text"), [
    ("unknown", "unknown", "5.2", True, "unknown whether this build has kernels for cc 5.2 (GPU 0: Tesla M40): "
                                        "the image declares SASS unknown, PTX unknown"),
    ("unknown", "unknown", "9.0", True, "unknown whether this build has kernels for cc 9.0"),
    (["8.0", "9.0"], "unknown", "9.0", True, ""),  # a known SASS covers it: no doubt
    (["8.0"], "unknown", "9.0", True, "the image declares SASS 8.0, PTX unknown"),
    (["8.0"], [], "9.0", False, "no kernels for cc 9.0 (GPU 0: Tesla M40) in this set (SASS 8.0; PTX none)"),
    ([], [], "8.0", False, "no kernels for cc 8.0"),  # both known and empty: no GPU kernels at all
])
def test_unknown_kernel_facts_warn(sass, ptx, cc, ok, text) -> None:
    req = {**REQ, "sass": sass, "ptx": ptx}
    nv = DeviceProbe("nvidia", "usable", devices=(Device(0, "Tesla M40", "GPU-m40", cc),),
                     driver_version="550.54.15", api_version="12.4")
    holds, why, warns = check_nvidia(req, nv)
    assert holds is ok, (why, warns)
    if ok:
        assert (text in " ".join(warns)) if text else not warns, warns
    else:
        assert text in why, why


def test_missing_kernel_facts_count_as_unknown() -> None:
    req = {k: v for k, v in REQ.items() if k not in ("sass", "ptx")}
    holds, _, warns = check_nvidia(req, _nv("550.54.15", cc="5.2"))
    assert holds and warns and warns[0].startswith("unknown whether this build has kernels for cc 5.2"), warns


def test_vendor_listed_capability_is_a_known_fit() -> None:
    """`supported`: the vendor says the build runs on cc 9.0 (Paddle's guide for its CUDA 12
    packages), not whether as SASS or PTX: a known fit there, "unknown" elsewhere."""
    req = {**REQ, "sass": "unknown", "ptx": "unknown", "supported": ["9.0"]}
    holds, _, warns = check_nvidia(req, _nv("550.54.15", cc="9.0"))
    assert holds and warns == [], warns
    holds, _, warns = check_nvidia(req, _nv("550.54.15", cc="8.0"))
    assert holds and warns[0].startswith("unknown whether this build has kernels for cc 8.0"), warns
