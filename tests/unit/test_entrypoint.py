"""The entrypoint end to end, in subprocesses, against fixture roots (no Docker).

STAGECRAFT_PROBE_ROOT and STAGECRAFT_IMAGE_JSON (test/debug only) point the entrypoint at
a fixture machine; the stand-in NVML is found through LD_LIBRARY_PATH as in a real process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fixtures.compose import IMAGES, NVML, compose
from tests.nvml_standin import standin

ENTRY = REPO / "entrypoint" / "stagecraft-entrypoint"
REPORT = REPO / "entrypoint" / "stagecraft-report"


def run(tmp_path: Path, cmd: list[str], *, cpuinfo: str = "linux-rhel7-haswell",
        pieces: tuple[str, ...] = ("host-16cpu",), image: str = "gpu-cuda11.8.json",
        env: dict[str, str] | None = None, script: Path = ENTRY) -> subprocess.CompletedProcess[str]:
    root = compose(tmp_path / "root", cpuinfo, pieces)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("STAGECRAFT_", "OMP_", "MKL_", "OPENBLAS_", "CUDA_", "NVIDIA_", "NUMEXPR_"))}
    base.pop("LD_LIBRARY_PATH", None)
    base.update({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(IMAGES / image),
                 "STAGECRAFT_REPORT": str(tmp_path / "run" / "report.json")})
    base.update(env or {})
    return subprocess.run([sys.executable, str(script), *cmd], capture_output=True, text=True,
                          env=base, timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_exit_code_preserved(tmp_path: Path) -> None:
    cp = run(tmp_path, ["sh", "-c", "exit 7"])
    assert cp.returncode == 7, cp.stderr


def test_fallback_line_names_the_reason(tmp_path: Path) -> None:
    cp = run(tmp_path, ["true"])
    assert cp.stderr.strip() == ("stagecraft: cpu-avx2 \u2014 fallback: no NVIDIA GPU visible "
                                 "(no /dev/nvidia*, NVML library not found)"), cp.stderr


def test_quiet_mode_prints_nothing(tmp_path: Path) -> None:
    cp = run(tmp_path, ["true"], env={"STAGECRAFT_QUIET": "1"})
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr


def test_fallback_hides_gpus_and_sets_chosen(tmp_path: Path) -> None:
    cp = run(tmp_path, ["sh", "-c", 'echo "[$CUDA_VISIBLE_DEVICES] ${CUDA_VISIBLE_DEVICES+set} $STAGECRAFT_CHOSEN"'],
             env={"CUDA_VISIBLE_DEVICES": "0"})
    assert cp.stdout.strip() == "[] set cpu-avx2", cp.stdout + cp.stderr


def test_threads_sized_to_quota_unless_user_set(tmp_path: Path) -> None:
    show = ["sh", "-c", 'echo "$OMP_NUM_THREADS $MKL_NUM_THREADS $OPENBLAS_NUM_THREADS"']
    cp = run(tmp_path / "a", show, pieces=("cgroup-v2-quota-1.5",))
    assert cp.stdout.split() == ["2", "2", "2"], cp.stdout + cp.stderr
    cp = run(tmp_path / "b", show, pieces=("cgroup-v2-quota-1.5",), env={"OMP_NUM_THREADS": "5"})
    assert cp.stdout.split() == ["5", "2", "2"], cp.stdout + cp.stderr
    cp = run(tmp_path / "c", show, pieces=("cgroup-v1-cpus-1",))
    assert cp.stdout.split() == ["1", "1", "1"], cp.stdout + cp.stderr


def test_no_limits_leave_thread_pools_alone(tmp_path: Path) -> None:
    cp = run(tmp_path, ["sh", "-c", 'echo "x${OMP_NUM_THREADS}x"'])
    assert cp.stdout.strip() == "xx", cp.stdout


def test_report_written_when_first_dirs_are_not_writable(tmp_path: Path) -> None:
    """The chain goes on to this host's /run/stagecraft or /tmp/stagecraft-UID: what the
    test made there is removed again (a report that was there before is only replaced,
    as a restarted container's would be)."""
    from entrypoint.runtime import candidates

    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {"STAGECRAFT_REPORT": str(blocker / "x" / "report.json"), "XDG_RUNTIME_DIR": str(blocker / "y")}
    fallbacks = [Path(c) for c in candidates(env)[1:]]
    made = [p for q in fallbacks for p in (q.parent, q) if not os.path.lexists(p)]
    try:
        cp = run(tmp_path, ["sh", "-c", 'echo "$STAGECRAFT_REPORT_PATH"'], env=env)
        path = cp.stdout.strip()
        assert cp.returncode == 0 and path and not path.startswith(str(blocker)), cp.stdout + cp.stderr
        rep = json.loads(Path(path).read_text())
        assert rep["chosen"] == "cpu-avx2" and rep["fallback"] is True
    finally:
        for p in made[::-1]:  # files before their directories
            if p.is_file():
                p.unlink()
            elif p.is_dir():
                p.rmdir()


def test_report_content(tmp_path: Path) -> None:
    cp = run(tmp_path, ["true"], pieces=("cgroup-v1-quota-1.5",))
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    assert rep["chosen"] == "cpu-avx2", rep
    assert rep["passed_over"][0]["name"] == "cuda11.8-sm"
    assert rep["probes"]["cpu"]["effective_cpus"] == 2
    assert rep["probes"]["cpu"]["memory_limit_bytes"] == 536870912
    assert rep["env_set"]["OMP_NUM_THREADS"] == "2"
    assert rep["image"]["framework"]["version"] == "2.6.0", cp.stderr


def test_refusal_on_cpu_without_avx(tmp_path: Path) -> None:
    cp = run(tmp_path, ["sh", "-c", "echo ran"], cpuinfo="linux-scientific7-k10", image="cpu-avx-only.json")
    assert cp.returncode == 78 and "ran" not in cp.stdout, cp.stdout + cp.stderr
    assert "stagecraft: refusing to start: no kernel set" in cp.stderr and "lacks avx" in cp.stderr


def test_strict_mode_refuses_cpu_fallback(tmp_path: Path) -> None:
    cp = run(tmp_path, ["sh", "-c", "echo ran"], env={"STAGECRAFT_STRICT": "1"})
    assert cp.returncode == 78 and "ran" not in cp.stdout
    assert "strict: wanted device nvidia is not usable" in cp.stderr, cp.stderr


def test_forced_device_and_unknown_kernel_set(tmp_path: Path) -> None:
    cp = run(tmp_path / "a", ["sh", "-c", "echo $STAGECRAFT_CHOSEN"], env={"STAGECRAFT_KERNEL_SET": "cpu-baseline"})
    assert cp.stdout.strip() == "cpu-baseline", cp.stderr
    cp = run(tmp_path / "b", ["true"], env={"STAGECRAFT_KERNEL_SET": "nope"})
    assert cp.returncode == 2 and "no such kernel set" in cp.stderr, cp.stderr


@pytest.mark.parametrize("env", [{"STAGECRAFT_KERNEL_SET": "nope"}, {"STAGECRAFT_DEVICE": "xpu"},
                                 {"STAGECRAFT_KERNEL_SET": "cpu-baseline", "STAGECRAFT_DEVICE": "mlu"}],
                         ids=["unknown-set", "device-without-set", "device-without-set-and-a-set"])
def test_an_override_the_image_cannot_meet_is_one_line_before_any_probe(tmp_path: Path, env) -> None:
    """Issue 22 review F12: an unknown kernel set was refused after probing (two lines, a
    report written); it is checked against image.json's names first, as the device is.
    The vendor tool stand-in would leave a mark had the XPU probe run."""
    mark = tmp_path / "probed"
    tool = tmp_path / "tools" / "xpu_smi"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\ntouch {mark}\n")
    tool.chmod(0o755)
    cp = run(tmp_path, ["sh", "-c", "echo ran"], env={**env, "PATH": f"{tool.parent}:{os.environ['PATH']}"})
    assert cp.returncode == 2 and cp.stdout == "", (cp.returncode, cp.stdout, cp.stderr)
    lines = cp.stderr.splitlines()
    assert len(lines) == 1 and ("(this image has: " in lines[0] or "(it has: " in lines[0]), lines
    assert "cpu-baseline" in lines[0], lines
    assert not (tmp_path / "run").exists() and not mark.exists()


def test_gpu_chosen_with_stand_in_nvml(tmp_path: Path, lib: Path) -> None:
    env = {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / "h200x8.conf")}
    cp = run(tmp_path, ["sh", "-c", 'echo "[${CUDA_VISIBLE_DEVICES-unset}] $STAGECRAFT_CHOSEN"'],
             pieces=("host-16cpu", "nvidia-nodes"), env=env)
    assert cp.stdout.strip() == "[unset] cuda11.8-sm", cp.stdout + cp.stderr
    assert cp.stderr.strip() == "stagecraft: cuda11.8-sm (8x NVIDIA H200, cc 9.0, driver 550.54.15)", cp.stderr


