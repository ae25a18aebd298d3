"""The images where users run them: rootless Podman, GPUs given through CDI, an arbitrary
uid with group 0 on a read-only root (tests/integration/rootless.py for the plumbing).

``make test`` runs them (its set-up runs ``scripts/podman-setup.sh``, which also makes
the rootless user's runtime directory again after a boot); alone:
``python -m pytest tests/integration/test_podman.py`` (as root, or as the rootless user)
after that script. Like the rest of tests/integration they fail, not skip, when what they
need is missing: the message says what to run. ``-m podman`` selects them, ``-m "not
podman"`` leaves them out.

The images are the Docker engine's CPU image (``STAGECRAFT_PODMAN_IMAGE``, default
stagecraft/paddle:2.6.2-cpu) and Jupyter image (``STAGECRAFT_PODMAN_JUPYTER_IMAGE``,
default stagecraft/paddle:2.6.2-jupyter), loaded into the rootless store only when their
ID is not there yet (a run after a rebuild loads them again, later runs reuse them). The GPU tests mount
this tree's entrypoint and probes over the image's (the image may predate them) and the
image.json of a CUDA 11.8 tag of matrix.yaml (its NVIDIA kernel sets), so no 7 GB GPU
image is copied into a second store. The GPU is the stand-in (tests/nvml_standin), given
once by --device (nodes, the library bind-mounted) and once by a CDI spec
(tests/nvml_standin/cdi.py; --device nvidia.com/gpu=all): the same kernel set each time.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import rootless
from tests.nvml_standin import cdi, standin

pytestmark = pytest.mark.podman

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("STAGECRAFT_PODMAN_IMAGE", "stagecraft/paddle:2.6.2-cpu")
JUPYTER_IMAGE = os.environ.get("STAGECRAFT_PODMAN_JUPYTER_IMAGE", "stagecraft/paddle:2.6.2-jupyter")
GPU_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"  # SASS 6.1-8.6, no PTX: an A100 runs, an H200 falls back
LIB_DIR = cdi.LIBRARY_DIR
SHOW = ["sh", "-c", 'echo "$STAGECRAFT_CHOSEN $STAGECRAFT_DEVICE_STRING"']
QUIET = ["-e", "STAGECRAFT_QUIET=1"]


@pytest.fixture(scope="module", autouse=True)
def _ready() -> None:
    """Fail (with what to run) when rootless Podman is not set up."""
    why = rootless.not_ready()
    if why:
        pytest.fail(why)


@pytest.fixture(scope="module")
def image_id(built) -> str:
    """The CPU image in the rootless store: loaded when its ID is not there yet, reused
    across runs when it is (rootless.load_from_docker). ``built``: the host's images are
    built first, however this module is started."""
    return rootless.load_from_docker(IMAGE)


@pytest.fixture(scope="module")
def jupyter_id(built) -> str:
    """The Jupyter image in the rootless store, loaded the same way (1.2 GB)."""
    return rootless.load_from_docker(JUPYTER_IMAGE)


@pytest.fixture(scope="module")
def stand_in() -> Iterator[Path]:
    """A directory the rootless user can read: the stand-in library (lib), the GPU tag's
    image.json; the NVML config of each test is written there too."""
    d = Path(tempfile.mkdtemp(prefix=f"{rootless.PREFIX}-"))
    try:
        d.chmod(0o755)
        lib = standin.build(d)
        for p in (lib.parent, lib):
            p.chmod(0o755)
        (d / "lib").symlink_to(lib)
        (d / "image.json").write_text(json.dumps(_gpu_manifest()))
        (d / "image.json").chmod(0o644)
        yield d
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def _gpu_manifest() -> dict:
    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.render import image_manifest

    matrix = load_matrix(REPO / "matrix.yaml")
    spec = next(s for s in expand(matrix) if s.tag == GPU_TAG)
    return image_manifest(matrix, spec)


def _config(d: Path, text: str) -> Path:
    conf = d / f"{rootless.name('nvml')}.conf"
    conf.write_text(text)
    conf.chmod(0o644)
    return conf


def _tree_and_manifest(d: Path) -> list[str]:
    return ["-v", f"{REPO}/entrypoint:/opt/stagecraft/entrypoint:ro", "-v", f"{REPO}/probes:/opt/stagecraft/probes:ro",
            "-v", f"{d}/image.json:/etc/stagecraft/image.json:ro"]


def _by_device(d: Path, conf: Path) -> list[str]:
    """--device's way: nodes (rootless Podman binds them; /dev/null stands for each), the
    library and the stand-in's answers bind-mounted."""
    nodes = [f"/dev/nvidia{i}" for i in range(max(1, len(cdi.gpus_from_config(conf.read_text()))))]
    out = []
    for n in [*nodes, *cdi.CONTROL_NODES]:
        out += ["--device", f"/dev/null:{n}"]
    return out + ["-v", f"{(d / 'lib').resolve()}:{LIB_DIR}/{cdi.SONAME}:ro", "-v", f"{conf}:{cdi.CONFIG_PATH}:ro"]


