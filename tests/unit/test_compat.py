"""Compatibility rules: a broken combination in matrix.yaml is refused at load time,
before any build, with the rule named. Mutations of the real matrix."""

from __future__ import annotations

import re

import pytest

from stagecraft import compat
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from tests.conftest import ROOT

REAL = (ROOT / "matrix.yaml").read_text()

CASES = [
    ("cudnn9-under-cudnn8.6-build", 'cudnn: "8.6.0"\n      prefix: /usr/local/cuda-11.8',
     'cudnn: "9.1.0"\n      prefix: /usr/local/cuda-11.8', "framework-cudnn: paddle-2.6.0-gpu is built for cuDNN 8.6"),
    ("cuda12-libs-under-cuda11.8-build", "cuda: [cuda11.8-cudnn8.6]", "cuda: [cuda12.6-cudnn9.5]",
     "framework-cuda: paddle-2.6.0-gpu is built for CUDA 11.8; component cuda12.6-cudnn9.5 provides CUDA 12.6"),
    ("cu12-wheel-in-cuda11-set", 'nvidia-cufft-cu11: "10.9.0.58"', 'nvidia-cufft-cu12: "11.3.0.4"',
     "wheel-cuda-major: cuda11.8-cudnn8.6 installs nvidia-cufft-cu12, a CUDA 12 wheel, under CUDA 11.8"),
    ("nccl-for-wrong-cuda", "accel: [nccl2.15-cu11]", "accel: [nccl2.25-cu12]",
     "wheel-cuda-major: nccl2.25-cu12 installs nvidia-nccl-cu12"),
    # A framework whose own NVIDIA pins differ from its stages': pip would install a
    # second NCCL beside the stage's. Both versions named.
    ("framework-pins-other-nccl", "accel: [nccl2.27-cu12]", "accel: [nccl2.25-cu12]",
     "framework-wheels: torch-2.10.0-cu128 pins nvidia-nccl-cu12==2.27.5; nccl2.25-cu12 installs "
     "nvidia-nccl-cu12==2.25.1"),
    ("framework-needs-a-wheel-no-stage-has", "accel: [nccl2.27-cu12]", "accel: [nccl2.25-cu12]",
     "framework-wheels: torch-2.10.0-cu128 requires nvidia-nvshmem-cu12==3.4.5, which neither"),
    ("framework-pins-other-cudnn", 'nvidia-cudnn-cu12: "9.5.1.17"\n        nvidia-cuda-nvrtc-cu12',
     'nvidia-cudnn-cu12: "9.5.0.50"\n        nvidia-cuda-nvrtc-cu12',
     "framework-wheels: paddle-3.2.0-gpu-cu126 pins nvidia-cudnn-cu12==9.5.1.17; cuda12.6-cudnn9.5 "
     "installs nvidia-cudnn-cu12==9.5.0.50"),
    ("unknown-cuda", 'cuda: "11.8"\n      cudnn', 'cuda: "11.3"\n      cudnn',
     "cuda-known: CUDA 11.3 is not in the compatibility table"),
    ("gpu-build-without-cuda", "framework: [paddle-2.6.2-cpu]", "framework: [paddle-2.6.2-cpu, paddle-2.6.0-gpu]",
     "device-needs-cuda: paddle-2.6.0-gpu is an NVIDIA build"),
    ("python-without-wheel", "      base: [debian12]\n      framework: [paddle-2.6.2-cpu]",
     "      base: [debian13]\n      framework: [paddle-2.6.2-cpu]", "framework-python: paddle-2.6.2-cpu has builds for Python"),
    # PyPI has no aarch64 wheel of 3.3.1: asking for one is refused at load time.
    ("3.3.1-on-arm64", "  - name: paddle-3-cpu\n    chain: [base, runtime, toolkit]\n",
     "  - name: paddle-3-cpu\n    chain: [base, runtime, toolkit]\n    platforms: [linux/amd64, linux/arm64]\n",
     "framework-platform: paddle-3.3.1-cpu has builds for linux/amd64, not linux/arm64"),
    ("gpu-wheel-on-arm64", "framework: [paddle-3.2.0-gpu-cu126]\n",
     "framework: [paddle-3.2.0-gpu-cu126]\n    platforms: [linux/arm64]\n",
     "framework-platform: paddle-3.2.0-gpu-cu126 has builds for linux/amd64, not linux/arm64"),
    # A toolkit over a framework version it does not work with, or another framework.
    ("toolkit-needs-newer-framework", 'frameworks: {paddle: ">=3.0,<4"}', 'frameworks: {paddle: ">=3.4"}',
     "image '3.3.1-cpu-debian12-paddleocr': toolkit-framework: paddleocr-3.7 (paddleocr 3.7.0) "
     "works with paddle >=3.4; framework paddle-3.3.1-cpu is paddle 3.3.1"),
    ("toolkit-over-2.6", "      framework: [paddle-2.6.2-cpu]\n      jupyter: [null]\n",
     "      framework: [paddle-2.6.2-cpu]\n      jupyter: [null]\n      toolkit: [null, paddleocr-3.7]\n",
     "toolkit-framework: paddleocr-3.7 (paddleocr 3.7.0) works with paddle >=3.0,<4; framework "
     "paddle-2.6.2-cpu is paddle 2.6.2"),
    ("toolkit-for-another-framework", 'frameworks: {paddle: ">=3.0,<4"}', 'frameworks: {torch: ">=2.4"}',
     "toolkit-framework: paddleocr-3.7 (paddleocr 3.7.0) lists no versions of paddle (framework "
     "paddle-3.3.1-cpu); it works with: torch"),
    ("toolkit-specifier-not-pep440", 'frameworks: {paddle: ">=3.0,<4"}', 'frameworks: {paddle: "3.0"}',
     "frameworks.paddle: '3.0' is not of the expected form"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_broken_combination_is_refused(case, project):
    name, old, new, fragment = case
    assert old in REAL, f"{name}: no longer applies to matrix.yaml"
    path = project(REAL.replace(old, new, 1))
    with pytest.raises(InputError) as err:
        expand(load_matrix(path))
    lines = str(err.value).splitlines()
    assert any(fragment in ln for ln in lines), f"{name}: {lines}"
    assert all(re.match(r"\S*matrix\.yaml:\d+: ", ln) for ln in lines), lines


def test_the_real_matrix_is_consistent():
    assert len(expand(load_matrix(ROOT / "matrix.yaml"))) >= 6


@pytest.mark.parametrize("cuda,full,compat_floor", [("11.8", "520.61.05", "450.80.02"),
                                                    ("12.0", "525.60.13", "525.60.13"),
                                                    ("12.4", "550.54.14", "525.60.13"),
                                                    ("12.6", "560.28.03", "525.60.13"),
                                                    ("12.8", "570.26", "525.60.13"),
                                                    ("13.0", "580.65.06", "580")])
def test_driver_facts(cuda, full, compat_floor):
    facts = compat.cuda_facts(cuda)
    assert facts == {"min_driver": full, "min_driver_compat": compat_floor}
