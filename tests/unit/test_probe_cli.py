"""`python build.py probe`: the host report and the best tag of the matrix, without Docker.

Each case runs the CLI in a subprocess against a fixture machine: STAGECRAFT_PROBE_ROOT
(test/debug only) points the probes at a composed root (real /proc/cpuinfo, /dev and /sys
pieces), and the stand-in NVML is found through LD_LIBRARY_PATH, as on a real host.
DOCKER_HOST points nowhere, so a Docker call would fail the command.
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

from tests.fixtures.compose import NVML, compose
from tests.nvml_standin import standin

CPU_TAG = "2.6.2-cpu"
CU118_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"
CU126_TAG = "3.2.0-gpu-cuda12.6-cudnn9.5"
CU128_TAG = "torch-2.10.0-gpu-cuda12.8"


def probe(tmp_path: Path, *args: str, cpuinfo: str = "linux-rhel7-haswell",
          pieces: tuple[str, ...] = ("host-16cpu",), nvml: str | None = None,
          lib: Path | None = None) -> subprocess.CompletedProcess[str]:
    root = compose(tmp_path / "root", cpuinfo, pieces)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_", "LD_LIBRARY_PATH"))}
    env.update({"STAGECRAFT_PROBE_ROOT": str(root), "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    if nvml and lib:
        env.update({"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / nvml)})
    return subprocess.run([sys.executable, str(REPO / "build.py"), "probe", *args], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def as_json(cp: subprocess.CompletedProcess[str]) -> dict:
    try:
        return json.loads(cp.stdout)
    except ValueError:
        pytest.fail(f"exit {cp.returncode}, not JSON:\n{cp.stdout}\n{cp.stderr}")


def row(data: dict, tag: str) -> dict:
    return next(r for r in data["images"] if r["tag"] == tag)


def test_cpu_host_best_tag_is_a_cpu_image(tmp_path: Path) -> None:
    cp = probe(tmp_path, "--json")
    data = as_json(cp)
    assert cp.returncode == 0, cp.stderr
    assert data["best"]["tag"] == CPU_TAG and data["best"]["ref"].endswith(f":{CPU_TAG}"), data["best"]
    assert "cpu-avx2" in data["best"]["why"], data["best"]
    assert set(data["host"]["probes"]) == {"nvidia", "xpu", "npu", "amd", "mlu", "cpu"}
    assert data["host"]["probes"]["cpu"]["isa_level"] == 3
    assert data["host"]["probes"]["nvidia"]["state"] == "absent"
    gpu = row(data, CU118_TAG)
    assert gpu["kernel_set"] == "cpu-avx2" and gpu["fallback"] is True, gpu
    assert "no NVIDIA GPU visible" in gpu["message"], gpu


def test_human_output_names_the_best_tag(tmp_path: Path) -> None:
    cp = probe(tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith("nvidia  absent"), cp.stdout
    assert "cpu     usable" in cp.stdout and "x86-64-v3" in cp.stdout, cp.stdout
    assert f"best tag: stagecraft/paddle:{CPU_TAG} (kernel set cpu-avx2 (cpu); tie with {CPU_TAG}-jupyter " \
        f"(same kernel set quality, specificity and build state): {CPU_TAG} comes first in matrix.yaml)" \
        in cp.stdout, cp.stdout
    assert "(no Docker engine answered: which images are built is unknown)" in cp.stdout, cp.stdout


def test_a100_host_best_tag_is_the_first_gpu_image(tmp_path: Path, lib: Path) -> None:
    cp = probe(tmp_path, "--json", pieces=("host-16cpu", "nvidia-nodes"), nvml="a100.conf", lib=lib)
    data = as_json(cp)
    assert data["host"]["probes"]["nvidia"]["state"] == "usable", data["host"]["probes"]["nvidia"]
    assert data["best"]["tag"] == CU118_TAG, data["best"]
    assert row(data, CU118_TAG)["kernel_set"] == "cuda"
    assert row(data, CPU_TAG)["kernel_set"] == "cpu-avx2"


def test_h200_host_skips_images_without_cc90_kernels(tmp_path: Path, lib: Path) -> None:
    """Paddle 2.6.0's cu118 wheel ships SASS up to 8.6 and no PTX: it falls back. The CUDA
    12 images choose their GPU set; the torch CUDA 12.8 image, whose SASS for 9.0 is known
    (measured at build time), wins over Paddle 3.2's, whose kernels are only said to run
    on 9.0."""
    cp = probe(tmp_path, "--json", pieces=("host-16cpu", "nvidia-nodes"), nvml="h200x8.conf", lib=lib)
    data = as_json(cp)
    assert data["best"]["tag"] == CU128_TAG, data["best"]
    assert row(data, CU128_TAG)["kernel_set"] == "cuda"
    old = row(data, CU118_TAG)
    assert old["fallback"] and "no kernels for cc 9.0 (GPU 0-7: 8x NVIDIA H200)" in old["message"], old
    assert row(data, CU126_TAG)["kernel_set"] == "cuda"


def test_old_driver_host_falls_back_and_names_the_driver(tmp_path: Path, lib: Path) -> None:
    cp = probe(tmp_path, "--json", "--tag", CU118_TAG, pieces=("host-16cpu", "nvidia-nodes"),
               nvml="old-driver-440.conf", lib=lib)
    data = as_json(cp)
    assert [r["tag"] for r in data["images"]] == [CU118_TAG]
    assert "driver 440.33.01 < 520.61.05 needed by CUDA 11.8" in row(data, CU118_TAG)["message"]


def test_cpu_without_avx_fits_no_tag(tmp_path: Path) -> None:
    cp = probe(tmp_path, cpuinfo="linux-scientific7-k10")
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "no tag fits: no image in the matrix can run on this host" in cp.stdout, cp.stdout
    assert "lacks avx" in cp.stdout, cp.stdout


def test_unknown_tag_is_bad_input(tmp_path: Path) -> None:
    cp = probe(tmp_path, "--tag", "no-such-tag")
    assert cp.returncode == 2 and "no-such-tag" in cp.stderr, cp.stderr


def test_m40_unknown_kernels_are_said_and_not_recommended(tmp_path: Path, lib: Path) -> None:
    """Issue 14: with a Tesla M40 (cc 5.2) the 3.2.0 entry used to accept the GPU silently
    and be named best. Its SASS/PTX are unknown: it still picks the GPU, says so, and the
    best tag is one whose fit is known."""
    conf = tmp_path / "m40.conf"
    standin.write_config(conf, gpus=[standin.gpu("Tesla M40", "GPU-40404040-0000-4000-8000-000000000000",
                                                 "5.2", 12884901888)])
    root = tmp_path / "r"
    cp = probe(root, "--json", pieces=("host-16cpu", "nvidia-nodes"), nvml=str(conf), lib=lib)
    data = as_json(cp)
    new = row(data, CU126_TAG)
    assert new["kernel_set"] == "cuda" and new["warnings"][0].startswith(
        "unknown whether this build has kernels for cc 5.2 (GPU 0: Tesla M40)"), new
    assert data["best"]["tag"] != CU126_TAG and row(data, CU118_TAG)["fallback"], data["best"]
    assert row(data, data["best"]["tag"])["rank"] == 1 and new["rank"] > 1, data["images"]