def _spec(d: Path, conf: Path) -> dict:
    gpus = cdi.gpus_from_config(conf.read_text()) or [cdi.Gpu(0)]
    driver = next((ln.split("=", 1)[1] for ln in conf.read_text().splitlines() if ln.startswith("driver=")),
                  "550.54.15")
    return cdi.spec(gpus, str((d / "lib").resolve()), driver, node_host="/dev/null", node_mounts=True,
                    hooks=False, config=str(conf))


@pytest.mark.parametrize(("conf_name", "want"), [
    ("a100.conf", "cuda gpu:0"),                  # cc 8.0: the CUDA 11.8 set runs
    ("h200x8.conf", None),                        # cc 9.0: no kernels, CPU fallback
    ("no-permission.conf", None),                 # NVML refuses: CPU fallback
])
def test_cdi_chooses_what_device_chooses(image_id: str, stand_in: Path, conf_name: str, want: str | None) -> None:
    conf = _config(stand_in, (REPO / "tests/fixtures/nvml" / conf_name).read_text())
    base = ["run", "--rm", "--name", rootless.name("run"), *QUIET, *_tree_and_manifest(stand_in)]
    by_device = rootless.podman(*base, *_by_device(stand_in, conf), image_id, *SHOW).stdout.strip()
    with rootless.cdi_spec(_spec(stand_in, conf)):
        by_cdi = rootless.podman(*base, "--device", "nvidia.com/gpu=all", image_id, *SHOW).stdout.strip()
    assert by_cdi == by_device, f"{conf_name}: --device chose {by_device!r}, CDI {by_cdi!r}"
    if want:
        assert by_cdi == want, f"{conf_name}: {by_cdi!r}"
    else:
        assert by_cdi.split()[1] == "cpu", f"{conf_name}: {by_cdi!r}"


def test_health_check_under_cdi(image_id: str, stand_in: Path) -> None:
    """Healthy on the stand-in A100 given by CDI; unhealthy once its NVML answers
    NVML_ERROR_UNKNOWN (999), as a container whose device access was revoked sees."""
    text = (REPO / "tests/fixtures/nvml/a100.conf").read_text()
    conf = _config(stand_in, text)
    with rootless.cdi_spec(_spec(stand_in, conf)), rootless.container(
            *QUIET, *_tree_and_manifest(stand_in), "--device", "nvidia.com/gpu=all", image_id,
            "sleep", "300") as c:
        health = ["exec", c, "/opt/stagecraft/entrypoint/stagecraft-health", "--budget", "2"]
        ok = rootless.podman(*health, check=False)
        assert (ok.returncode, ok.stdout.strip()) == (0, "healthy: 1 NVIDIA GPU answer NVML"), ok.stdout + ok.stderr
        with open(conf, "r+") as f:  # in place: the container's bind mount sees the same file
            f.seek(0, 2)
            f.write("init_error=999\n")
        bad = rootless.podman(*health, check=False)
        assert bad.returncode == 1 and bad.stdout.startswith("unhealthy: NVML: Unknown Error (999)"), (
            bad.stdout + bad.stderr)


