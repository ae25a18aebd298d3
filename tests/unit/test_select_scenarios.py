"""The scenario table: a fixture machine (real cpuinfo, cgroup files, /dev and /sys trees,
stand-in vendor tools, the stand-in NVML loaded by the real pynvml) -> expected kernel set
and reason. Each row runs every probe the image needs, then the pure chooser."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes import (
    fsread,
    probe_all,
)
from probes.select import EXIT_REFUSED, EXIT_USAGE, Overrides, choose
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.render import image_manifest
from tests.fixtures.compose import IMAGES, compose
from tests.nvml_standin import cdi, standin
from tests.nvml_standin.standin import gpu

GPU_SETS = json.loads((IMAGES / "gpu-cuda11.8.json").read_text())["kernel_sets"]
AVX_ONLY = json.loads((IMAGES / "cpu-avx-only.json").read_text())["kernel_sets"]
ARM_SETS = [{"name": "cpu-aarch64-sve", "device": "cpu", "requires": {"arch": "aarch64", "cpu_flags": ["sve"]}},
            {"name": "cpu-aarch64", "device": "cpu", "requires": {"arch": "aarch64"}}]
BASE = [{"name": "cpu-baseline", "device": "cpu", "requires": {}}]
XPU_SETS = [{"name": "xpu-r200", "device": "xpu", "requires": {"arch": ["R200", "R300"]}}, *BASE]
NPU_SETS = [{"name": "npu-910b", "device": "npu", "requires": {"arch": ["910B*"], "min_driver": "23.0"}}, *BASE]
AMD_SETS = [{"name": "rocm-gfx90a", "device": "amd", "requires": {"arch": ["gfx90a", "gfx942"]}}, *BASE]
MLU_SETS = [{"name": "mlu370", "device": "mlu", "requires": {"arch": ["MLU370*"]}}, *BASE]

# The kernel sets of real images of matrix.yaml, as their image.json carries them (the
# SASS/PTX lists there are the ones the image suites check against the measurement).
_MATRIX = load_matrix(REPO / "matrix.yaml")
_SPECS = {s.tag: s for s in expand(_MATRIX)}


def _image_sets(tag: str) -> list[dict[str, Any]]:
    return image_manifest(_MATRIX, _SPECS[tag])["kernel_sets"]


CU118 = _image_sets("2.6.0-gpu-cuda11.8-cudnn8.6")      # Paddle 2.6: SASS 6.1-8.6, no PTX
CU126 = _image_sets("3.2.0-gpu-cuda12.6-cudnn9.5")      # Paddle 3.2 cu126: SASS/PTX unknown, 9.0 supported
CU128 = _image_sets("torch-2.10.0-gpu-cuda12.8")        # torch 2.10: SASS 7.0-9.0, 10.0, 12.0

U_H200 = "GPU-1c2d3e4f-5a6b-7c8d-9e0f-1a2b3c4d5e6f"
U_A100 = "GPU-6b7c1a2e-3f4d-5e6f-7a8b-9c0d1e2f3a4b"
U_K40 = "GPU-9f8e7d6c-5b4a-3928-1716-05f4e3d2c1b0"
MIG_A100 = "MIG-2f4e6d8c-0a1b-5c3d-9e7f-1234567890ab"
H200 = gpu("NVIDIA H200", U_H200, "9.0", 150754820096, 0)
H200_2 = gpu("NVIDIA H200", "GPU-1c2d3e4f-5a6b-7c8d-9e0f-000000000002", "9.0", 150754820096, 0)
A100 = gpu("NVIDIA A100-SXM4-80GB", U_A100, "8.0", 85899345920, 0)
A100_MIG = gpu("NVIDIA A100-SXM4-80GB", U_A100, "8.0", 85899345920, 1)
B200 = gpu("NVIDIA B200", "GPU-b2000000-1111-2222-3333-444455556666", "10.0", 191514247168, 0)
K40 = gpu("Tesla K40m", U_K40, "3.5", 11996954624, -1)
T4 = gpu("Tesla T4", "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d", "7.5", 16106127360, -1)
RTX4090 = gpu("NVIDIA GeForce RTX 4090", "GPU-40900000-aaaa-bbbb-cccc-ddddeeeeffff", "8.9", 25757220864, -1)
RTX5090 = gpu("NVIDIA GeForce RTX 5090", "GPU-50900000-aaaa-bbbb-cccc-ddddeeeeffff", "12.0", 34190917632, -1)
# Blackwell needs the R570 driver branch or newer; 575.57.08 reports CUDA 12.9.
R575 = {"driver": "575.57.08", "cuda": 12090}


@dataclass
class Sc:
    id: str
    cpuinfo: str
    pieces: list[str]
    sets: list[dict[str, Any]]
    expect: str | int            # kernel set name, or an exit code for a refusal
    reason: str = ""             # substring of the fallback message / first passed-over reason / refusal
    nvml: dict[str, Any] | None = None   # stand-in config (standin.config_text kwargs); None: no library
    env: dict[str, str] = field(default_factory=dict)
    ov: Overrides = field(default_factory=Overrides)
    deny: list[str] = field(default_factory=list)
    warn: str = ""               # substring of a warning
    cpus: int | None = None      # expected effective CPUs
    count: int | None = None     # devices of the chosen family counted (visible ones only)
    subprocess: bool = False     # run in a fresh interpreter (NVML hang)


NODES = ["host-16cpu", "nvidia-nodes"]
SCENARIOS = [
    Sc("no-gpu-avx512-host", "linux-rhel7-skylake_avx512", ["host-16cpu"], GPU_SETS, "cpu-avx512",
       "no NVIDIA GPU visible (no /dev/nvidia*, NVML library not found)"),
    Sc("h200-native", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm", nvml={"gpus": [H200, H200_2]}),
    Sc("rtx4090-native-sm89", "linux-ubuntu20.04-zen3", NODES, GPU_SETS, "cuda11.8-sm", nvml={"gpus": [RTX4090]}),
    Sc("b200-newer-than-sass-ptx-warns", "linux-unknown-sapphirerapids", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [B200], "driver": "570.86.15", "cuda": 12080}, warn="JIT-compiled"),
    Sc("k40-cc3.5-too-old", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "no kernels for cc 3.5 (GPU 0: Tesla K40m)", nvml={"gpus": [K40], "driver": "470.82.01", "cuda": 11040}),
    Sc("driver-440-below-compat-floor", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "driver 440.33.01 < 520.61.05 needed by CUDA 11.8 (minor-version compatibility needs >= 450.80.02",
       nvml={"gpus": [T4], "driver": "440.33.01", "cuda": 10020}),
    Sc("driver-470-minor-version-compat", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [A100], "driver": "470.82.01", "cuda": 11040}, warn="minor-version compatibility"),
    Sc("driver-470-ptx-needs-new-driver", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "does not cover PTX JIT", nvml={"gpus": [B200], "driver": "470.82.01", "cuda": 11040}),
    Sc("nvml-no-permission-nodes-present", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "no permission", nvml={"init_error": 4}),
    Sc("nvml-driver-not-loaded-nodes-present", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "driver not loaded", nvml={"init_error": 9}),
    Sc("nvml-rm-mismatch", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "version mismatch", nvml={"init_error": 18}),
    Sc("nvml-hang-timeout", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2", "timeout",
       nvml={"gpus": [H200], "hangs": ["nvmlDeviceGetCount_v2|20"]}, subprocess=True),
    Sc("nodes-but-no-nvml-library", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "NVML library libnvidia-ml.so.1 not found"),
    Sc("gpu-lost-on-every-gpu", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2", "GPU is lost",
       nvml={"gpus": [H200], "errors": ["nvmlDeviceGetName|15"]}),
    Sc("cvd-gpu-uuid-hides-k40", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [K40, A100]}, env={"CUDA_VISIBLE_DEVICES": U_A100}),
    Sc("cvd-uuid-prefix", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [K40, A100]}, env={"CUDA_VISIBLE_DEVICES": "GPU-6b7c1a2e"}),
    Sc("cvd-mig-uuid", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [K40, A100_MIG], "migs": [f"1|{MIG_A100}"]}, env={"CUDA_VISIBLE_DEVICES": MIG_A100}),
    Sc("cvd-index", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [K40, A100]}, env={"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
    Sc("cvd-empty-hides-all", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "CUDA_VISIBLE_DEVICES='' hides every GPU", nvml={"gpus": [H200]}, env={"CUDA_VISIBLE_DEVICES": ""}),
    Sc("cvd-minus-one", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2", "hides every GPU",
       nvml={"gpus": [H200]}, env={"CUDA_VISIBLE_DEVICES": "-1"}),
    Sc("cvd-unknown-uuid", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2", "selects no GPU",
       nvml={"gpus": [H200]}, env={"CUDA_VISIBLE_DEVICES": "GPU-deadbeef"}),
    Sc("mixed-a100-k40-unfiltered", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "to use the others, set CUDA_VISIBLE_DEVICES=" + U_A100, nvml={"gpus": [A100, K40]}),
    # void: what a CDI spec sets (probes/nvidia_visible.py); the nodes and NVML are there.
    Sc("nvidia-visible-devices-void", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [H200]}, env={"NVIDIA_VISIBLE_DEVICES": "void"}),
    Sc("nvidia-visible-devices-none", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       "NVIDIA_VISIBLE_DEVICES='none'", nvml={"gpus": [H200]}, env={"NVIDIA_VISIBLE_DEVICES": "none"}),
    Sc("nvidia-visible-devices-uuid", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [K40, A100]}, env={"NVIDIA_VISIBLE_DEVICES": U_A100}),
    Sc("stand-in-without-nodes", "linux-rhel7-haswell", ["host-16cpu"], GPU_SETS, "cuda11.8-sm",
       nvml={"gpus": [A100]}),
    Sc("no-avx-cpu-avx-only-image-refuses", "linux-scientific7-k10", ["host-16cpu"], AVX_ONLY, EXIT_REFUSED,
       "lacks avx"),
    Sc("ivybridge-avx-no-avx2", "linux-rhel7-ivybridge", ["host-16cpu"], AVX_ONLY, "cpu-avx", "lacks avx2, fma"),
    Sc("piledriver-avx-fma-no-avx2", "linux-rhel6-piledriver", ["host-16cpu"], AVX_ONLY, "cpu-avx", "lacks avx2"),
    Sc("sapphirerapids-avx512", "linux-unknown-sapphirerapids", ["host-16cpu"], GPU_SETS, "cpu-avx512"),
    Sc("cascadelake-avx512", "linux-centos7-cascadelake", ["host-16cpu"], GPU_SETS, "cpu-avx512"),
    Sc("zen4-avx512-on-amd", "linux-rocky8.5-zen4", ["host-16cpu"], GPU_SETS, "cpu-avx512"),
    Sc("zen3-avx2", "linux-ubuntu20.04-zen3", ["host-16cpu"], GPU_SETS, "cpu-avx2"),
    Sc("k10-gpu-image-baseline", "linux-scientific7-k10", ["host-16cpu"], GPU_SETS, "cpu-baseline"),
    Sc("aarch64-sve", "linux-amazon-neoverse_v1", ["host-16cpu"], ARM_SETS, "cpu-aarch64-sve"),
    Sc("aarch64-grace-sve2", "linux-rhel9-neoverse_v2", ["host-16cpu"], ARM_SETS, "cpu-aarch64-sve"),
    Sc("aarch64-on-x86-image-refuses", "linux-rhel9-neoverse_v2", ["host-16cpu"], GPU_SETS, EXIT_REFUSED,
       "this set needs x86_64"),
    Sc("cgroup-v2-quota-1.5-two-threads", "linux-rhel7-haswell", ["cgroup-v2-quota-1.5"], GPU_SETS,
       "cpu-avx2", cpus=2),
    Sc("cgroup-v2-cpuset-0-3", "linux-rhel7-haswell", ["cgroup-v2-cpuset-0-3"], GPU_SETS, "cpu-avx2", cpus=4),
    Sc("cgroup-v1-quota-1.5", "linux-rhel7-haswell", ["cgroup-v1-quota-1.5"], GPU_SETS, "cpu-avx2", cpus=2),
    Sc("cgroup-v1-cpus-1", "linux-rhel7-haswell", ["cgroup-v1-cpus-1"], GPU_SETS, "cpu-avx2", cpus=1),
    Sc("cgroup-v1-unlimited", "linux-rhel7-haswell", ["cgroup-v1-unlimited"], GPU_SETS, "cpu-avx2", cpus=8),
    Sc("cgroup-v2-parent-slice-quota", "linux-rhel7-haswell", ["cgroup-v2-host-slice"], GPU_SETS, "cpu-avx2",
       cpus=3),
    Sc("kunlun-r200", "linux-rhel7-haswell", ["host-16cpu", "kunlun-r200"], XPU_SETS, "xpu-r200"),
    Sc("kunlun-nodes-no-permission", "linux-rhel7-haswell", ["host-16cpu", "kunlun-nodes"], XPU_SETS,
       "cpu-baseline", "no permission on /dev/xpu0", deny=["/dev/xpu0"]),
    Sc("kunlun-absent", "linux-rhel7-haswell", ["host-16cpu"], XPU_SETS, "cpu-baseline", "no /dev/xpu<N>"),
    Sc("ascend-910b", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-910b"], NPU_SETS, "npu-910b"),
    Sc("ascend-busy", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-busy"], NPU_SETS, "cpu-baseline",
       "busy: the NPUs are held by another container"),
    Sc("ascend-control-nodes-missing", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-no-manager"],
       NPU_SETS, "cpu-baseline", "/dev/davinci_manager"),
    Sc("amd-mi210-gfx90a", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "rocm-gfx90a"),
    Sc("amd-driver-but-no-kfd", "linux-rocky8.5-zen4", ["host-16cpu", "amd-no-kfd"], AMD_SETS, "cpu-baseline",
       "/dev/kfd is missing"),
    Sc("amd-kfd-no-permission", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "cpu-baseline",
       "no permission on /dev/kfd", deny=["/dev/kfd"]),
    Sc("cambricon-mlu370", "linux-rhel7-haswell", ["host-16cpu", "cambricon-mlu370"], MLU_SETS, "mlu370"),
    Sc("forced-device-cpu-with-gpu", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-avx2",
       nvml={"gpus": [H200]}, ov=Overrides(device="cpu")),
    Sc("forced-kernel-set", "linux-rhel7-haswell", NODES, GPU_SETS, "cpu-baseline",
       nvml={"gpus": [H200]}, ov=Overrides(kernel_set="cpu-baseline")),
    Sc("forced-kernel-set-that-cannot-run", "linux-rhel7-haswell", ["host-16cpu"], GPU_SETS, "cpu-avx2",
       ov=Overrides(kernel_set="cpu-avx512"), warn="forced kernel set cpu-avx512 cannot run here"),
    Sc("forced-unknown-kernel-set", "linux-rhel7-haswell", ["host-16cpu"], GPU_SETS, EXIT_USAGE,
       "no such kernel set", ov=Overrides(kernel_set="cuda12-sm")),
    Sc("strict-no-gpu-refuses", "linux-rhel7-haswell", ["host-16cpu"], GPU_SETS, EXIT_REFUSED,
       "strict: wanted device nvidia is not usable: no NVIDIA GPU visible", ov=Overrides(strict=True)),
    Sc("strict-old-driver-refuses", "linux-rhel7-haswell", NODES, GPU_SETS, EXIT_REFUSED,
       "440.33.01 < 520.61.05", nvml={"gpus": [T4], "driver": "440.33.01", "cuda": 10020},
       ov=Overrides(strict=True)),
    Sc("strict-gpu-ok", "linux-rhel7-haswell", NODES, GPU_SETS, "cuda11.8-sm", nvml={"gpus": [H200]},
       ov=Overrides(strict=True)),
    # New GPUs on both CUDA generations: Hopper H200 (9.0), Blackwell B200 (10.0) and
    # RTX 5090 (12.0). The CUDA 12.8 build has SASS for all three; Paddle 2.6's CUDA 11.8
    # build stops at 8.6, with no PTX to JIT.
    Sc("h200-cuda12.8-image", "linux-unknown-sapphirerapids", NODES, CU128, "cuda",
       nvml={"gpus": [H200, H200_2], **R575}),
    Sc("b200-cuda12.8-image", "linux-unknown-sapphirerapids", NODES, CU128, "cuda", nvml={"gpus": [B200], **R575}),
    Sc("rtx5090-cuda12.8-image", "linux-rocky8.5-zen4", NODES, CU128, "cuda", nvml={"gpus": [RTX5090], **R575}),
    Sc("h200-cuda11.8-image", "linux-unknown-sapphirerapids", NODES, CU118, "cpu-avx512",
       "no kernels for cc 9.0 (GPU 0-1: 2x NVIDIA H200) in this set (SASS 6.1, 7.0, 7.5, 8.0, 8.6; PTX none)",
       nvml={"gpus": [H200, H200_2], **R575}),
    Sc("b200-cuda11.8-image", "linux-unknown-sapphirerapids", NODES, CU118, "cpu-avx512",
       "no kernels for cc 10.0 (GPU 0: NVIDIA B200) in this set (SASS 6.1, 7.0, 7.5, 8.0, 8.6; PTX none)",
       nvml={"gpus": [B200], **R575}),
    Sc("rtx5090-cuda11.8-image", "linux-rocky8.5-zen4", NODES, CU118, "cpu-avx512",
       "no kernels for cc 12.0 (GPU 0: NVIDIA GeForce RTX 5090)", nvml={"gpus": [RTX5090], **R575}),
    Sc("h200-cuda12.6-image", "linux-unknown-sapphirerapids", NODES, CU126, "cuda", nvml={"gpus": [H200], **R575}),
    # Paddle 3.2 cu126's SASS/PTX are not known here (matrix.yaml: unknown; Paddle says
    # 9.0 runs on its CUDA 12 packages): the GPU set is chosen with a warning naming it.
    Sc("b200-cuda12.6-image", "linux-unknown-sapphirerapids", NODES, CU126, "cuda",
       nvml={"gpus": [B200], **R575}, warn="unknown whether this build has kernels for cc 10.0 (GPU 0: NVIDIA B200)"),
    Sc("rtx5090-cuda12.6-image", "linux-rocky8.5-zen4", NODES, CU126, "cuda",
       nvml={"gpus": [RTX5090], **R575}, warn="unknown whether this build has kernels for cc 12.0"),
    # CUDA 12.8's driver floors (NVIDIA's table: 570.26 for the toolkit, 525.60.13 for
    # minor-version compatibility, which covers a build without PTX).
    Sc("cuda12.8-driver-560-minor-version-compat", "linux-unknown-sapphirerapids", NODES, CU128, "cuda",
       nvml={"gpus": [H200], "driver": "560.35.03", "cuda": 12060},
       warn="driver 560.35.03 < 570.26: CUDA 12.8 runs under minor-version compatibility"),
    Sc("cuda12.8-driver-520-below-floor", "linux-unknown-sapphirerapids", NODES, CU128, "cpu",
       "driver 520.61.05 < 570.26 needed by CUDA 12.8 (minor-version compatibility needs >= 525.60.13",
       nvml={"gpus": [H200], "driver": "520.61.05", "cuda": 11080}),
    Sc("strict-forced-xpu-absent", "linux-rhel7-haswell", ["host-16cpu"], XPU_SETS, EXIT_REFUSED,
       "strict: wanted device xpu", ov=Overrides(device="xpu", strict=True)),
    # Every vendor's visibility variable, read as its runtime reads it (probes/visible.py).
    Sc("xpu-visible-one", "linux-rhel7-haswell", ["host-16cpu", "kunlun-r200"], XPU_SETS, "xpu-r200",
       env={"XPU_VISIBLE_DEVICES": "1"}, count=1),
    Sc("xpu-visible-empty-hides", "linux-rhel7-haswell", ["host-16cpu", "kunlun-r200"], XPU_SETS,
       "cpu-baseline", "XPU_VISIBLE_DEVICES='' hides every Kunlun XPU", env={"XPU_VISIBLE_DEVICES": ""}),
    Sc("xpu-visible-unparsable-falls-back", "linux-rhel7-haswell", ["host-16cpu", "kunlun-r200"], XPU_SETS,
       "cpu-baseline", "XPU_VISIBLE_DEVICES='gpu0' selects no Kunlun XPU", env={"XPU_VISIBLE_DEVICES": "gpu0"}),
    Sc("xpu-visible-out-of-range", "linux-rhel7-haswell", ["host-16cpu", "kunlun-r200"], XPU_SETS,
       "cpu-baseline", "entry '7' matches no Kunlun XPU", env={"XPU_VISIBLE_DEVICES": "7"}),
    Sc("ascend-visible-one", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-910b"], NPU_SETS, "npu-910b",
       env={"ASCEND_RT_VISIBLE_DEVICES": "1"}, count=1),
    Sc("ascend-visible-space-stops-the-list", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-910b"], NPU_SETS,
       "npu-910b", env={"ASCEND_RT_VISIBLE_DEVICES": "0, 1"}, count=1),
    Sc("ascend-visible-empty-hides", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-910b"], NPU_SETS,
       "cpu-baseline", "ASCEND_RT_VISIBLE_DEVICES='' hides every Ascend NPU", env={"ASCEND_RT_VISIBLE_DEVICES": ""}),
    Sc("ascend-visible-descending", "linux-rhel9-neoverse_v2", ["host-16cpu", "ascend-910b"], NPU_SETS,
       "npu-910b", env={"ASCEND_RT_VISIBLE_DEVICES": "1,0"}, count=1),
    Sc("amd-rocr-uuid", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "rocm-gfx90a",
       env={"ROCR_VISIBLE_DEVICES": "GPU-b3b9c0795b6488de"}, count=1),
    Sc("amd-rocr-empty-hides", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "cpu-baseline",
       "ROCR_VISIBLE_DEVICES='' hides every AMD GPU", env={"ROCR_VISIBLE_DEVICES": ""}),
    Sc("amd-hip-index-beyond-rocr", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "cpu-baseline",
       "HIP_VISIBLE_DEVICES='1' selects no AMD GPU", env={"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"}),
    Sc("amd-unknown-uuid", "linux-rocky8.5-zen4", ["host-16cpu", "amd-mi210"], AMD_SETS, "cpu-baseline",
       "selects no AMD GPU", env={"ROCR_VISIBLE_DEVICES": "GPU-0000000000000000"}),
    Sc("mlu-visible-one", "linux-rhel7-haswell", ["host-16cpu", "cambricon-mlu370"], MLU_SETS, "mlu370",
       env={"MLU_VISIBLE_DEVICES": "1"}, count=1),
    Sc("mlu-repeated-ordinal-empties", "linux-rhel7-haswell", ["host-16cpu", "cambricon-mlu370"], MLU_SETS,
       "cpu-baseline", "names Cambricon MLU 0 twice", env={"MLU_VISIBLE_DEVICES": "0,1,0"}),
    Sc("mlu-cn-visible-wins", "linux-rhel7-haswell", ["host-16cpu", "cambricon-mlu370"], MLU_SETS,
       "cpu-baseline", "CN_VISIBLE_DEVICES='' hides", env={"MLU_VISIBLE_DEVICES": "0", "CN_VISIBLE_DEVICES": ""}),
]


@pytest.fixture(scope="session")
def standin_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        path = standin.build(tmp_path_factory.mktemp("nvml"))
    except RuntimeError as exc:
        pytest.skip(str(exc))
    standin.preload(path)
    return path


_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from probes import probe_all
from probes.select import choose, Overrides
args = json.loads(sys.argv[2])
p = probe_all(args["root"], 1.0, sorted({s["device"] for s in args["sets"]}), args["env"])
c = choose(p, args["sets"], Overrides(**args["ov"]))
print(json.dumps({"name": c.name, "exit": c.exit_code, "message": c.message, "warnings": list(c.warnings),
                  "passed": [x.reason for x in c.passed_over], "cpus": p["cpu"].effective_cpus}))
"""


