"""The cuda stage's other sources (NVIDIA's apt repository, an NVIDIA image by digest)
render, validate and lint here; they build where those sources are reachable."""

from __future__ import annotations

import subprocess

import pytest

from stagecraft.bases import base_image
from stagecraft.errors import InputError
from stagecraft.expand import expand, resolve
from stagecraft.matrix import load_matrix
from stagecraft.plan import full_dockerfile
from tests.conftest import ROOT
from tests.unit.test_lint import HADOLINT

REAL = (ROOT / "matrix.yaml").read_text()
PYPI_BLOCK = REAL[REAL.index("      source: pypi\n      # The complete runtime set"):REAL.index("    cuda12.6-cudnn9.5:")]

APT = """      source: apt
      apt_repository: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
      apt_keyring:
        url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
        sha256: "%s"
      apt:
        cuda-cudart-11-8: "11.8.89-1"
        libcublas-11-8: "11.11.3.6-1"
        libcudnn8: "8.6.0.163-1+cuda11.8"
        cuda-nvrtc-11-8: "11.8.89-1"
""" % ("0" * 64)

IMAGE = """      source: image
      image: docker.io/nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04@sha256:%s
""" % ("1" * 64)


@pytest.mark.parametrize("block,needle", [(APT, "apt-get install"), (IMAGE, "COPY --from=docker.io/nvidia/cuda")],
                         ids=["apt", "image"])
def test_other_sources_render_and_lint(block, needle, project, tmp_path):
    path = project(REAL.replace(PYPI_BLOCK, block, 1))
    matrix = load_matrix(path)
    spec = resolve(expand(matrix), "2.6.0-gpu-cuda11.8")
    text = full_dockerfile(matrix, spec, base_image(spec.base, "pull"), "0" * 40, "1970-01-01T00:00:00Z")
    assert needle in text
    assert "ln -s /usr/local/cuda-11.8 /usr/local/cuda" in text or "/usr/local/cuda" in text
    f = tmp_path / "Dockerfile"
    f.write_text(text)
    assert HADOLINT, "hadolint not installed: run `make setup`"
    proc = subprocess.run([HADOLINT, "--no-color", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_apt_source_needs_its_repository(project):
    broken = APT.replace("      apt_repository: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/\n", "")
    with pytest.raises(InputError, match="'apt_repository' is a required property"):
        load_matrix(project(REAL.replace(PYPI_BLOCK, broken, 1)))
