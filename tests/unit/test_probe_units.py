"""Unit tests of the probes' pure parts and of each probe's edge cases."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes import amd, cpuflags, fsread, mlu, npu, nvidia, probe_all, xpu
from probes.cpu import parse_cpuinfo
from probes.nvidia_visible import visible
from probes.report import best_tag, host_report, probes_from_dict, probes_to_dict
from probes.types import Device
from tests.fixtures.compose import CPUINFO, IMAGES, ROOTS, compose
from tests.nvml_standin import standin


@pytest.mark.parametrize("name,level", [
    ("linux-scientific7-k10", 1), ("linux-rhel6-piledriver", 2), ("linux-rhel7-ivybridge", 2),
    ("linux-rhel7-haswell", 3), ("linux-ubuntu20.04-zen3", 3), ("linux-rhel7-skylake_avx512", 4),
    ("linux-centos7-cascadelake", 4), ("linux-rocky8.5-zen4", 4), ("linux-unknown-sapphirerapids", 4)])
def test_isa_level_of_real_cpus(name: str, level: int) -> None:
    info = parse_cpuinfo((CPUINFO / name).read_text())
    assert info["arch"] == "x86_64" and cpuflags.isa_level(info["flags"]) == level  # type: ignore[arg-type]


def test_aarch64_features() -> None:
    info = parse_cpuinfo((CPUINFO / "linux-rhel9-neoverse_v2").read_text())
    assert info["arch"] == "aarch64" and {"sve2", "asimd"} <= info["flags"]  # type: ignore[operator]


def test_level_names_and_aliases() -> None:
    assert cpuflags.parse_level("x86-64-v3") == 3 and cpuflags.parse_level("v4") == 4
    assert cpuflags.parse_level("x86-64-v9") is None
    assert cpuflags.normalise("SSE4.2") == "sse4_2" and cpuflags.normalise("lzcnt") == "abm"


def test_range_list() -> None:
    assert fsread.parse_range_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert fsread.parse_range_list("") == []


def test_cpu_probe_without_cpuinfo_is_unusable_not_raising(tmp_path: Path) -> None:
    from probes import cpu

    r = cpu.probe(str(tmp_path))
    assert r.state == "unusable" and "cpuinfo" in r.reason and r.effective_cpus >= 1


def test_live_host_probe_never_raises() -> None:
    rep = host_report("/")
    assert set(rep["probes"]) == {"nvidia", "xpu", "npu", "amd", "mlu", "cpu"}
    json.dumps(rep)


def _devs() -> list[Device]:
    return [Device(0, "Tesla K40m", "GPU-aaaa1111-0000", "3.5"),
            Device(1, "NVIDIA A100", "GPU-bbbb2222-0000", "8.0", mig_uuids=("MIG-cccc3333-0000",))]


@pytest.mark.parametrize("cvd,want", [
    (None, [0, 1]), ("1", [1]), ("1,0", [1, 0]), ("GPU-bbbb", [1]), ("MIG-cccc3333-0000", [1]),
    ("MIG-GPU-bbbb2222-0000/1/0", [1]), ("0,7,1", [0]), ("", []), ("-1", []), ("none", []),
    ("GPU-", []), ("0,0", [0]), ("²", []), ("1,²", [1])])
def test_cuda_visible_devices_forms(cvd: str | None, want: list[int]) -> None:
    env = {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd}
    got, _ = visible(_devs(), env)
    assert [d.index for d in got] == want


# void and empty: the NVIDIA hook did nothing, GPUs given another way (CDI) still count.
@pytest.mark.parametrize("nvd,want", [("all", [0, 1]), ("void", [0, 1]), ("none", []), ("", [0, 1]),
                                      (" VOID ", [0, 1]), ("None", []),
                                      ("GPU-bbbb2222-0000", [1]), ("0,1", [0, 1])])
def test_nvidia_visible_devices_forms(nvd: str, want: list[int]) -> None:
    got, _ = visible(_devs(), {"NVIDIA_VISIBLE_DEVICES": nvd})
    assert [d.index for d in got] == want


def test_gfx_names() -> None:
    assert amd.gfx_name(90010) == "gfx90a" and amd.gfx_name(110000) == "gfx1100" and amd.gfx_name(90402) == "gfx942"


def test_vendor_tool_parsers() -> None:
    text = (ROOTS / "ascend-910b" / "usr/local/sbin/npu-smi").read_text()
    assert [r[:2] for r in npu.parse_npu_smi(text)] == [(0, "910B3"), (1, "910B3")]
    devs, drv = mlu.parse_cnmon((ROOTS / "cambricon-mlu370" / "usr/bin/cnmon").read_text())
    assert [d.arch for d in devs] == ["MLU370-X8", "MLU370-X8"] and drv == "5.10.13"
    line = "0000:3b:00.0 0 0 0 N/A N/A 0 0 N/A 38 52 0 N/A N/A N/A 0 0 0 16384 0 100 (KUNLUNXIN R200)"
    d = xpu.parse_xpu_smi_m(line)[0]
    assert (d.index, d.arch, d.memory_bytes) == (0, "R200", 16384 << 20)


def test_vendor_tool_timeout_is_a_state(tmp_path: Path) -> None:
    root = compose(tmp_path, None, ["ascend-910b"])
    tool = root / "usr/local/sbin/npu-smi"
    tool.write_text("#!/bin/sh\nsleep 5\n")
    r = npu.probe(str(root), budget_s=0.3, env={"PATH": "/usr/bin"})
    assert r.state == "unusable" and r.reason.startswith("timeout"), r


def test_nvml_library_search(tmp_path: Path) -> None:
    assert nvidia.find_library(str(tmp_path), {}) is None
    lib = tmp_path / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    lib.parent.mkdir(parents=True)
    lib.write_text("")
    assert nvidia.find_library(str(tmp_path), {}) == "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        path = standin.build(tmp_path_factory.mktemp("nvml"))
    except RuntimeError as exc:
        pytest.skip(str(exc))
    standin.preload(path)
    return path


def test_nvidia_probe_fields_through_real_pynvml(tmp_path: Path, lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = standin.write_config(tmp_path / "c.conf", driver="535.104.05", cuda=12020, gpus=[
        standin.gpu("NVIDIA A100-SXM4-40GB", "GPU-11111111-2222-3333-4444-555555555555", "8.0", 42949672960, 1)],
        migs=["0|MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "0|MIG-ffffffff-bbbb-cccc-dddd-eeeeeeeeeeee"])
    monkeypatch.setenv("STAGECRAFT_NVML_CONFIG", str(cfg))
    root = compose(tmp_path / "r", None, ["nvidia-nodes"])
    r = nvidia.probe(str(root), 2.0, {"LD_LIBRARY_PATH": str(lib.parent)})
    assert r.state == "usable" and r.driver_version == "535.104.05" and r.api_version == "12.2", r
    d = r.devices[0]
    assert (d.name, d.arch, d.memory_bytes, d.mig) == ("NVIDIA A100-SXM4-40GB", "8.0", 42949672960, True)
    assert d.mig_uuids == ("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "MIG-ffffffff-bbbb-cccc-dddd-eeeeeeeeeeee")


def test_nvidia_partial_failure_keeps_good_gpus(tmp_path: Path, lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = standin.write_config(tmp_path / "c.conf", gpus=[
        standin.gpu("NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000001", "9.0", 1 << 30),
        standin.gpu("NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000002", "9.0", 1 << 30)],
        errors=["nvmlDeviceGetUUID|15|1"])
    monkeypatch.setenv("STAGECRAFT_NVML_CONFIG", str(cfg))
    r = nvidia.probe(str(tmp_path), 2.0, {"LD_LIBRARY_PATH": str(lib.parent)})
    assert r.state == "usable" and len(r.devices) == 1 and any("GPU 1" in n for n in r.notes), r


def test_no_nodes_and_library_error_is_absent(tmp_path: Path, lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = standin.write_config(tmp_path / "c.conf", init_error=9)
    monkeypatch.setenv("STAGECRAFT_NVML_CONFIG", str(cfg))
    r = nvidia.probe(str(tmp_path), 2.0, {"LD_LIBRARY_PATH": str(lib.parent)})
    assert r.state == "absent" and "Driver Not Loaded" in r.reason, r


def test_report_roundtrip_and_best_tag(tmp_path: Path) -> None:
    root = compose(tmp_path, "linux-rhel7-haswell", ["cgroup-v2-quota-1.5"])
    rep = json.loads(json.dumps(host_report(str(root))))
    back = probes_to_dict(probes_from_dict(rep["probes"]))
    assert back == rep["probes"]
    gpu = json.loads((IMAGES / "gpu-cuda11.8.json").read_text())["kernel_sets"]
    cpu_only = [s for s in gpu if s["device"] == "cpu"]
    tag, why = best_tag(rep, [{"tag": "2.6.0-gpu", "kernel_sets": gpu}, {"tag": "2.6.2-cpu", "kernel_sets": cpu_only}])
    assert tag == "2.6.2-cpu" and "cpu-avx2" in why, why
    tag, why = best_tag(rep, [{"tag": "avx512-only", "kernel_sets": [gpu[1]]}])
    assert tag is None and "x86-64-v4" in why


def test_probe_all_limits_families(tmp_path: Path) -> None:
    r = probe_all(str(tmp_path), 1.0, ["xpu"])
    assert set(r) == {"xpu", "cpu"}


def test_shown_and_one_line_keep_values_on_one_bounded_line() -> None:
    from probes.show import one_line, shown

    assert shown("0,1") == "'0,1'"
    assert shown("a\nb\u2028c") == "'a\\nb\\u2028c'"
    assert shown("x" * 100, limit=5) == "'xxxxx'... (100 characters)"
    for text in ("a\nb", "a\rb", "a\x0bb", "a\x1cb", "a\x85b", "a\u2028b", "a\u2029b", "a\x1b[2Kb", "a\x00b"):
        out = one_line(text)
        assert len(out.splitlines()) == 1 and out.isprintable(), (text, out)
    assert one_line("tab\tstays") == "tab\tstays"
    assert one_line("y" * 50, limit=10) == "yyyyyyyyyy... (50 characters)"