def _give_by_cdi(sc: Sc, root: Path, lib: Path, cfg: Path, spec_env: str) -> dict[str, str]:
    """The GPUs of ``sc`` given as CDI gives them (tests/nvml_standin/cdi.py: the spec's
    nodes and library mount applied to ``root``), in place of --device's node fixture.
    A config whose NVML fails at init lists no GPU: the spec was written earlier, for the
    GPUs the --device root has. Returns the spec's env, or {} for ``spec_env="unset"``
    (a spec without env, as hand-written ones are)."""
    text = cfg.read_text()
    gpus = cdi.gpus_from_config(text) or [cdi.Gpu(0), cdi.Gpu(1)]
    spec = cdi.spec(gpus, str(lib), sc.nvml.get("driver", "550.54.15") if sc.nvml else "550.54.15",
                    hooks=False)
    env = cdi.apply(spec, "all", root)
    return env if spec_env == "void" else {}


def _run(sc: Sc, tmp_path: Path, lib: Path | None, monkeypatch: pytest.MonkeyPatch,
         spec_env: str | None = None) -> dict[str, Any]:
    """Probe and choose for ``sc``; with ``spec_env`` (void, unset) the GPUs come by CDI."""
    pieces = [p for p in sc.pieces if p != "nvidia-nodes"] if spec_env else sc.pieces
    root = compose(tmp_path / "root", sc.cpuinfo, pieces)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **sc.env}
    loader = ""
    if sc.nvml is not None:
        assert lib is not None
        cfg = standin.write_config(tmp_path / "nvml.conf", **sc.nvml)
        monkeypatch.setenv("STAGECRAFT_NVML_CONFIG", str(cfg))
        loader = str(lib.parent)
        if spec_env:  # found in the root's loader dirs, where the spec mounts it
            env.update(_give_by_cdi(sc, root, lib, cfg, spec_env))
            loader = str(root / cdi.LIBRARY_DIR.lstrip("/"))
        else:
            env["LD_LIBRARY_PATH"] = loader
    if sc.subprocess:
        args = {"root": str(root), "sets": sc.sets, "env": env, "ov": sc.ov._asdict()}
        cp = subprocess.run([sys.executable, "-c", _CHILD, str(REPO), json.dumps(args)],
                            capture_output=True, text=True, timeout=30, check=False,
                            env={**os.environ, "LD_LIBRARY_PATH": loader})
        assert cp.returncode == 0, cp.stderr
        return json.loads(cp.stdout)
    denied = {str(root) + p for p in sc.deny}
    real = fsread.may_open_rw
    monkeypatch.setattr(fsread, "may_open_rw", lambda r, p: fsread.at(r, p) not in denied and real(r, p))
    probes = probe_all(str(root), 1.0, sorted({s["device"] for s in sc.sets}), env)
    c = choose(probes, sc.sets, sc.ov)
    return {"name": c.name, "exit": c.exit_code, "message": c.message, "warnings": list(c.warnings),
            "passed": [x.reason for x in c.passed_over], "cpus": probes["cpu"].effective_cpus,
            "count": len(probes[c.device].devices) if c.device and c.device != "cpu" else None}


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(sc: Sc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    lib = request.getfixturevalue("standin_lib") if sc.nvml is not None else None
    got = _run(sc, tmp_path, lib, monkeypatch)
    where = f"[{sc.id}] got {got}"
    if isinstance(sc.expect, int):
        assert got["name"] == "" and got["exit"] == sc.expect, where
        assert sc.reason in got["message"], where
    else:
        assert got["name"] == sc.expect and got["exit"] == 0, where
        if sc.reason:
            assert sc.reason in got["message"] or any(sc.reason in r for r in got["passed"]), where
    if sc.warn:
        assert any(sc.warn in w for w in got["warnings"]), where
    elif not isinstance(sc.expect, int):
        assert not any("JIT" in w for w in got["warnings"]), where
    if sc.cpus is not None:
        assert got["cpus"] == sc.cpus, where
    if sc.count is not None:
        assert got["count"] == sc.count, where


# The scenarios whose GPUs --device gives (the node fixture, the stand-in library), less
# those that set NVIDIA_VISIBLE_DEVICES themselves (a runtime's variable, which CDI sets).
CDI_SCENARIOS = [s for s in SCENARIOS if "nvidia-nodes" in s.pieces and s.nvml is not None
                 and "NVIDIA_VISIBLE_DEVICES" not in s.env]


@pytest.mark.parametrize("spec_env", ["void", "unset"])
@pytest.mark.parametrize("sc", CDI_SCENARIOS, ids=[s.id for s in CDI_SCENARIOS])
def test_same_choice_under_cdi(sc: Sc, spec_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               request: pytest.FixtureRequest) -> None:
    """Each scenario run twice: GPUs given by --device, then by a CDI spec (nodes and
    library from the spec, NVIDIA_VISIBLE_DEVICES=void or unset): the same choice."""
    lib = request.getfixturevalue("standin_lib")
    by_device = _run(sc, tmp_path / "device", lib, monkeypatch)
    by_cdi = _run(sc, tmp_path / "cdi", lib, monkeypatch, spec_env)
    where = f"[{sc.id}, CDI env {spec_env}] --device: {by_device}; CDI: {by_cdi}"
    assert (by_cdi["name"], by_cdi["exit"]) == (by_device["name"], by_device["exit"]), where
    want = ("", sc.expect) if isinstance(sc.expect, int) else (sc.expect, 0)
    assert (by_cdi["name"], by_cdi["exit"]) == want, where
    assert by_cdi.get("count") == by_device.get("count"), where


def test_cdi_table_covers_the_gpu_scenarios() -> None:
    """The GPU paths of the table are all compared: native, fallbacks, NVML errors, hang."""
    ids = {s.id for s in CDI_SCENARIOS}
    assert len(CDI_SCENARIOS) >= 25, sorted(ids)
    assert {"h200-native", "nvml-no-permission-nodes-present", "nvml-hang-timeout",
            "cvd-mig-uuid", "strict-gpu-ok", "b200-cuda12.8-image"} <= ids, sorted(ids)


def test_table_is_large_enough() -> None:
    assert len(SCENARIOS) >= 30
