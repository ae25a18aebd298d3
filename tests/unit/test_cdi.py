"""The CDI spec for the stand-in GPU (tests/nvml_standin/cdi.py), and the entrypoint and
its health check with GPUs given the CDI way (nodes and library from the spec,
NVIDIA_VISIBLE_DEVICES=void, no LD_LIBRARY_PATH from the user), in subprocesses against
fixture roots and the stand-in NVML; no engine. The kernel-set choice under CDI for every
GPU scenario of the table is in test_select_scenarios.py (test_same_choice_under_cdi)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fixtures.compose import NVML, compose
from tests.nvml_standin import cdi, standin

ENTRY = REPO / "entrypoint" / "stagecraft-entrypoint"
HEALTH = REPO / "entrypoint" / "stagecraft-health"
CLI = REPO / "tests" / "nvml_standin" / "cdi.py"
SCHEMA = json.loads(cdi.SCHEMA.read_text())
A100 = standin.gpu("NVIDIA A100-SXM4-80GB", "GPU-6b7c1a2e-3f4d-5e6f-7a8b-9c0d1e2f3a4b", "8.0", 85899345920)


def _valid(spec: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(spec)


def test_layout_is_nvidia_ctk_s() -> None:
    """Two GPUs by index, hooks on: the layout of nvidia-ctk's generate_test.go."""
    spec = cdi.spec([cdi.Gpu(0, "GPU-a"), cdi.Gpu(1, "GPU-b")], "/opt/nvml/libnvidia-ml.so.1", "550.54.15")
    _valid(spec)
    assert (spec["cdiVersion"], spec["kind"]) == ("0.5.0", "nvidia.com/gpu")
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "all"]
    assert spec["devices"][1]["containerEdits"] == {"deviceNodes": [{"path": "/dev/nvidia1"}]}
    assert spec["devices"][2]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}]
    common = spec["containerEdits"]
    assert common["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert [n["path"] for n in common["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert common["mounts"] == [{"hostPath": "/opt/nvml/libnvidia-ml.so.1",
                                 "containerPath": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                                 "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}]
    hooks = common["hooks"]
    assert {h["hookName"] for h in hooks} == {"createContainer"} and hooks[0]["path"] == "/usr/bin/nvidia-cdi-hook"
    assert hooks[0]["args"] == ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"]


def test_stand_in_options() -> None:
    """No hooks: the soname mounted too; nodes bind a real device; the config mounted."""
    spec = cdi.spec([cdi.Gpu(0, "GPU-a")], "/l/libnvidia-ml.so.1", "575.57.08", names="uuid",
                    node_host="/dev/null", hooks=False, config="/c/a100.conf")
    _valid(spec)
    assert [d["name"] for d in spec["devices"]] == ["GPU-a", "all"]
    common = spec["containerEdits"]
    assert "hooks" not in common
    assert all(n["hostPath"] == "/dev/null" for n in common["deviceNodes"])
    assert [(m["hostPath"], m["containerPath"]) for m in common["mounts"]] == [
        ("/l/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.57.08"),
        ("/l/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
        ("/c/a100.conf", "/etc/stagecraft/nvml-standin.conf")]


@pytest.mark.parametrize(("conf", "want"), [
    ("h200x8.conf", [cdi.Gpu(i, f"GPU-5fa1c0de-0000-4000-8000-{i:012d}") for i in range(8)]),
    ("a100.conf", None),  # one gpu= line: its own UUID
    ("no-permission.conf", []),
])
def test_gpus_from_every_fixture_config(conf: str, want: list[cdi.Gpu] | None) -> None:
    got = cdi.gpus_from_config((NVML / conf).read_text())
    if want is None:
        assert len(got) == 1 and got[0].index == 0 and got[0].uuid.startswith("GPU-"), got
    else:
        assert got == want


def test_every_fixture_config_with_gpus_makes_a_valid_spec() -> None:
    made = 0
    for conf in sorted(NVML.glob("*.conf")):
        gpus = cdi.gpus_from_config(conf.read_text(), conf.name)
        if gpus:
            _valid(cdi.spec(gpus, "/l/libnvidia-ml.so.1", "550.54.15", names="uuid"))
            made += 1
    assert made >= 6


@pytest.mark.parametrize(("kw", "message"), [
    ({"gpus": []}, "no GPU to give"),
    ({"names": "type-index"}, "device name strategy 'type-index'"),
    ({"names": "uuid", "gpus": [cdi.Gpu(0)]}, "GPU 0 has no UUID"),
    ({"driver": "550; rm -rf /"}, "driver version"),
    ({"library": "libnvidia-ml.so.1"}, "must be absolute"),
    ({"node_host": "dev/null"}, "must be absolute"),
])
def test_bad_input_is_refused(kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"gpus": [cdi.Gpu(0, "GPU-a")], "library": "/l/libnvidia-ml.so.1",
                            "driver": "550.54.15", **kw}
    with pytest.raises(cdi.CdiError, match=message):
        cdi.spec(args.pop("gpus"), args.pop("library"), args.pop("driver"), **args)


def test_schema_refuses_what_cdi_refuses() -> None:
    """The structural schema can fail: each broken copy of a good spec is refused."""
    good = cdi.spec([cdi.Gpu(0, "GPU-a")], "/l/libnvidia-ml.so.1", "550.54.15")
    broken = [
        {**good, "kind": "nvidia.com"},                       # no class
        {**good, "cdiVersion": 5},
        {**good, "devices": [{"name": "-0", "containerEdits": {}}]},
        {**good, "devices": []},
        {**good, "containerEdits": {"deviceNodes": [{"hostPath": "/dev/null"}]}},  # no path
        {**good, "containerEdits": {"hooks": [{"hookName": "prestartt", "path": "/x"}]}},
        {**good, "containerEdits": {"env": ["NOVALUE"]}},
        {**good, "extra": 1},
    ]
    for spec in broken:
        with pytest.raises(jsonschema.ValidationError):
            _valid(spec)


def test_edits_for_unknown_device() -> None:
    spec = cdi.spec([cdi.Gpu(0, "GPU-a")], "/l/libnvidia-ml.so.1", "550.54.15")
    with pytest.raises(cdi.CdiError, match="nvidia.com/gpu=3: no such device in the spec"):
        cdi.edits_for(spec, "3")


def test_cli_writes_a_spec_and_refuses_bad_input(tmp_path: Path, lib: Path) -> None:
    out = tmp_path / "nvidia.json"
    cp = subprocess.run([sys.executable, str(CLI), "--config", str(NVML / "b200x8.conf"), "--library", str(lib),
                         "--node-host", "/dev/null", "--mount-config", "-o", str(out)],
                        capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode == 0, cp.stderr
    spec = json.loads(out.read_text())
    _valid(spec)
    assert len(spec["devices"]) == 9 and oct(out.stat().st_mode & 0o777) == "0o644"
    assert spec["containerEdits"]["mounts"][0]["containerPath"].endswith("libnvidia-ml.so.575.57.08")
    for args, message in [(["--config", str(tmp_path / "none.conf"), "--library", str(lib)], "no such file"),
                          (["--config", str(NVML / "no-permission.conf"), "--library", str(lib)], "no GPU"),
                          (["--config", str(NVML / "a100.conf"), "--library", str(tmp_path / "x.so")],
                           "standin.py build")]:
        bad = tmp_path / "bad.json"
        cp = subprocess.run([sys.executable, str(CLI), *args, "-o", str(bad)],
                            capture_output=True, text=True, timeout=60, check=False)
        assert cp.returncode == 2 and message in cp.stderr and len(cp.stderr.splitlines()) == 1, cp.stderr
        assert not bad.exists()


# --- the entrypoint and the health check, GPUs given by CDI -------------------------------


def _cdi_env(tmp_path: Path, lib: Path, conf: Path, spec_env: str) -> dict[str, str]:
    """A fixture root given ``all`` of a spec for ``conf``'s GPUs; the environment a
    container started with it has (the spec's env, or none), plus the loader path that
    the spec's ldcache hook would provide, and the test knobs."""
    root = compose(tmp_path / "root", "linux-rhel7-haswell", ("host-16cpu",))
    spec = cdi.spec(cdi.gpus_from_config(conf.read_text()), str(lib), "550.54.15", hooks=False)
    spec_vars = cdi.apply(spec, "all", root)
    img = tmp_path / "image.json"
    img.write_text(json.dumps({"schema": 1, "device": "nvidia", "device_strings": {"nvidia": "gpu:{index}", "cpu": "cpu"},
                               "kernel_sets": [
                                   {"name": "cuda", "device": "nvidia", "requires": {
                                       "cuda": "11.8", "min_driver": "520.61.05", "sass": ["8.0"], "ptx": []}},
                                   {"name": "cpu-avx2", "device": "cpu", "requires": {"cpu_flags": ["avx2"]}}]}))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_"))
            and not k.endswith("_VISIBLE_DEVICES") and k != "LD_LIBRARY_PATH"}
    return {**base, **(spec_vars if spec_env == "void" else {}),
            "LD_LIBRARY_PATH": str(root / cdi.LIBRARY_DIR.lstrip("/")),
            "STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(img),
            "STAGECRAFT_REPORT": str(tmp_path / "run" / "report.json"), "PATH": "/usr/bin:/bin",
            "STAGECRAFT_QUIET": "1", "STAGECRAFT_NVML_CONFIG": str(conf)}


def _sh(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("spec_env", ["void", "unset"])
def test_entrypoint_uses_gpus_given_by_cdi_and_health_follows(tmp_path: Path, lib: Path, spec_env: str) -> None:
    conf = standin.write_config(tmp_path / "nvml.conf", gpus=[A100])
    env = _cdi_env(tmp_path, lib, conf, spec_env)
    cp = _sh([sys.executable, str(ENTRY), "sh", "-c", 'echo "$STAGECRAFT_CHOSEN $STAGECRAFT_DEVICE_STRING"'], env)
    assert cp.returncode == 0 and cp.stdout.split() == ["cuda", "gpu:0"], cp.stdout + cp.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["device"] == "nvidia" and len(report["probes"]["nvidia"]["devices"]) == 1, report
    cp = _sh([sys.executable, str(HEALTH), "--budget", "2"], env)
    assert (cp.returncode, cp.stdout.strip()) == (0, "healthy: 1 NVIDIA GPU answer NVML"), cp.stdout + cp.stderr
    standin.write_config(conf, gpus=[A100], init_error=999)  # the GPU turns unusable
    cp = _sh([sys.executable, str(HEALTH), "--budget", "2"], env)
    assert cp.returncode == 1 and cp.stdout.startswith("unhealthy: NVML: Unknown Error (999)"), cp.stdout + cp.stderr


def test_none_still_hides_gpus_given_by_cdi(tmp_path: Path, lib: Path) -> None:
    """NVIDIA_VISIBLE_DEVICES=none (set by the user over the spec's void) is taken at its
    word: the CPU set, and the reason names the variable."""
    conf = standin.write_config(tmp_path / "nvml.conf", gpus=[A100])
    env = {**_cdi_env(tmp_path, lib, conf, "void"), "NVIDIA_VISIBLE_DEVICES": "none", "STAGECRAFT_QUIET": "0"}
    cp = _sh([sys.executable, str(ENTRY), "sh", "-c", 'echo "$STAGECRAFT_CHOSEN"'], env)
    assert cp.returncode == 0 and cp.stdout.strip() == "cpu-avx2", cp.stdout + cp.stderr
    assert "NVIDIA_VISIBLE_DEVICES='none'" in cp.stderr, cp.stderr