SUITES = ["tests/image/test_base.py", "tests/image/test_runtime.py"]
# These start their own containers on the Docker engine (docker.from_env()): they say
# nothing about Podman.
ON_DOCKER = ["test_works_under_any_uid", "test_pip_installs_as_the_default_user_and_any_uid"]


@pytest.mark.parametrize("which", ["cpu", "jupyter"])
def test_image_suites_under_rootless_podman(which: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The image's suites (matrix.yaml: its stages' tests; base and runtime for the CPU
    tag, and jupyter for the Jupyter tag), through testinfra's podman backend, against the
    image in a rootless Podman container."""
    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.testing import expectations

    ref, image_id = (IMAGE, request.getfixturevalue("image_id")) if which == "cpu" else (
        JUPYTER_IMAGE, request.getfixturevalue("jupyter_id"))
    suites = SUITES + (["tests/image/test_jupyter.py"] if which == "jupyter" else [])
    matrix = load_matrix(REPO / "matrix.yaml")
    tag = ref.rpartition(":")[2]
    spec = next(s for s in expand(matrix) if s.tag == tag or tag in s.aliases)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**expectations(matrix, spec, ref, image_id), "locked": True}))
    shim = rootless.shim(tmp_path / "bin")
    with rootless.container(*QUIET, image_id, "sleep", "infinity") as c:
        cp = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--rootdir={REPO}",
             f"--hosts=podman://{c}", f"--stagecraft-spec={spec_file}", "-k",
             " and ".join(f"not {t}" for t in ON_DOCKER), *suites],
            cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
            env={**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"})
    tail = (cp.stdout + cp.stderr)[-3000:]
    assert cp.returncode == 0, f"{ref} under rootless Podman:\n{tail}"
    import re

    passed = re.search(r"(\d+) passed", tail)
    least = 20 if which == "cpu" else 28
    assert passed and int(passed.group(1)) >= least, f"{ref}: too few suite tests ran (want {least}):\n{tail}"


def test_testinfra_podman_backend_reaches_the_rootless_container(image_id: str, tmp_path: Path) -> None:
    """testinfra.get_host("podman://NAME"), through the shim, sees the container's uid."""
    import testinfra

    shim = rootless.shim(tmp_path / "bin")
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{shim}:{old}"
    try:
        with rootless.container(*QUIET, image_id, "sleep", "infinity") as c:
            host = testinfra.get_host(f"podman://{c}")
            assert host.user().name == "worker" and host.file("/opt/stagecraft/entrypoint/stagecraft-entrypoint").exists
    finally:
        os.environ["PATH"] = old


# --- an arbitrary uid with group 0, a read-only root ----------------------------------------

RO_CHECK = ("id -u; id -g; echo \"$STAGECRAFT_REPORT_PATH\"; test -s \"$STAGECRAFT_REPORT_PATH\" && echo report-ok; "
            "echo \"${TMPDIR:-unset}\"; "
            "python -c 'import paddle; x = paddle.to_tensor([1.0, 2.0]); print(float((x * x).sum()))'")
# An arbitrary uid that /etc/passwd does not name, inside the 65536 ids rootless Podman
# maps (podman-setup.sh's subordinate range); OpenShift's are larger, the case the same.
UID = "54321"