def test_old_driver_falls_back_naming_the_driver(tmp_path: Path, lib: Path) -> None:
    env = {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / "old-driver-440.conf")}
    cp = run(tmp_path, ["true"], pieces=("host-16cpu", "nvidia-nodes"), env=env)
    assert cp.returncode == 0
    assert "cpu-avx2 \u2014 fallback: driver 440.33.01 < 520.61.05 needed by CUDA 11.8" in cp.stderr, cp.stderr


def test_nvml_hang_does_not_hold_start(tmp_path: Path, lib: Path) -> None:
    env = {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / "hang.conf"),
           "STAGECRAFT_BUDGET_S": "0.5"}
    cp = run(tmp_path, ["sh", "-c", "exit 3"], pieces=("host-16cpu", "nvidia-nodes"), env=env)
    assert cp.returncode == 3 and "timeout: NVML did not answer within 0.5 s" in cp.stderr, cp.stderr


def test_command_not_found_is_127(tmp_path: Path) -> None:
    cp = run(tmp_path, ["no-such-command-xyz"])
    assert cp.returncode == 127 and "command not found" in cp.stderr


def test_no_command_runs_a_shell(tmp_path: Path) -> None:
    cp = run(tmp_path, [], env={"STAGECRAFT_QUIET": "1"})
    assert cp.returncode == 0, cp.stderr


