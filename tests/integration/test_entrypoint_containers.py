"""The entrypoint in real containers of the built images, on this GPU-less host.

What a user sees with `docker run`: the CPU fallback of the GPU image and its one line,
the stand-in NVML (tests/nvml_standin) bind-mounted over the loader path making the same
image choose the GPU set or fall back for the real reason (no SASS for cc 9.0 in Paddle
2.6.0's cu118 wheel, a driver too old for CUDA 11.8), strict and quiet modes, a read-only
root, any uid, CPU quotas and cpusets sizing the thread pools, a CPU without AVX refused
with exit 78 (never SIGILL), `docker stop` ending the container at once, the report
command, and an image env without NVIDIA_* on the CPU image.

Every container is removed in a `finally`; every wait has a timeout; every assertion
names the tag.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Any, NamedTuple

import docker
import pytest

from tests.fixtures.compose import NVML
from tests.nvml_standin import standin

GPU_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"
CUDA12_TAG = "torch-2.10.0-gpu-cuda12.8"
CPU_TAG = "2.6.2-cpu"
NVML_IN_IMAGE = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
CPUINFO = Path(__file__).resolve().parents[1] / "fixtures" / "cpuinfo"
WAIT_S = 120
EXIT_REFUSED = 78
SIGILL_EXIT = 128 + 4

# What the command reports back about the environment the entrypoint gave it.
SHOW_ENV = ('echo "chosen=$STAGECRAFT_CHOSEN cvd=${CUDA_VISIBLE_DEVICES-unset} '
            'omp=${OMP_NUM_THREADS-unset} mkl=${MKL_NUM_THREADS-unset} '
            'openblas=${OPENBLAS_NUM_THREADS-unset} report=${STAGECRAFT_REPORT_PATH-unset} '
            'uid=$(id -u) gid=$(id -g)"')


class Ran(NamedTuple):
    tag: str
    code: int
    stdout: str
    stderr: str

    def fields(self) -> dict[str, str]:
        """SHOW_ENV's ``key=value`` words from stdout's last line."""
        last = self.stdout.strip().splitlines()[-1] if self.stdout.strip() else ""
        return dict(w.split("=", 1) for w in last.split() if "=" in w)

    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def _ref(built: dict[str, dict], tag: str) -> str:
    if tag not in built:
        pytest.skip(f"{tag} is not built on this host")
    return str(built[tag]["ref"])


@pytest.fixture(scope="module")
def gpu(built: dict[str, dict]) -> tuple[str, str]:
    return GPU_TAG, _ref(built, GPU_TAG)


@pytest.fixture(scope="module")
def cuda12(built: dict[str, dict]) -> tuple[str, str]:
    return CUDA12_TAG, _ref(built, CUDA12_TAG)


@pytest.fixture(scope="module")
def cpu(built: dict[str, dict]) -> tuple[str, str]:
    return CPU_TAG, _ref(built, CPU_TAG)


@pytest.fixture(scope="module")
def nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in libnvidia-ml.so.1, readable by any uid inside the container."""
    try:
        lib = standin.build(tmp_path_factory.mktemp("nvml-standin"))
    except RuntimeError as exc:
        pytest.fail(f"cannot build the stand-in NVML: {exc}")
    lib.chmod(0o755)
    return lib


def with_nvml(lib: Path, conf: str) -> dict[str, Any]:
    """run() arguments mounting the stand-in NVML and the config ``conf`` (a file name in
    tests/fixtures/nvml) into the container."""
    return {"volumes": {str(lib): {"bind": NVML_IN_IMAGE, "mode": "ro"},
                        str(NVML / conf): {"bind": f"/etc/stagecraft-test/{conf}", "mode": "ro"}},
            "environment": {"STAGECRAFT_NVML_CONFIG": f"/etc/stagecraft-test/{conf}"}}