@pytest.mark.parametrize("engine", ["docker", "podman"])
@pytest.mark.parametrize("tmpfs", [True, False], ids=["tmpfs-tmp", "no-tmpfs"])
def test_arbitrary_uid_read_only_root(image_id: str, engine: str, tmpfs: bool) -> None:
    """OpenShift's way: an arbitrary uid, group 0, --read-only, with and without a tmpfs
    on /tmp (Podman adds one unless --read-only-tmpfs=false). The entrypoint (this tree's)
    starts and writes its report where it can (/tmp, else /dev/shm); without a writable
    /tmp the command gets TMPDIR beside it; Paddle imports and computes; the home
    directory (read-only, another uid's) is not needed."""
    tmp = ["--tmpfs", "/tmp"] if tmpfs else (["--read-only-tmpfs=false"] if engine == "podman" else [])
    code = [f"{REPO}/entrypoint:/opt/stagecraft/entrypoint:ro", f"{REPO}/probes:/opt/stagecraft/probes:ro"]
    args = ["run", "--rm", "--name", rootless.name("ro"), "--user", f"{UID}:0", "--read-only", *tmp,
            "-v", code[0], "-v", code[1], *QUIET, image_id, "sh", "-c", RO_CHECK]
    if engine == "docker":
        cp = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300, check=False)
    else:
        cp = rootless.podman(*args, timeout=300, check=False)
    lines = cp.stdout.split()
    where = f"/tmp/stagecraft-{UID}/" if tmpfs else f"/dev/shm/stagecraft-{UID}/"
    assert cp.returncode == 0, f"{engine}: exit {cp.returncode}: {cp.stdout}{cp.stderr[-2000:]}"
    assert lines[:2] == [UID, "0"], f"{engine}: {cp.stdout}"
    assert lines[2].startswith(where) and lines[3] == "report-ok", f"{engine}: {cp.stdout}"
    assert lines[4] == ("unset" if tmpfs else f"/dev/shm/stagecraft-{UID}/tmp"), f"{engine}: {cp.stdout}"
    assert lines[5] == "5.0", f"{engine}: {cp.stdout}"


def _docker_image(ref: str) -> str:
    cp = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                        capture_output=True, text=True, timeout=60, check=False)
    if cp.returncode != 0:
        pytest.skip(f"{ref} is not built here (python build.py --tag {ref.rpartition(':')[2]})")
    return cp.stdout.strip()