def test_broken_image_json_still_runs_the_command(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    cp = run(tmp_path, ["sh", "-c", "exit 4"], env={"STAGECRAFT_IMAGE_JSON": str(bad)})
    assert cp.returncode == 4 and "probe failed" in cp.stderr, cp.stderr


def test_report_command(tmp_path: Path) -> None:
    run(tmp_path, ["true"], pieces=("cgroup-v2-cpuset-0-3",))
    cp = run(tmp_path, ["--json"], pieces=("cgroup-v2-cpuset-0-3",), script=REPORT)
    rep = json.loads(cp.stdout)
    assert rep["chosen"] == "cpu-avx2" and rep["probes"]["cpu"]["cpuset"] == 4, cp.stderr
    cp = run(tmp_path, ["--report"], pieces=("cgroup-v2-cpuset-0-3",))
    assert cp.stdout.startswith("stagecraft: cpu-avx2") and "passed over cuda11.8-sm" in cp.stdout, cp.stdout


@pytest.mark.parametrize("nvml", [None, "h200x8.conf"])
def test_start_path_imports_neither_typing_nor_ctypes_util(tmp_path: Path, lib: Path, nvml: str | None) -> None:
    """typing (11-15 ms) and ctypes.util (about 10 ms, imported but unused by pynvml) stay
    off the start-up path: `python -X importtime` lists every module imported."""
    env = {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / nvml)} if nvml else {}
    pieces = ("host-16cpu", "nvidia-nodes") if nvml else ("host-16cpu",)
    root = compose(tmp_path / "root", "linux-rhel7-haswell", pieces)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_"))}
    base.pop("LD_LIBRARY_PATH", None)
    base.update({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(IMAGES / "gpu-cuda11.8.json"),
                 "STAGECRAFT_REPORT": str(tmp_path / "report.json"), **env})
    cp = subprocess.run([sys.executable, "-IS", "-X", "importtime", str(ENTRY), "sh", "-c", "echo $STAGECRAFT_CHOSEN"],
                        capture_output=True, text=True, env=base, timeout=60, check=False)
    imported = {ln.split("|")[-1].strip() for ln in cp.stderr.splitlines() if ln.startswith("import time:")}
    assert cp.stdout.strip() == ("cuda11.8-sm" if nvml else "cpu-avx2"), cp.stdout + cp.stderr[-2000:]
    assert "probes.select" in imported and ("pynvml" in imported) == bool(nvml), sorted(imported)
    assert "typing" not in imported and "ctypes.util" not in imported, sorted(imported)


