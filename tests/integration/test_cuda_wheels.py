"""Paddle 3.x's NVIDIA requirements on the CUDA 12.6 stages, proven without Paddle's wheel.

Paddle's CUDA 12.6 wheels come from its own index, which this host cannot reach; their
requirements on NVIDIA's wheels are published (matrix.yaml, `cuda_wheels` of the 3.2.0
entry). The stages below Paddle (base, cuda, accel) come from PyPI: they are built here
through the CLI (`build.py --tag TAG --stage accel`), and pip, asked in the environment
the runtime stage extends, says it would install nothing for those requirements
(`pip install --dry-run --report`). The same question with another framework's pins
(two of torch 2.10's, CUDA 12.8) lists them: the check can fail. Each library Paddle 3.x
dlopens loads there too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stagecraft.cabundle import find_ca_bundle
from stagecraft.expand import resolve
from tests.image.test_cuda import CUDA_LIBRARY
from tests.integration.harness import SPECS, run_cli

PADDLE3 = "3.2.0-gpu-cuda12.6-cudnn9.5"
OTHER = "torch-2.10.0-gpu-cuda12.8"
CA_IN_CONTAINER = "/run/stagecraft-test/ca.pem"


@pytest.fixture(scope="module")
def stage(client) -> str:
    """The accel stage of the Paddle 3.x CUDA 12.6 image (cuda and accel below it)."""
    proc = run_cli("--tag", PADDLE3, "--stage", "accel", "--json", timeout=3600)
    assert proc.returncode == 0, f"building the CUDA 12.6 stages failed:\n{proc.stderr[-3000:]}"
    stages = json.loads(proc.stdout)["stages"]
    assert [s["stage"] for s in stages] == ["base", "cuda", "accel"], stages
    return stages[-1]["image"]


def _pip_dry_run(client, image: str, pins: dict[str, str]) -> dict:
    """`pip install --dry-run --report -` in the stage's venv for ``pins``; the report."""
    bundle = find_ca_bundle(None, False)
    kw: dict = {}
    if bundle:  # behind a TLS-intercepting proxy pip needs the CA (it may ask the index)
        kw = {"volumes": {str(bundle.path): {"bind": CA_IN_CONTAINER, "mode": "ro"}},
              "environment": {"PIP_CERT": CA_IN_CONTAINER}}
    reqs = [f"{k}=={v}" for k, v in sorted(pins.items())]
    out = client.containers.run(image, ["/opt/venv/bin/pip", "install", "--dry-run", "--quiet",
                                        "--report", "-", *reqs], remove=True, **kw)
    return json.loads(out.decode())


def test_pip_would_install_nothing_for_paddle3_nvidia_requirements(client, stage):
    pins = resolve(SPECS, PADDLE3).framework["cuda_wheels"]
    assert len(pins) == 14, pins
    report = _pip_dry_run(client, stage, pins)
    install = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in report["install"]]
    assert install == [], f"{PADDLE3}: pip would install {install} for Paddle's own NVIDIA pins"


def test_the_check_fails_for_pins_the_stage_lacks(client, stage):
    """Two of torch 2.10's CUDA 12.8 pins (small wheels: pip downloads what it would
    install, even in a dry run): pip would install both beside the stage's 12.6 ones."""
    every = resolve(SPECS, OTHER).framework["cuda_wheels"]
    pins = {k: every[k] for k in ("nvidia-cuda-runtime-cu12", "nvidia-nvtx-cu12")}
    report = _pip_dry_run(client, stage, pins)
    install = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
    assert install == {k.lower(): v for k, v in pins.items()}, install


def test_every_library_paddle3_dlopens_loads(client, stage):
    names = resolve(SPECS, PADDLE3).framework["build"]["dlopen"]
    code = ("import ctypes, json\nbad = {}\n"
            f"for n in {names!r}:\n"
            "    try: ctypes.CDLL(n)\n"
            "    except OSError as e: bad[n] = str(e)\n"
            "print(json.dumps(bad))")
    out = client.containers.run(stage, ["/opt/venv/bin/python", "-c", code], remove=True)
    assert json.loads(out.decode()) == {}, out


def test_each_library_once_in_the_stage(client, stage):
    """No regular file of a library twice: /usr/local/cuda/lib64 holds links into the
    wheels' directories only."""
    sonames = Path(__file__).resolve().parents[2] / "probes" / "sonames.py"
    out = client.containers.run(stage, ["/opt/venv/bin/python", "-I", "/sonames.py", "list", "/"], remove=True,
                                volumes={str(sonames): {"bind": "/sonames.py", "mode": "ro"}})
    found = json.loads(out.decode())
    twice = {k: v for k, v in found.items() if CUDA_LIBRARY.match(k) and len(v) > 1}
    assert twice == {}, twice
    assert "libcudnn.so.9" in found and "libnccl.so.2" in found and "libcusparseLt.so.0" in found, sorted(found)
