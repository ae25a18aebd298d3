"""Every vendor's visibility variable (probes/visible.py), parsed as its runtime parses it,
and the entrypoint hiding each vendor's devices on a fallback with the runtime's spelling."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes import visible
from probes.types import Device
from tests.fixtures.compose import compose

EIGHT = [Device(index=i, node=f"/dev/x{i}") for i in range(8)]
AMD = [Device(index=i + 1, uuid=f"GPU-{i:016x}") for i in range(4)]  # KFD nodes 1..4


def picked(family: str, env: dict[str, str], pool: list[Device] = EIGHT) -> list[int]:
    return [d.index for d in visible.select(family, pool, env)[0]]


@pytest.mark.parametrize(("family", "env", "want"), [
    ("xpu", {}, list(range(8))),
    ("xpu", {"XPU_VISIBLE_DEVICES": "0,3"}, [0, 3]),
    ("xpu", {"XPU_VISIBLE_DEVICES": "3,0"}, [3, 0]),
    ("xpu", {"XPU_VISIBLE_DEVICES": " 2 , 5 "}, [2, 5]),
    ("xpu", {"XPU_VISIBLE_DEVICES": "1,x,2"}, [1]),
    ("xpu", {"XPU_VISIBLE_DEVICES": "1,9,2"}, [1]),
    ("xpu", {"XPU_VISIBLE_DEVICES": "1,1"}, [1]),
    ("xpu", {"XPU_VISIBLE_DEVICES": "  "}, []),
    ("xpu", {"XPU_VISIBLE_DEVICES": "\u00b2"}, []),  # a superscript digit is no index
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1,2,3"}, [1, 2, 3]),
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1, 2,3"}, [1]),  # CANN: the space ends the list
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1,3,8"}, [1, 3]),  # CANN's own example
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": "3,1"}, [3]),  # ascending order only
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": ""}, []),
    ("mlu", {"MLU_VISIBLE_DEVICES": "0,2"}, [0, 2]),
    ("mlu", {"MLU_VISIBLE_DEVICES": "0,2,0"}, []),  # CNRT: a repeated ordinal gives the empty set
    ("mlu", {"MLU_VISIBLE_DEVICES": "4,3,two,one"}, [4, 3]),
    ("mlu", {"MLU_VISIBLE_DEVICES": "0", "CN_VISIBLE_DEVICES": "5"}, [5]),
])
def test_index_lists(family: str, env: dict[str, str], want: list[int]) -> None:
    assert picked(family, env) == want


@pytest.mark.parametrize(("env", "want"), [
    ({"ROCR_VISIBLE_DEVICES": "2,0"}, [3, 1]),
    ({"ROCR_VISIBLE_DEVICES": "GPU-0000000000000002"}, [3]),
    ({"ROCR_VISIBLE_DEVICES": "gpu-0000000000000003,0"}, [4, 1]),
    ({"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "0"}, [2]),  # HIP indexes ROCR's list
    ({"HIP_VISIBLE_DEVICES": "3"}, [4]),
    ({"CUDA_VISIBLE_DEVICES": "1"}, [2]),  # HIP reads it when HIP_VISIBLE_DEVICES is unset
    ({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}, [1]),
    ({"ROCR_VISIBLE_DEVICES": ""}, []),
    ({"ROCR_VISIBLE_DEVICES": "GPU-ffffffffffffffff"}, []),
])
def test_amd_lists(env: dict[str, str], want: list[int]) -> None:
    assert picked("amd", env, AMD) == want


def test_uuids_the_probe_cannot_read_are_counted_as_listed() -> None:
    uuids = "33033011-2157-0000-0000-000000000000,33033011-2157-0000-0000-000000000001"
    kept, notes, why = visible.select("mlu", EIGHT[:4], {"MLU_VISIBLE_DEVICES": uuids})
    assert len(kept) == 2 and why == "", (kept, why)
    assert any("cannot read" in n for n in notes), notes


def test_reasons_name_the_variable_escaped() -> None:
    _, _, why = visible.select("xpu", EIGHT, {"XPU_VISIBLE_DEVICES": "x\ny"})
    assert why.startswith("XPU_VISIBLE_DEVICES='x\\ny' selects no Kunlun XPU"), why
    assert visible.hidden_reason("npu", {"ASCEND_RT_VISIBLE_DEVICES": ""}) == \
        "ASCEND_RT_VISIBLE_DEVICES='' hides every Ascend NPU"
    assert visible.hidden_reason("npu", {"ASCEND_RT_VISIBLE_DEVICES": "0"}) == ""


@pytest.mark.parametrize(("family", "env", "want"), [
    ("xpu", {}, {"XPU_VISIBLE_DEVICES": ""}),
    ("npu", {"ASCEND_RT_VISIBLE_DEVICES": "0,1"}, {"ASCEND_RT_VISIBLE_DEVICES": ""}),
    ("amd", {"HIP_VISIBLE_DEVICES": "0"}, {"ROCR_VISIBLE_DEVICES": ""}),
    ("mlu", {}, {"MLU_VISIBLE_DEVICES": ""}),
    ("mlu", {"CN_VISIBLE_DEVICES": "0"}, {"MLU_VISIBLE_DEVICES": "", "CN_VISIBLE_DEVICES": ""}),
    ("xpu", {"XPU_VISIBLE_DEVICES": ""}, {}),
])
def test_hide_spellings(family: str, env: dict[str, str], want: dict[str, str]) -> None:
    assert visible.hide(family, env) == want


ENTRY = REPO / "entrypoint" / "stagecraft-entrypoint"
SHOW = ["sh", "-c", 'echo "$STAGECRAFT_CHOSEN xpu=${XPU_VISIBLE_DEVICES-unset} npu=${ASCEND_RT_VISIBLE_DEVICES-unset} '
        'rocr=${ROCR_VISIBLE_DEVICES-unset} mlu=${MLU_VISIBLE_DEVICES-unset}"']


def entry(tmp_path: Path, piece: str, device: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    root = compose(tmp_path / "root", "linux-rhel7-haswell", ("host-16cpu", piece))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"schema": 1, "device": device, "kernel_sets": [
        {"name": device, "device": device}, {"name": "cpu-avx2", "device": "cpu",
                                             "requires": {"cpu_flags": ["avx2"]}}]}))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STAGECRAFT_", "CUDA_"))
            and not k.endswith("_VISIBLE_DEVICES")}
    base.update({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(image),
                 "STAGECRAFT_REPORT": str(tmp_path / "report.json"), "PATH": "/usr/bin:/bin", **env})
    return subprocess.run([sys.executable, str(ENTRY), *SHOW], capture_output=True, text=True, env=base,
                          timeout=60, check=False)


@pytest.mark.parametrize(("piece", "device", "env", "line", "out"), [
    ("kunlun-r200", "xpu", {"XPU_VISIBLE_DEVICES": "gpu0"},
     "stagecraft: cpu-avx2 \u2014 fallback: XPU_VISIBLE_DEVICES='gpu0' selects no Kunlun XPU",
     "cpu-avx2 xpu= npu=unset rocr=unset mlu=unset"),
    ("ascend-910b", "npu", {"ASCEND_RT_VISIBLE_DEVICES": "-1"},
     "stagecraft: cpu-avx2 \u2014 fallback: ASCEND_RT_VISIBLE_DEVICES='-1' selects no Ascend NPU",
     "cpu-avx2 xpu=unset npu= rocr=unset mlu=unset"),
    ("amd-mi210", "amd", {"HIP_VISIBLE_DEVICES": "0", "STAGECRAFT_DEVICE": "cpu"}, "stagecraft: cpu-avx2",
     "cpu-avx2 xpu=unset npu=unset rocr= mlu=unset"),
    ("cambricon-mlu370", "mlu", {"MLU_VISIBLE_DEVICES": "1,1"},
     "stagecraft: cpu-avx2 \u2014 fallback: MLU_VISIBLE_DEVICES='1,1' selects no Cambricon MLU",
     "cpu-avx2 xpu=unset npu=unset rocr=unset mlu="),
])
def test_entrypoint_falls_back_says_why_and_hides(tmp_path: Path, piece: str, device: str, env: dict[str, str],
                                                 line: str, out: str) -> None:
    """An unparsable or empty selection: the command still runs, on CPU, with the vendor's
    devices hidden in the runtime's own spelling, and the first line says which variable."""
    cp = entry(tmp_path, piece, device, env)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr.splitlines()[0].startswith(line), cp.stderr
    assert cp.stdout.strip() == out, cp.stdout + cp.stderr


def test_entrypoint_counts_only_visible_devices(tmp_path: Path) -> None:
    cp = entry(tmp_path, "kunlun-r200", "xpu", {"XPU_VISIBLE_DEVICES": "1"})
    assert cp.stdout.split()[0] == "xpu", cp.stdout + cp.stderr
    assert "1x KUNLUNXIN R200" in cp.stderr, cp.stderr
    rep = json.loads((tmp_path / "report.json").read_text())
    assert [d["index"] for d in rep["probes"]["xpu"]["devices"]] == [1], rep["probes"]["xpu"]