@pytest.mark.parametrize(("var", "value"), [
    ("STAGECRAFT_KERNEL_SET", "cpu-avx2\nstagecraft: cuda (8x NVIDIA H200)"),
    ("STAGECRAFT_KERNEL_SET", "x\u2028stagecraft: forged\r\x1b[2Kline"),
    ("STAGECRAFT_DEVICE", "gpu\x85forged\u2029forged"),
    ("STAGECRAFT_KERNEL_SET", "A" * 100_000),  # one variable may hold at most 128 KiB (MAX_ARG_STRLEN)
], ids=["newline", "line-separator-and-escape", "next-line", "100k"])
def test_a_bad_override_is_echoed_escaped_and_bounded(tmp_path: Path, var: str, value: str) -> None:
    """Issue 13 item 7: an override holding a line break was echoed raw (two lines); any
    value from the environment is shown quoted, escaped and cut (probes.show)."""
    cp = run(tmp_path, ["true"], env={var: value})
    assert cp.returncode == 2, cp.stderr[:500]
    lines = cp.stderr.splitlines()
    assert lines[0].startswith(f"stagecraft: refusing to start: {var}='"), lines[:3]
    # checked before probing (entrypoint.options; the kernel set against image.json's
    # names): one line, no report (issue 22 review F12: it was refused after probing)
    assert len(lines) == 1 and not (tmp_path / "run").exists(), lines
    assert len(cp.stderr) < 1000, f"{len(cp.stderr)} characters echoed"
    assert not any(ch in cp.stderr[:-1] for ch in "\r\x1b\x85\u2028\u2029"), repr(cp.stderr)
    if len(value) > 100:
        assert "... (100000 characters)" in lines[0], lines[0][:300]


def test_user_thread_setting_with_a_newline_is_noted_in_one_line(tmp_path: Path) -> None:
    cp = run(tmp_path, ["true"], pieces=("cgroup-v1-cpus-1",), env={"OMP_NUM_THREADS": "1\nforged"})
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    note = next(n for n in rep["notes"] if n.startswith("OMP_NUM_THREADS kept"))
    assert note == "OMP_NUM_THREADS kept as the user set it ('1\\nforged')", (note, cp.stderr)


def matrix_image(tmp_path_factory: pytest.TempPathFactory, tag: str) -> str:
    """The image.json that matrix.yaml gives ``tag`` (its real kernel sets), as a file."""
    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.render import image_manifest

    matrix = load_matrix(REPO / "matrix.yaml")
    spec = next(s for s in expand(matrix) if s.tag == tag)
    path = tmp_path_factory.mktemp("image") / "image.json"
    path.write_text(json.dumps(image_manifest(matrix, spec)))
    return str(path)


@pytest.fixture(scope="module")
def paddle_cpu_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return matrix_image(tmp_path_factory, "2.6.2-cpu")


