"""The framework's device string (entrypoint/devicestring.py, STAGECRAFT_DEVICE_STRING, the
stagecraft_device helper) and the HEALTHCHECK program (entrypoint/health.py), in
subprocesses against fixture roots and the stand-in NVML; no Docker."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from entrypoint import devicestring
from tests.fixtures.compose import compose
from tests.nvml_standin import standin

ENTRY = REPO / "entrypoint" / "stagecraft-entrypoint"
HEALTH = REPO / "entrypoint" / "stagecraft-health"
HELPER = REPO / "entrypoint" / "stagecraft_device.py"
PADDLE = {"cpu": "cpu", "nvidia": "gpu:{index}", "amd": "gpu:{index}", "xpu": "xpu:{index}",
          "npu": "npu:{index}", "mlu": "mlu:{index}"}
A100 = standin.gpu("NVIDIA A100-SXM4-80GB", "GPU-6b7c1a2e-3f4d-5e6f-7a8b-9c0d1e2f3a4b", "8.0", 85899345920)


@pytest.mark.parametrize(("template", "problem"), [
    ("gpu:{index}", ""), ("cpu", ""), ("cuda:{index}", ""), ("npu:{index}/{count}", ""), ("{{literal}}", ""),
    ("gpu:{idx}", "names unknown field {idx}; fields: index, count"),
    ("gpu:{}", "has a positional field {}"),
    ("gpu:{index!r}", "field {index} takes no conversion or format spec"),
    ("gpu:{index:>3}", "field {index} takes no conversion or format spec"),
    ("gpu:{index", "is not a template"),
    ("", "must be a non-empty string"),
])
def test_template_problems(template: str, problem: str) -> None:
    got = devicestring.problems(template)
    assert (problem in " ".join(got)) if problem else got == [], got


def test_render() -> None:
    assert devicestring.render(PADDLE, "nvidia", 8) == "gpu:0"
    assert devicestring.render(PADDLE, "cpu", 1) == "cpu"
    assert devicestring.render({"npu": "npu:{index}of{count}"}, "npu", 2) == "npu:0of2"
    assert devicestring.render(PADDLE, "ipu", 1) is None and devicestring.render(None, "cpu", 1) is None
    assert devicestring.render({"cpu": "{bad}"}, "cpu", 1) is None  # a hand-edited image.json stays harmless


def image(tmp_path: Path, device: str, strings: dict[str, str] | None = PADDLE) -> Path:
    sets = [{"name": "cpu-avx2", "device": "cpu", "requires": {"cpu_flags": ["avx2"]}}]
    if device == "nvidia":
        sets.insert(0, {"name": "cuda", "device": "nvidia", "requires": {
            "cuda": "11.8", "min_driver": "520.61.05", "sass": ["8.0"], "ptx": []}})
    elif device != "cpu":
        sets.insert(0, {"name": device, "device": device})
    data = {"schema": 1, "device": device, "kernel_sets": sets}
    if strings is not None:
        data["device_strings"] = strings
    path = tmp_path / "image.json"
    path.write_text(json.dumps(data))
    return path


def env_for(tmp_path: Path, pieces: tuple[str, ...], img: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    root = compose(tmp_path / "root", "linux-rhel7-haswell", ("host-16cpu", *pieces))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_"))
            and not k.endswith("_VISIBLE_DEVICES")}
    base.pop("LD_LIBRARY_PATH", None)
    base.update({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(img),
                 "STAGECRAFT_REPORT": str(tmp_path / "run" / "report.json"), "PATH": "/usr/bin:/bin",
                 "STAGECRAFT_QUIET": "1", **(extra or {})})
    return base


def sh(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


SHOW = ["sh", "-c", 'echo "$STAGECRAFT_DEVICE_STRING"']


@pytest.mark.parametrize(("piece", "device", "want"), [
    ((), "nvidia", "cpu"),  # no GPU: the CPU fallback is spelled the framework's way
    (("kunlun-r200",), "xpu", "xpu:0"),
    (("ascend-910b",), "npu", "npu:0"),
    (("cambricon-mlu370",), "mlu", "mlu:0"),
])
def test_device_string_exported(tmp_path: Path, piece: tuple[str, ...], device: str, want: str) -> None:
    env = env_for(tmp_path, piece, image(tmp_path, device))
    cp = sh([sys.executable, str(ENTRY), *SHOW], env)
    assert cp.stdout.strip() == want, cp.stdout + cp.stderr
    assert json.loads((tmp_path / "run" / "report.json").read_text())["device_string"] == want


def test_device_string_with_the_stand_in_gpu(tmp_path: Path, lib: Path) -> None:
    conf = standin.write_config(tmp_path / "nvml.conf", gpus=[A100])
    env = env_for(tmp_path, ("nvidia-nodes",), image(tmp_path, "nvidia"),
                  {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(conf)})
    cp = sh([sys.executable, str(ENTRY), *SHOW], env)
    assert cp.stdout.strip() == "gpu:0", cp.stdout + cp.stderr


def test_no_device_strings_no_variable(tmp_path: Path) -> None:
    env = env_for(tmp_path, (), image(tmp_path, "cpu", strings=None))
    cp = sh([sys.executable, str(ENTRY), "sh", "-c", 'echo "[${STAGECRAFT_DEVICE_STRING-unset}]"'], env)
    assert cp.stdout.strip() == "[unset]", cp.stdout + cp.stderr


def test_helper_reads_the_variable_then_the_report(tmp_path: Path) -> None:
    env = env_for(tmp_path, ("kunlun-r200",), image(tmp_path, "xpu"))
    cp = sh([sys.executable, str(ENTRY), sys.executable, str(HELPER)], env)
    assert cp.returncode == 0 and cp.stdout.strip() == "xpu:0", cp.stdout + cp.stderr
    # a process the entrypoint did not start (docker exec) reads the start-up report
    cp = sh([sys.executable, str(HELPER)], env)
    assert cp.returncode == 0 and cp.stdout.strip() == "xpu:0", cp.stdout + cp.stderr
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from stagecraft_device import device; "
            "print(device({'STAGECRAFT_DEVICE_STRING': 'npu:0'}))")
    cp = sh([sys.executable, "-c", code, str(HELPER.parent)], env)
    assert cp.stdout.strip() == "npu:0", cp.stderr


def test_helper_without_an_answer_says_why(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "STAGECRAFT_REPORT": str(tmp_path / "none.json"),
           "XDG_RUNTIME_DIR": str(tmp_path)}
    cp = sh([sys.executable, str(HELPER)], env)
    if cp.returncode == 0:  # a real report of this machine's own uid under /tmp or /run
        pytest.skip(f"a start-up report exists on this machine: {cp.stdout.strip()}")
    assert cp.returncode == 1 and cp.stderr.startswith("stagecraft_device: no device chosen"), cp.stderr


# --- HEALTHCHECK -----------------------------------------------------------------------


def test_health_turns_unhealthy_when_nvml_starts_failing(tmp_path: Path, lib: Path) -> None:
    """After start, the stand-in NVML is switched to NVML_ERROR_UNKNOWN (999), as running
    containers see after a systemd daemon-reload revokes their device access."""
    conf = standin.write_config(tmp_path / "nvml.conf", gpus=[A100])
    env = env_for(tmp_path, ("nvidia-nodes",), image(tmp_path, "nvidia"),
                  {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(conf)})
    cp = sh([sys.executable, str(ENTRY), "true"], env)
    assert cp.returncode == 0 and json.loads((tmp_path / "run" / "report.json").read_text())["device"] == "nvidia"
    cp = sh([sys.executable, str(HEALTH), "--budget", "2"], env)
    assert (cp.returncode, cp.stdout.strip()) == (0, "healthy: 1 NVIDIA GPU answer NVML"), cp.stdout + cp.stderr
    standin.write_config(conf, gpus=[A100], init_error=999)
    cp = sh([sys.executable, str(HEALTH), "--budget", "2"], env)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert cp.stdout.startswith("unhealthy: NVML: Unknown Error (999); GPU access was revoked"), cp.stdout
    standin.write_config(conf, gpus=[A100], errors=["nvmlDeviceGetHandleByUUID|15"])
    cp = sh([sys.executable, str(HEALTH)], env)
    assert cp.returncode == 1 and "GPU is lost" in cp.stdout, cp.stdout + cp.stderr


def test_health_keeps_its_budget_when_nvml_hangs(tmp_path: Path, lib: Path) -> None:
    conf = standin.write_config(tmp_path / "nvml.conf", gpus=[A100])
    env = env_for(tmp_path, ("nvidia-nodes",), image(tmp_path, "nvidia"),
                  {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(conf)})
    sh([sys.executable, str(ENTRY), "true"], env)
    standin.write_config(conf, gpus=[A100], hangs=["nvmlDeviceGetMemoryInfo|30"])
    t0 = time.monotonic()
    # -IS as the script's own first line (the image's Python): no site, so nothing has
    # imported threading before the check (review s30: pynvml imported in the worker made
    # it threading's main thread, and the interpreter then waited for it at exit)
    cp = sh([sys.executable, "-IS", str(HEALTH), "--budget", "0.5"], env)
    took = time.monotonic() - t0
    assert cp.returncode == 1 and cp.stdout.strip() == "unhealthy: NVML did not answer within 0.5 s", cp.stdout
    assert took < 10, f"the check took {took:.1f} s"


def test_health_of_node_families(tmp_path: Path) -> None:
    env = env_for(tmp_path, ("kunlun-r200",), image(tmp_path, "xpu"))
    sh([sys.executable, str(ENTRY), "true"], env)
    cp = sh([sys.executable, str(HEALTH)], env)
    assert (cp.returncode, cp.stdout.strip()) == (0, "healthy: xpu nodes present and usable (3 checked)"), cp.stdout
    (tmp_path / "root" / "dev" / "xpu1").unlink()
    cp = sh([sys.executable, str(HEALTH)], env)
    assert (cp.returncode, cp.stdout.strip()) == (1, "unhealthy: /dev/xpu1 gone"), cp.stdout


def test_health_on_cpu_and_without_a_report(tmp_path: Path) -> None:
    from entrypoint.health import check

    # (in-process: /run/stagecraft of this machine may hold a report of its own)
    assert check(None, 2.0) == (0, "healthy: no start-up report (started without the entrypoint): "
                                   "nothing to check")
    env = env_for(tmp_path, (), image(tmp_path, "nvidia"))
    sh([sys.executable, str(ENTRY), "true"], env)
    cp = sh([sys.executable, str(HEALTH)], env)
    assert (cp.returncode, cp.stdout.strip()) == (0, "healthy: cpu chosen: nothing to check"), cp.stdout


@pytest.mark.parametrize("budget", ["0", "-1", "two", "nan", "inf"])
def test_health_budget_must_be_positive(tmp_path: Path, budget: str) -> None:
    cp = sh([sys.executable, str(HEALTH), "--budget", budget], {"PATH": "/usr/bin:/bin"})
    assert cp.returncode == 1 and "not a positive number of seconds" in cp.stdout, cp.stdout