def test_pytorch_image_read_only_arbitrary_uid_on_docker(built: dict[str, dict]) -> None:
    """The PyTorch family the same way, on Docker only (7.6 GB: not copied into a second
    store): no tmpfs, so TMPDIR comes from the entrypoint; torch imports and computes."""
    image = _docker_image("stagecraft/paddle:torch-2.10.0-gpu")
    code = [f"{REPO}/entrypoint:/opt/stagecraft/entrypoint:ro", f"{REPO}/probes:/opt/stagecraft/probes:ro"]
    cp = subprocess.run(["docker", "run", "--rm", "--name", rootless.name("torch"), "--user", f"{UID}:0",
                         "--read-only", "-v", code[0], "-v", code[1], *QUIET, image, "sh", "-c",
                         "echo \"$TMPDIR\"; python -c 'import torch; print(float(torch.ones(2).sum()))'"],
                        capture_output=True, text=True, timeout=300, check=False)
    assert cp.returncode == 0, f"torch: exit {cp.returncode}: {cp.stdout}{cp.stderr[-2000:]}"
    assert cp.stdout.split()[-2:] == [f"/dev/shm/stagecraft-{UID}/tmp", "2.0"], cp.stdout


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_jupyter_starts_read_only_arbitrary_uid(engine: str, request: pytest.FixtureRequest,
                                               built: dict[str, dict]) -> None:
    """The Jupyter family: the image's own command under an arbitrary uid with group 0 and
    --read-only plus a tmpfs /tmp (Podman's default with --read-only). No home directory
    is writable, so the entrypoint moves Jupyter's runtime, config and data dirs beside its
    report (entrypoint/homeless.py): the server must say it is running within 90 s, log no
    warning, and the image's own HEALTHCHECK command must find it (exit 0)."""
    import time

    if engine == "docker":
        image, run = _docker_image(JUPYTER_IMAGE), ["docker"]
    else:
        image, run = request.getfixturevalue("jupyter_id"), rootless.argv([])
    healthcheck = json.loads(subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", JUPYTER_IMAGE],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    assert healthcheck[0] == "CMD", healthcheck
    with rootless.container("--user", f"{UID}:0", "--read-only", *(["--tmpfs", "/tmp"] if engine == "docker" else []),
                            *QUIET, "-v", f"{REPO}/entrypoint:/opt/stagecraft/entrypoint:ro", image,
                            engine=["docker"] if engine == "docker" else ()) as c:
        deadline = time.monotonic() + 90
        logs = ""
        while time.monotonic() < deadline:
            cp = subprocess.run([*run, "logs", c], capture_output=True, text=True, timeout=30, cwd="/")
            logs = cp.stdout + cp.stderr
            state = subprocess.run([*run, "inspect", "-f", "{{.State.Running}}", c],
                                   capture_output=True, text=True, timeout=30, cwd="/").stdout.strip()
            if "is running at" in logs or state != "true":
                break
            time.sleep(2)
        health = subprocess.run([*run, "exec", c, *healthcheck[1:]], capture_output=True, text=True, timeout=60,
                                cwd="/")
    assert "is running at" in logs, f"{engine}: Jupyter did not start:\n{logs[-2000:]}"
    # [C ...] lines are the server's own banner (the URL to open), not a fault
    warned = [ln for ln in logs.splitlines() if ln.startswith(("[W ", "[E "))]
    assert not warned, f"{engine}: the server warned:\n" + "\n".join(warned)
    assert health.returncode == 0 and "healthy: Jupyter server" in health.stdout, (
        f"{engine}: HEALTHCHECK exit {health.returncode}: {health.stdout}{health.stderr}")


def _families() -> list[str]:
    """One tag per image family of matrix.yaml: its chain of stages, framework package and
    Debian release (the first tag of each, in matrix order)."""
    from tests.integration.harness import SPECS

    seen: dict[tuple, str] = {}
    for s in SPECS:
        key = (s.chain, s.components["framework"]["package"], s.components["base"]["version"])
        seen.setdefault(key, s.tag)
    return list(seen.values())


# What each family's framework must do as that uid (the toolkit and Jupyter stages add
# their own import).
FAMILY_CODE = {
    "paddle": "import paddle; x = paddle.to_tensor([1.0, 2.0]); print('ok', float((x * x).sum()))",
    "torch": "import torch; x = torch.tensor([1.0, 2.0]); print('ok', float((x * x).sum()) + 0.0)",
}
# torch.compile as that uid: Inductor names its cache after the user (getpass.getuser:
# entrypoint.homeless.user_env) and writes it, a 100 MB precompiled header first, under
# TMPDIR.
TORCH_COMPILE = ("import torch\n"
                 "f = torch.compile(lambda x: torch.sin(x) * 2 + x)\n"
                 "x = torch.linspace(-1, 1, 32)\n"
                 "print('ok', float((f(x) - (torch.sin(x) * 2 + x)).abs().max() < 1e-5) + 4.0)")
TORCH_TAG = "torch-2.10.0-gpu-cuda12.8"
STAGE_CODE = {"toolkit": "import paddleocr", "jupyter": "import jupyterlab, notebook_shim, ipykernel"}


@pytest.mark.parametrize("tag", _families())
def test_every_image_family_read_only_arbitrary_uid(built: dict[str, dict], tag: str) -> None:
    """Issue 26: each image family as built (this run's image, its own entrypoint), on
    Docker, as OpenShift runs it: an arbitrary uid with group 0, --read-only, and no tmpfs
    on /tmp (the hard case: TMPDIR and the homes come from the entrypoint). The report is
    written, the framework imports and computes, the stage's own packages import, and
    nothing needs a home directory."""
    if tag not in built:
        pytest.skip(f"{tag} is not buildable here (its index is unreachable)")
    from tests.integration.harness import SPECS

    spec = next(s for s in SPECS if s.tag == tag)
    fw = "torch" if spec.components["framework"]["import"] == "torch" else "paddle"
    code = "; ".join(STAGE_CODE[st] for st in spec.chain if st in STAGE_CODE)
    script = (f"test -s \"$STAGECRAFT_REPORT_PATH\" && echo report-ok; echo \"tmp=$TMPDIR user=${{USER:-}}\"; "
              f"python -c {shlex.quote(code or 'pass')} && python -c {shlex.quote(FAMILY_CODE[fw])}")
    cp = subprocess.run(["docker", "run", "--rm", "--name", rootless.name("fam"), "--user", f"{UID}:0", "--read-only",
                         *QUIET, built[tag]["ref"], "sh", "-c", script],
                        capture_output=True, text=True, timeout=900, check=False)
    out = cp.stdout.split()
    assert cp.returncode == 0, f"{tag}: exit {cp.returncode}: {cp.stdout}{cp.stderr[-3000:]}"
    assert out[0] == "report-ok", f"{tag}: {cp.stdout}"
    assert out[1:3] == [f"tmp=/dev/shm/stagecraft-{UID}/tmp", f"user={UID}"], f"{tag}: {cp.stdout}"
    assert out[-2:] == ["ok", "5.0"], f"{tag}: {cp.stdout}{cp.stderr[-2000:]}"


def test_torch_compile_read_only_arbitrary_uid(built: dict[str, dict]) -> None:
    """torch.compile as an arbitrary uid with group 0 on a read-only root with a tmpfs on
    /tmp (Kubernetes: readOnlyRootFilesystem and an emptyDir on /tmp). Docker mounts a
    --tmpfs noexec unless told `exec`, and Inductor loads the kernels it builds there
    ("failed to map segment from shared object"); without a tmpfs the only writable place
    is /dev/shm, 64 MB by default, too small for Inductor's 100 MB precompiled header
    ("cannot write PCH file: No space left on device"). README says both."""
    if TORCH_TAG not in built:
        pytest.skip(f"{TORCH_TAG} is not buildable here (its index is unreachable)")
    cp = subprocess.run(["docker", "run", "--rm", "--name", rootless.name("tc"), "--user", f"{UID}:0", "--read-only",
                         "--tmpfs", "/tmp:exec", *QUIET, built[TORCH_TAG]["ref"], "python", "-c", TORCH_COMPILE],
                        capture_output=True, text=True, timeout=900, check=False)
    assert cp.returncode == 0, f"exit {cp.returncode}: {cp.stdout}{cp.stderr[-3000:]}"
    assert cp.stdout.split()[-2:] == ["ok", "5.0"], cp.stdout + cp.stderr[-2000:]


def test_setup_check_says_the_same_as_root_and_as_the_rootless_user() -> None:
    """Review s29: ``podman-setup.sh --check`` judged /dev/net/tun with runuser, which only
    root may use, so run as the rootless user itself (a way these tests may be run:
    rootless.not_ready) it said "missing" on a ready machine. Both now say ready, and
    the user can open the device as slirp4netns does."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the check as both")
    root = subprocess.run(["bash", str(rootless.SETUP), "--check"], capture_output=True, text=True, timeout=60)
    as_user = subprocess.run(["runuser", "-u", rootless.USER, "--", "bash", str(rootless.SETUP), "--check"],
                             capture_output=True, text=True, timeout=60, cwd="/")
    assert (root.returncode, as_user.returncode) == (0, 0), (root.stderr, as_user.stderr)
    if os.path.exists("/dev/net/tun"):
        opened = subprocess.run(["runuser", "-u", rootless.USER, "--", "sh", "-c", "exec 3<>/dev/net/tun"],
                                capture_output=True, text=True, timeout=60, cwd="/")
        assert opened.returncode == 0, opened.stderr
