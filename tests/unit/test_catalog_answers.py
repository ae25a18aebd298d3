"""The catalog's "which tag for my machine" table gives, for the stand-in machines of the
tests, the tag `build.py probe` chooses on that machine: one source of truth (probes.rank).

Each case runs the real probe command in a subprocess against a composed fixture root
(real /proc/cpuinfo, /dev and /sys pieces) and the stand-in NVML library, reads the probe
results it reports, maps them to the selector's machine (CPU choice, compute capability,
driver) and looks the answer up in the table the catalog embeds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.report import probes_from_dict
from stagecraft.catalog import answers, hardware, make
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from tests.fixtures.compose import NVML, compose

# (case, cpuinfo, probe root pieces, NVML answers or None, the answer `probe` gives)
MACHINES = [
    # CUDA 12.8 under minor-version compatibility (550 < 570.26, no PTX needed).
    ("H200 on 550", "linux-rhel7-skylake_avx512", ("host-16cpu", "nvidia-nodes"), "h200x8.conf",
     "torch-2.10.0-gpu-cuda12.8"),
    ("H200 on 575", "linux-rhel7-skylake_avx512", ("host-16cpu", "nvidia-nodes"), "h200x8-r575.conf",
     "torch-2.10.0-gpu-cuda12.8"),
    ("L4", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"), "l4.conf",
     "2.6.0-gpu-cuda11.8-cudnn8.6"),  # SASS 8.6 runs on cc 8.9 (same major)
    ("K80", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"), "k80.conf", "2.6.2-cpu"),
    ("T4 on driver 440", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"), "old-driver-440.conf", "2.6.2-cpu"),
    ("A100 on driver 470", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"), "driver-470-a100.conf",
     "2.6.0-gpu-cuda11.8-cudnn8.6"),
    ("B200", "linux-unknown-sapphirerapids", ("host-16cpu", "nvidia-nodes"), "b200x8.conf", "torch-2.10.0-gpu-cuda12.8"),
    ("RTX 5090", "linux-ubuntu20.04-zen3", ("host-16cpu", "nvidia-nodes"), "rtx5090.conf", "torch-2.10.0-gpu-cuda12.8"),
    ("CPU without AVX-512", "linux-rhel7-haswell", ("host-16cpu",), None, "2.6.2-cpu"),
    ("CPU with AVX-512", "linux-rhel7-skylake_avx512", ("host-16cpu",), None, "2.6.2-cpu"),
    ("AVX only (Ivy Bridge)", "linux-rhel7-ivybridge", ("host-16cpu",), None, "2.6.2-cpu"),
    ("arm64 (Neoverse V2)", "linux-rhel9-neoverse_v2", ("host-16cpu",), None, "2.6.2-cpu"),
]


@cache
def table() -> dict:
    """The catalog's table for the whole matrix with nothing built (what `probe` sees
    without an engine: no image is known to be built)."""
    specs = expand(load_matrix(REPO / "matrix.yaml"))
    return answers.table(make.images_by_platform(specs, {}), {s.tag: False for s in specs})


def probe(tmp_path: Path, cpuinfo: str, pieces: tuple[str, ...], nvml: str | None, lib: Path | None) -> dict:
    root = compose(tmp_path / "root", cpuinfo, pieces)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_", "LD_LIBRARY_PATH"))}
    env.update({"STAGECRAFT_PROBE_ROOT": str(root), "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    if nvml:
        env.update({"LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / nvml)})
    cp = subprocess.run([sys.executable, str(REPO / "build.py"), "probe", "--json"], cwd=REPO,
                        capture_output=True, text=True, env=env, timeout=120, check=False)
    try:
        return json.loads(cp.stdout)
    except ValueError:
        pytest.fail(f"probe exit {cp.returncode}, not JSON:\n{cp.stdout}\n{cp.stderr}")


@pytest.mark.parametrize(("case", "cpuinfo", "pieces", "nvml", "expected"), MACHINES, ids=[m[0] for m in MACHINES])
def test_table_answer_equals_probe_choice(tmp_path: Path, request: pytest.FixtureRequest, case: str,
                                          cpuinfo: str, pieces: tuple[str, ...], nvml: str | None,
                                          expected: str) -> None:
    lib = request.getfixturevalue("lib") if nvml else None
    data = probe(tmp_path, cpuinfo, pieces, nvml, lib)
    probes = probes_from_dict(data["host"]["probes"])
    if nvml:
        assert probes["nvidia"].state == "usable", f"{case}: the stand-in GPU was not seen: {probes['nvidia']}"
    machine = hardware.machine_of(probes, table()["grid"])
    assert machine is not None, f"{case}: not a machine of the table: {probes}"
    got = answers.lookup(table(), *machine)
    assert got is not None, f"{case}: no answer for {machine}"
    assert data["best"]["tag"] == expected, f"{case}: probe chose {data['best']} (the case's premise)"
    assert got["best"] == data["best"]["tag"], f"{case} {machine}: table {got}, probe {data['best']}"
    kset = next(r["kernel_set"] for r in data["images"] if r["tag"] == expected)
    assert got["why"].startswith(f"kernel set {kset} ("), f"{case}: probe's kernel set {kset}, table: {got['why']}"


def test_every_machine_of_the_selector_has_an_answer() -> None:
    t = table()
    assert len(t["answers"]) == len(answers.machines(t["grid"])), "one answer per machine"
    for cpu in hardware.CPUS:
        assert answers.lookup(t, cpu, hardware.NO_GPU, "") is not None, cpu


def test_a_driver_below_the_grid_and_an_unknown_machine_have_no_answer() -> None:
    t = table()
    assert answers.lookup(t, "x86-64-v3", "9.0", "390.12") is None
    assert answers.lookup(t, "x86-64-v3", "9.9", "550.54.15") is None
    assert answers.lookup(t, "no-such-cpu", hardware.NO_GPU, "") is None


def test_arm64_machines_choose_among_arm64_images_only() -> None:
    t = table()
    arm = answers.lookup(t, "aarch64", "9.0", "580.65.06")
    # GH200: an arm64 host with a Hopper GPU. The GPU images are made for linux/amd64
    # only, so they are not among the candidates at all (not even as refusals).
    amd64_only = "torch-2.10.0-gpu-cuda12.8"
    assert arm["best"] in ("2.6.2-cpu", "3.2.2-cpu"), arm
    assert amd64_only not in [t for t, _ in arm["others"]], arm


def test_a_cpu_without_avx_gets_no_tag_and_every_refusal() -> None:
    got = answers.lookup(table(), "x86-64-v2", hardware.NO_GPU, "")
    assert got["best"] is None, got
    assert got["others"] and all("avx" in why for _, why in got["others"]), got["others"]


def test_machine_of_rounds_a_driver_down_to_the_grid() -> None:
    probes = hardware.machine_probes("x86-64-v3", "8.0", "550.54.15")
    assert hardware.machine_of(probes, hardware.driver_grid()) == ("x86-64-v3", "8.0", "550.54.14")
    assert hardware.api_version("550.54.15") == "12.4"
    assert hardware.api_version("300.1") == ""