def run(client: docker.DockerClient, image: tuple[str, str], cmd: list[str] | str,
        timeout: float = WAIT_S, **kw: Any) -> Ran:
    """Run ``cmd`` in a fresh container of ``image`` (tag, ref); wait at most ``timeout``
    seconds; always remove the container."""
    tag, ref = image
    if isinstance(cmd, str):
        cmd = ["sh", "-c", cmd]
    c = client.containers.run(ref, cmd, detach=True, **kw)
    try:
        try:
            code = int(c.wait(timeout=timeout)["StatusCode"])
        except Exception as exc:  # noqa: BLE001 - requests' ReadTimeout and friends
            pytest.fail(f"{tag}: {cmd} did not finish within {timeout} s ({type(exc).__name__})")
        out = c.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = c.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return Ran(tag, code, out, err)
    finally:
        c.remove(force=True)


def merge(*parts: dict[str, Any]) -> dict[str, Any]:
    """run() keyword arguments merged (volumes and environment are unioned)."""
    out: dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            if k in ("volumes", "environment") and k in out:
                out[k] = {**out[k], **v}
            else:
                out[k] = v
    return out


# --- the GPU image on a host without a GPU ---------------------------------------------


def test_gpu_image_runs_on_cpu_after_one_line(client, gpu) -> None:
    r = run(client, gpu, SHOW_ENV)
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert len(r.lines()) == 1, f"{r.tag}: expected one stderr line, got:\n{r.stderr}"
    line = r.lines()[0]
    assert line.startswith("stagecraft: cpu-") and "fallback: no NVIDIA GPU visible" in line, f"{r.tag}: {line}"
    f = r.fields()
    assert f["chosen"].startswith("cpu-"), f"{r.tag}: {r.stdout}"
    assert f["cvd"] == "", f"{r.tag}: GPUs not hidden on fallback: {r.stdout}"


@pytest.mark.parametrize("code", [0, 7, 100])
def test_command_exit_code_preserved(client, gpu, code: int) -> None:
    r = run(client, gpu, f"exit {code}")
    assert r.code == code, f"{r.tag}: `sh -c 'exit {code}'` exited {r.code}\n{r.stderr}"


def test_quiet_silences_the_line(client, gpu) -> None:
    r = run(client, gpu, "echo ran", environment={"STAGECRAFT_QUIET": "1"})
    assert r.code == 0 and r.stdout.strip() == "ran", f"{r.tag}: {r.code} {r.stdout}{r.stderr}"
    assert r.stderr == "", f"{r.tag}: STAGECRAFT_QUIET=1 still printed: {r.stderr!r}"


def test_strict_refuses_when_gpu_not_usable(client, gpu) -> None:
    r = run(client, gpu, "echo ran", environment={"STAGECRAFT_STRICT": "1"})
    assert r.code == EXIT_REFUSED, f"{r.tag}: strict mode exited {r.code}\n{r.stderr}"
    assert "ran" not in r.stdout, f"{r.tag}: the command ran in strict mode: {r.stdout}"
    assert "strict: wanted device nvidia is not usable" in r.stderr, f"{r.tag}: {r.stderr}"


