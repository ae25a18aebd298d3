"""The stand-in GPU given through CDI on Docker 26 (``docker run --device
nvidia.com/gpu=all``): the entrypoint chooses the same kernel set and device string as
with the device nodes given by ``--device`` and the library bind-mounted.

The engine is a modern engine of scripts/modern-engine.sh of its own (``CDI_ENGINE``,
as test_platforms_emulated.py has one), whose daemon.json turns CDI on
(``features.cdi``) and reads specs from /stagecraft/share/cdi too: the engine's share
directory, which this test writes. Every path a spec or a bind mount names is a path of
the engine's container, so the stand-in library, its answers, this tree's entrypoint and
probes and the GPU tag's image.json are copied under the share directory. The image is
the host engine's CPU image, loaded into that engine once (tagged with the host's image
ID, so a later run finds it) rather than a 7 GB GPU image.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import engines
from tests.nvml_standin import cdi, standin

REPO = Path(__file__).resolve().parents[2]
CDI_ENGINE = "stagecraft-cdi"
IMAGE = "stagecraft/paddle:2.6.2-cpu"
GPU_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"  # SASS 6.1-8.6, no PTX: an A100 runs, an H200 falls back
INSIDE = "/stagecraft/share"  # the engine container's view of its share directory
SHOW = ["sh", "-c", 'echo "$STAGECRAFT_CHOSEN $STAGECRAFT_DEVICE_STRING"']


@pytest.fixture(scope="module")
def cdi_engine() -> engines.TestEngine:
    """The CDI-enabled Docker 26 (started by scripts/modern-engine.sh; fails, not skips).
    Not called ``engine``: that name is parametrized over the shared engines (conftest)."""
    try:
        return engines._modern("modern", engines.modern_env(CDI_ENGINE))
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `STAGECRAFT_MODERN_NAME={CDI_ENGINE} bash scripts/modern-engine.sh up` as root")


def _docker(engine: engines.TestEngine, *args: str, timeout: float = 300, check: bool = True,
            **kw) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False,
                        env=engine.environ(), **kw)
    if check and cp.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:4])}... on {CDI_ENGINE} exited {cp.returncode}: "
                             f"{cp.stderr.strip()[-2000:]}")
    return cp


@pytest.fixture(scope="module")
def image(cdi_engine: engines.TestEngine, built) -> str:
    """The host's CPU image in the CDI engine, as ``stagecraft-cditest/image:<host ID>``:
    loaded (docker save | docker load) only when that tag is missing. ``built``: the
    host's images are built first, however this module is started."""
    host = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", IMAGE], capture_output=True,
                          text=True, timeout=60, check=False)
    if host.returncode != 0:
        pytest.fail(f"the host engine has no {IMAGE}: build it (python build.py --tag 2.6.2-cpu)")
    ref = f"stagecraft-cditest/image:{host.stdout.strip().split(':')[-1][:16]}"
    if _docker(cdi_engine, "image", "inspect", ref, check=False).returncode != 0:
        save = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
        _docker(cdi_engine, "load", "-q", stdin=save.stdout, timeout=900)
        save.wait(timeout=60)
        _docker(cdi_engine, "tag", IMAGE, ref)
    return ref


@pytest.fixture(scope="module")
def share(cdi_engine: engines.TestEngine) -> Iterator[Path]:
    """A directory under the engine's share directory with the stand-in library (lib),
    this tree's entrypoint and probes, and the GPU tag's image.json; removed after."""
    d = cdi_engine.share / f"cditest-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    try:
        lib = standin.build(d / "build")
        shutil.copy2(lib, d / "lib")
        shutil.copytree(REPO / "entrypoint", d / "entrypoint", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(REPO / "probes", d / "probes", ignore=shutil.ignore_patterns("__pycache__"))
        from tests.integration.test_podman import _gpu_manifest

        (d / "image.json").write_text(json.dumps(_gpu_manifest()))
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _inside(p: Path, share_dir: Path) -> str:
    return f"{INSIDE}/{p.relative_to(share_dir.parent)}"


@pytest.mark.parametrize(("conf_name", "want"), [
    ("a100.conf", "cuda gpu:0"),                  # cc 8.0: the CUDA 11.8 set runs
    ("h200x8.conf", None),                        # cc 9.0: no kernels, CPU fallback
    ("no-permission.conf", None),                 # NVML refuses: CPU fallback
])
def test_docker26_cdi_chooses_what_device_chooses(cdi_engine: engines.TestEngine, image: str, share: Path,
                                                  conf_name: str, want: str | None) -> None:
    text = (REPO / "tests/fixtures/nvml" / conf_name).read_text()
    conf = share / f"{conf_name}"
    conf.write_text(text)
    lib, where = _inside(share / "lib", share), lambda p: _inside(share / p, share)
    base = ["run", "--rm", "-e", "STAGECRAFT_QUIET=1",
            "-v", f"{where('entrypoint')}:/opt/stagecraft/entrypoint:ro",
            "-v", f"{where('probes')}:/opt/stagecraft/probes:ro",
            "-v", f"{where('image.json')}:/etc/stagecraft/image.json:ro"]
    gpus = cdi.gpus_from_config(text) or [cdi.Gpu(0)]
    by_device = list(base)
    for n in [*(f"/dev/nvidia{g.index}" for g in gpus), *cdi.CONTROL_NODES]:
        by_device += ["--device", f"/dev/null:{n}"]
    by_device += ["-v", f"{lib}:{cdi.LIBRARY_DIR}/{cdi.SONAME}:ro", "-v", f"{_inside(conf, share)}:{cdi.CONFIG_PATH}:ro"]
    chosen_by_device = _docker(cdi_engine, *by_device, image, *SHOW).stdout.strip()

    driver = next((ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("driver=")), "550.54.15")
    spec = cdi.spec(gpus, lib, driver, node_host="/dev/null", hooks=False, config=_inside(conf, share))
    spec_file = cdi_engine.share / "cdi" / f"stagecraft-cditest-{uuid.uuid4().hex[:8]}.json"
    spec_file.parent.mkdir(exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    try:
        cp = _docker(cdi_engine, *base, "--device", "nvidia.com/gpu=all", image, *SHOW, check=False)
    finally:
        spec_file.unlink()
    assert cp.returncode == 0, f"{conf_name}: docker run --device nvidia.com/gpu=all: {cp.stderr[-2000:]}"
    chosen_by_cdi = cp.stdout.strip()
    assert chosen_by_cdi == chosen_by_device, f"{conf_name}: --device chose {chosen_by_device!r}, CDI {chosen_by_cdi!r}"
    if want:
        assert chosen_by_cdi == want, f"{conf_name}: {chosen_by_cdi!r}"
    else:
        assert chosen_by_cdi.split()[1] == "cpu", f"{conf_name}: {chosen_by_cdi!r}"


def test_cdi_is_on_in_the_engine(cdi_engine: engines.TestEngine, image: str) -> None:
    """daemon.json's features.cdi reaches the engine: `docker info` lists the spec dirs;
    and a CDI device no spec defines is refused, not ignored (so the scenarios above
    cannot pass with the device silently missing)."""
    info = json.loads(_docker(cdi_engine, "info", "--format", "{{json .}}").stdout)
    dirs = info.get("CDISpecDirs")
    assert dirs and f"{INSIDE}/cdi" in dirs, f"{CDI_ENGINE}: CDISpecDirs {dirs!r}"
    cp = _docker(cdi_engine, "run", "--rm", "--device", "example.com/none=all", image, "true", check=False)
    assert cp.returncode != 0 and "example.com/none=all" in cp.stderr, (cp.returncode, cp.stderr[-1000:])