def test_unknown_kernel_facts_are_said_at_start(tmp_path: Path, lib: Path,
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    """The 3.2.0 CUDA 12.6 entry declares sass/ptx unknown: on a Tesla M40 (cc 5.2) the
    entrypoint still uses the GPU but says, on a warning line, that it does not know."""
    conf = tmp_path / "m40.conf"
    standin.write_config(conf, gpus=[standin.gpu("Tesla M40", "GPU-40404040-0000-4000-8000-000000000000",
                                                 "5.2", 12884901888)])
    env = {"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(conf),
           "STAGECRAFT_IMAGE_JSON": matrix_image(tmp_path_factory, "3.2.0-gpu-cuda12.6-cudnn9.5")}
    cp = run(tmp_path, ["sh", "-c", "echo $STAGECRAFT_CHOSEN"], pieces=("host-16cpu", "nvidia-nodes"), env=env)
    assert cp.stdout.strip() == "cuda", cp.stdout + cp.stderr
    lines = cp.stderr.splitlines()
    assert lines[0].startswith("stagecraft: cuda (1x Tesla M40, cc 5.2"), lines
    assert lines[1].startswith("stagecraft: warning: unknown whether this build has kernels for cc 5.2"), lines


SHOW_ISA = ["sh", "-c", 'echo "$STAGECRAFT_CHOSEN ${ONEDNN_MAX_CPU_ISA-unset} ${MKL_ENABLE_INSTRUCTIONS-unset}"']


@pytest.mark.parametrize(("cpuinfo", "forced", "want"), [
    # The top set never caps, whatever the CPU: the libraries dispatch to VNNI/BF16/AMX.
    ("linux-unknown-sapphirerapids", None, "cpu-avx512 unset unset"),
    ("linux-rocky8.5-zen4", None, "cpu-avx512 unset unset"),
    ("linux-centos7-cascadelake", None, "cpu-avx512 unset unset"),
    # A lower set chosen because the host is in its class: its own dispatch, no cap.
    ("linux-rhel7-haswell", None, "cpu-avx2 unset unset"),
    ("linux-rhel7-ivybridge", None, "cpu-avx unset unset"),
    # A lower set forced on a newer CPU: the host's exact highest level within the class.
    ("linux-unknown-sapphirerapids", "cpu-avx2", "cpu-avx2 AVX2_VNNI AVX2_E1"),
    ("linux-rocky8.5-zen4", "cpu-avx2", "cpu-avx2 AVX2 unset"),
    ("linux-rhel7-haswell", "cpu-avx", "cpu-avx AVX AVX"),
])
def test_isa_caps_with_the_matrix_kernel_sets(tmp_path: Path, paddle_cpu_image: str, cpuinfo: str,
                                              forced: str | None, want: str) -> None:
    env = {"STAGECRAFT_IMAGE_JSON": paddle_cpu_image}
    if forced:
        env["STAGECRAFT_KERNEL_SET"] = forced
    cp = run(tmp_path, SHOW_ISA, cpuinfo=cpuinfo, env=env)
    assert cp.stdout.strip() == want, cp.stdout + cp.stderr
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    if want.endswith("unset unset"):
        assert any(n.startswith("CPU kernels: oneDNN ") and "own dispatch (no cap)" in n
                   for n in rep["notes"]), rep["notes"]
    else:
        assert any(n.startswith("CPU kernels capped at ") for n in rep["notes"]), rep["notes"]


def test_a_users_isa_cap_wins(tmp_path: Path, paddle_cpu_image: str) -> None:
    cp = run(tmp_path, SHOW_ISA, cpuinfo="linux-unknown-sapphirerapids",
             env={"STAGECRAFT_IMAGE_JSON": paddle_cpu_image, "STAGECRAFT_KERNEL_SET": "cpu-avx2",
                  "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert cp.stdout.strip() == "cpu-avx2 AVX2 AVX2_E1", cp.stdout + cp.stderr