def test_device_node_without_nvml_falls_back_naming_nvml(client, gpu, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    node = tmp_path / "nvidia0"
    os.mknod(node, 0o666 | 0o020000, os.makedev(195, 0))  # S_IFCHR
    r = run(client, gpu, SHOW_ENV, devices=[f"{node}:/dev/nvidia0:rwm"])
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert len(r.lines()) == 1, f"{r.tag}: {r.stderr}"
    line = r.lines()[0]
    assert "fallback" in line and "/dev/nvidia* present" in line and "NVML library" in line, f"{r.tag}: {line}"
    assert r.fields()["cvd"] == "", f"{r.tag}: {r.stdout}"


# --- the GPU image with the stand-in NVML ----------------------------------------------


def test_standin_a100_chooses_the_gpu_set(client, gpu, nvml_lib) -> None:
    r = run(client, gpu, SHOW_ENV, **with_nvml(nvml_lib, "a100.conf"))
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    f = r.fields()
    assert f["chosen"] == "cuda", f"{r.tag}: chose {f.get('chosen')}\n{r.stderr}"
    assert f["cvd"] == "unset", f"{r.tag}: CUDA_VISIBLE_DEVICES set on a GPU choice: {r.stdout}"
    assert r.lines() == ["stagecraft: cuda (1x NVIDIA A100-SXM4-80GB, cc 8.0, driver 550.54.15)"], \
        f"{r.tag}: {r.stderr}"


def test_standin_h200_falls_back_no_kernels_for_cc_9(client, gpu, nvml_lib) -> None:
    r = run(client, gpu, SHOW_ENV, **with_nvml(nvml_lib, "h200x8.conf"))
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert len(r.lines()) == 1, f"{r.tag}: {r.stderr}"
    line = r.lines()[0]
    assert "fallback: no kernels for cc 9.0 (GPU 0-7: 8x NVIDIA H200)" in line, f"{r.tag}: {line}"
    f = r.fields()
    assert f["chosen"].startswith("cpu-") and f["cvd"] == "", f"{r.tag}: {r.stdout}"


def test_standin_old_driver_names_the_driver_needed(client, gpu, nvml_lib) -> None:
    r = run(client, gpu, "exit 7", **with_nvml(nvml_lib, "old-driver-440.conf"))
    assert r.code == 7, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert "fallback: driver 440.33.01 < 520.61.05 needed by CUDA 11.8" in r.stderr, f"{r.tag}: {r.stderr}"


def test_standin_strict_with_h200_exits_78(client, gpu, nvml_lib) -> None:
    r = run(client, gpu, "echo ran", **merge(with_nvml(nvml_lib, "h200x8.conf"),
                                             {"environment": {"STAGECRAFT_STRICT": "1"}}))
    assert r.code == EXIT_REFUSED and "ran" not in r.stdout, f"{r.tag}: exit {r.code}\n{r.stdout}{r.stderr}"
    assert "no kernels for cc 9.0" in r.stderr, f"{r.tag}: {r.stderr}"


def test_standin_no_permission_falls_back_with_reason(client, gpu, nvml_lib) -> None:
    r = run(client, gpu, "true", **with_nvml(nvml_lib, "no-permission.conf"))
    assert r.code == 0 and "no permission to use the GPU" in r.stderr, f"{r.tag}: {r.code}\n{r.stderr}"


def _health(container: Any) -> dict[str, Any]:
    container.reload()
    return container.attrs["State"].get("Health") or {}


def _wait_health(container: Any, status: str, timeout: float = 40.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    h = _health(container)
    while h.get("Status") != status and time.monotonic() < deadline:
        time.sleep(0.5)
        h = _health(container)
    return h


def test_revoked_gpu_access_turns_the_container_unhealthy(client, gpu, nvml_lib, tmp_path: Path) -> None:
    """The image's own HEALTHCHECK (interval shortened here) re-checks the GPU through NVML;
    after start the stand-in NVML is switched to NVML_ERROR_UNKNOWN (999), as containers see
    once a systemd daemon-reload revokes their device access (nvidia-container-toolkit#48)."""
    tag, ref = gpu
    conf_dir = tmp_path / "nvml"
    conf_dir.mkdir()
    conf = standin.write_config(conf_dir / "nvml.conf", gpus=[standin.gpu(
        "NVIDIA A100-SXM4-80GB", "GPU-6b7c1a2e-3f4d-5e6f-7a8b-9c0d1e2f3a4b", "8.0", 85899345920, 0)])
    conf_dir.chmod(0o755)
    conf.chmod(0o644)
    c = client.containers.run(
        ref, ["sleep", "300"], detach=True,
        volumes={str(nvml_lib): {"bind": NVML_IN_IMAGE, "mode": "ro"},
                 str(conf_dir): {"bind": "/etc/stagecraft-test", "mode": "ro"}},
        environment={"STAGECRAFT_NVML_CONFIG": "/etc/stagecraft-test/nvml.conf"},
        # Only the timing is overridden: the test command is the image's HEALTHCHECK.
        healthcheck={"interval": 1_000_000_000, "timeout": 10_000_000_000, "retries": 1, "start_period": 0})
    try:
        h = _wait_health(c, "healthy")
        assert h.get("Status") == "healthy", f"{tag}: never healthy: {h}"
        assert "NVIDIA GPU answer NVML" in h["Log"][-1]["Output"], f"{tag}: {h['Log'][-1]}"
        conf.write_text(conf.read_text() + "init_error=999\n")
        h = _wait_health(c, "unhealthy")
        assert h.get("Status") == "unhealthy", f"{tag}: still {h.get('Status')} after NVML error 999: {h.get('Log')}"
        out = h["Log"][-1]["Output"]
        assert "unhealthy: NVML: Unknown Error (999); GPU access was revoked" in out, f"{tag}: {out}"
        assert c.attrs["State"]["Running"], f"{tag}: the container stopped instead of turning unhealthy"
    finally:
        c.remove(force=True)


# --- new GPUs on both CUDA generations -------------------------------------------------

NEW_GPUS = [("h200x8-r575.conf", "8x NVIDIA H200", "9.0", "GPU 0-7: 8x NVIDIA H200"),
            ("b200x8.conf", "8x NVIDIA B200", "10.0", "GPU 0-7: 8x NVIDIA B200"),
            ("rtx5090.conf", "1x NVIDIA GeForce RTX 5090", "12.0", "GPU 0: NVIDIA GeForce RTX 5090")]


@pytest.mark.parametrize("conf,devices,cc,group", NEW_GPUS, ids=[g[0].split(".")[0] for g in NEW_GPUS])
def test_new_gpu_chooses_cuda_on_the_cuda12_image(client, cuda12, nvml_lib, conf, devices, cc, group) -> None:
    """The CUDA 12.8 build carries SASS for 9.0, 10.0 and 12.0 (measured at build time)."""
    r = run(client, cuda12, SHOW_ENV, **with_nvml(nvml_lib, conf))
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert r.fields()["chosen"] == "cuda" and r.fields()["cvd"] == "unset", f"{r.tag} {conf}: {r.stdout}{r.stderr}"
    driver = (NVML / conf).read_text().split("driver=")[1].split()[0]
    assert r.lines() == [f"stagecraft: cuda ({devices}, cc {cc}, driver {driver})"], f"{r.tag}: {r.stderr}"


@pytest.mark.parametrize("conf,devices,cc,group", NEW_GPUS, ids=[g[0].split(".")[0] for g in NEW_GPUS])
def test_new_gpu_falls_back_on_the_cuda11_image(client, gpu, nvml_lib, conf, devices, cc, group) -> None:
    """Paddle 2.6's CUDA 11.8 build has SASS up to 8.6 and no PTX: CPU, saying why."""
    r = run(client, gpu, SHOW_ENV, **with_nvml(nvml_lib, conf))
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert len(r.lines()) == 1, f"{r.tag}: {r.stderr}"
    assert f"fallback: no kernels for cc {cc} ({group}) in this set (SASS 6.1, 7.0, 7.5, 8.0, 8.6; PTX none)" \
        in r.lines()[0], f"{r.tag} {conf}: {r.lines()[0]}"
    f = r.fields()
    assert f["chosen"].startswith("cpu-") and f["cvd"] == "", f"{r.tag}: {r.stdout}"


def test_cuda12_image_below_its_driver_floor_falls_back(client, cuda12, nvml_lib) -> None:
    """Driver 440 is below CUDA 12's minor-version-compatibility floor (525.60.13)."""
    r = run(client, cuda12, "exit 3", **with_nvml(nvml_lib, "old-driver-440.conf"))
    assert r.code == 3, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert "fallback: driver 440.33.01 < 570.26 needed by CUDA 12.8 (minor-version compatibility needs " \
        ">= 525.60.13" in r.stderr, f"{r.tag}: {r.stderr}"


# --- read-only root, any uid -----------------------------------------------------------


@pytest.mark.parametrize("image_name", ["gpu", "cpu"])
def test_read_only_root(client, request, image_name: str) -> None:
    image = request.getfixturevalue(image_name)
    r = run(client, image, SHOW_ENV + '; cat "$STAGECRAFT_REPORT_PATH"', read_only=True)
    assert r.code == 0, f"{r.tag}: exit {r.code} with --read-only\n{r.stderr}"
    first, _, rest = r.stdout.partition("\n")
    f = dict(w.split("=", 1) for w in first.split() if "=" in w)
    assert f["report"] not in ("", "unset"), f"{r.tag}: no report path with --read-only: {first}"
    rep = json.loads(rest)
    assert rep["chosen"] == f["chosen"], f"{r.tag}: report says {rep['chosen']}, env says {f['chosen']}"


def test_read_only_root_report_on_tmpfs(client, cpu) -> None:
    r = run(client, cpu, 'echo "$STAGECRAFT_REPORT_PATH"; cat "$STAGECRAFT_REPORT_PATH"', read_only=True,
            tmpfs={"/reports": "mode=1777"}, environment={"STAGECRAFT_REPORT": "/reports/report.json"})
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    path, _, rest = r.stdout.partition("\n")
    assert path == "/reports/report.json", f"{r.tag}: report went to {path!r}"
    assert json.loads(rest)["chosen"], f"{r.tag}: {rest[:300]}"


@pytest.mark.parametrize("user", ["12345", "12345:12345"])
@pytest.mark.parametrize("image_name", ["gpu", "cpu"])
def test_any_uid(client, request, image_name: str, user: str) -> None:
    image = request.getfixturevalue(image_name)
    r = run(client, image, SHOW_ENV + '; test -r "$STAGECRAFT_REPORT_PATH" && echo readable', user=user)
    assert r.code == 0, f"{r.tag}: exit {r.code} with --user {user}\n{r.stderr}"
    f = dict(w.split("=", 1) for w in r.stdout.splitlines()[0].split() if "=" in w)
    assert f["uid"] == "12345", f"{r.tag}: {r.stdout}"
    if ":" in user:
        assert f["gid"] == "12345", f"{r.tag}: {r.stdout}"
    assert f["chosen"].startswith("cpu-") and "readable" in r.stdout, f"{r.tag}: --user {user}: {r.stdout}{r.stderr}"


# --- CPU limits size the thread pools --------------------------------------------------


def _needs_two_cpus() -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU on this host: a 1-CPU limit changes nothing")


@pytest.mark.parametrize("limit", [{"nano_cpus": 1_000_000_000}, {"cpuset_cpus": "0"}],
                         ids=["cpus-1", "cpuset-0"])
def test_cpu_limit_gives_one_thread_per_pool(client, cpu, limit: dict[str, Any]) -> None:
    _needs_two_cpus()
    r = run(client, cpu, SHOW_ENV, **limit)
    f = r.fields()
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    assert (f["omp"], f["mkl"], f["openblas"]) == ("1", "1", "1"), f"{r.tag} {limit}: {r.stdout}"
    assert "1 CPU)" in r.stderr, f"{r.tag} {limit}: {r.stderr}"


@pytest.mark.parametrize("limit", [{"nano_cpus": 1_000_000_000}, {"cpuset_cpus": "0"}],
                         ids=["cpus-1", "cpuset-0"])
def test_cpu_limit_keeps_the_users_omp(client, cpu, limit: dict[str, Any]) -> None:
    _needs_two_cpus()
    r = run(client, cpu, SHOW_ENV, environment={"OMP_NUM_THREADS": "3"}, **limit)
    f = r.fields()
    assert (f["omp"], f["mkl"]) == ("3", "1"), f"{r.tag} {limit}: {r.stdout}\n{r.stderr}"


def test_no_limit_leaves_pools_alone(client, cpu) -> None:
    r = run(client, cpu, SHOW_ENV)
    f = r.fields()
    assert (f["omp"], f["mkl"], f["openblas"]) == ("unset", "unset", "unset"), f"{r.tag}: {r.stdout}"


# --- a CPU the kernels cannot run on ---------------------------------------------------


@pytest.mark.parametrize("image_name", ["cpu", "gpu"])
def test_cpu_without_avx_is_refused_not_sigill(client, request, image_name: str) -> None:
    image = request.getfixturevalue(image_name)
    cpuinfo = CPUINFO / "linux-scientific7-k10"  # AMD Opteron 6136: SSE4a, no AVX
    r = run(client, image, "echo ran; python3 -c 'import paddle'",
            volumes={str(cpuinfo): {"bind": "/proc/cpuinfo", "mode": "ro"}})
    assert r.code != SIGILL_EXIT, f"{r.tag}: SIGILL on a CPU without AVX\n{r.stderr}"
    assert r.code == EXIT_REFUSED, f"{r.tag}: exit {r.code}, wanted {EXIT_REFUSED}\n{r.stderr}"
    assert "ran" not in r.stdout, f"{r.tag}: the command ran: {r.stdout}"
    assert "refusing to start" in r.stderr and "lacks avx" in r.stderr, f"{r.tag}: {r.stderr}"


# --- signals, report command, image env -------------------------------------------------


@pytest.mark.parametrize("image_name", ["cpu", "gpu"])
def test_docker_stop_is_prompt(client, request, image_name: str) -> None:
    tag, ref = request.getfixturevalue(image_name)
    c = client.containers.run(ref, ["sleep", "600"], detach=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait for the entrypoint to have exec'd sleep
            c.reload()
            if c.status != "running":
                break
            top = c.top(ps_args="-o pid,comm")
            if any(p[-1] == "sleep" for p in top.get("Processes") or []):
                break
            time.sleep(0.1)
        assert c.status == "running", f"{tag}: container not running: {c.status} {c.logs()[-500:]!r}"
        t0 = time.monotonic()
        c.stop(timeout=10)
        took = time.monotonic() - t0
        code = int(c.wait(timeout=WAIT_S)["StatusCode"])
    finally:
        c.remove(force=True)
    assert took < 2.0, f"{tag}: docker stop took {took:.2f} s (SIGTERM not forwarded to the command?)"
    assert code in (143, 128 + 15, 0), f"{tag}: exit {code} after docker stop"


def test_cpu_report_command_names_the_chosen_set(client, cpu) -> None:
    r = run(client, cpu, ["stagecraft-report", "--json"])
    assert r.code == 0, f"{r.tag}: exit {r.code}\n{r.stderr}"
    rep = json.loads(r.stdout)
    img = run(client, cpu, ["cat", "/etc/stagecraft/image.json"], environment={"STAGECRAFT_QUIET": "1"})
    names = [k["name"] for k in json.loads(img.stdout)["kernel_sets"]]
    assert rep["chosen"] in names and rep["device"] == "cpu", f"{r.tag}: chose {rep['chosen']} of {names}"
    assert rep["refused"] is False and rep["probes"]["cpu"]["flags"], f"{r.tag}: {json.dumps(rep)[:500]}"
    human = run(client, cpu, ["stagecraft-report"], environment={"STAGECRAFT_QUIET": "1"})
    assert human.code == 0 and human.stdout.startswith(f"stagecraft: {rep['chosen']}"), \
        f"{r.tag}: {human.stdout[:300]}{human.stderr}"


def test_cpu_image_carries_no_nvidia_env(client, cpu) -> None:
    tag, ref = cpu
    env = client.images.get(ref).attrs["Config"].get("Env") or []
    assert not [e for e in env if e.startswith("NVIDIA_")], f"{tag}: image env has {env}"
    r = run(client, cpu, "env")
    assert "NVIDIA_" not in r.stdout, f"{tag}: container env: {r.stdout}"
    assert "CUDA_VISIBLE_DEVICES" not in r.stdout, f"{tag}: a CPU image should not touch CUDA: {r.stdout}"


def test_shell_quoting_of_args_is_kept(client, cpu) -> None:
    arg = "a b  'c' $HOME"
    r = run(client, cpu, ["printf", "%s\\n", arg], environment={"STAGECRAFT_QUIET": "1"})
    assert r.stdout == arg + "\n", f"{r.tag}: {shlex.quote(arg)} came back as {r.stdout!r}"
