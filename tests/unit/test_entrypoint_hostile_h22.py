"""Issue 22, the entrypoint: held-back cases of each class found by the hostile review
of the fixes (branch h22-review), kept as tests beside the first corpus
(test_entrypoint_hostile.py; tests/unit/hostile.py states the properties each must keep).

Found: cpuinfo's processor count unbounded where the online list is missing (class 3);
a cgroup quota of 400 digits dropping every cgroup limit (class 3); values the kernel
never writes read as counts (class 3); image.json kernel sets of the wrong shape giving
an internal error or stopping the command (class 2); a sub-millisecond budget passing
the option check and refusing 8 working GPUs (class 2).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes import fsread
from tests.unit import hostile
from tests.unit.hostile import check_plan, check_run, machine

# cpuinfo stands in for the online list when that is missing: every "processor" line was
# counted, so 100,000 of them gave 58,871 CPUs (and thread pools of that size).
CPUINFO_FLOODS = {
    "distinct": "".join(f"processor\t: {i}\n" for i in range(100000)),
    "repeated": "processor\t: 0\nflags\t: lm avx2\n" * 60000,
    "odd-values": "".join(f"processor\t: x{i}\n" for i in range(20000)),
}


@pytest.mark.parametrize("kind", sorted(CPUINFO_FLOODS))
@pytest.mark.parametrize("online", [("missing",), ("fifo",), ""])
def test_h22_cpuinfo_processor_count_is_bounded(kind: str, online: object, tmp_path: Path) -> None:
    root, image = machine(tmp_path, {"/proc/cpuinfo": CPUINFO_FLOODS[kind],
                                     "/sys/devices/system/cpu/online": online}, pieces=("host-16cpu",))
    out = check_plan({**hostile.base_env(root, image, tmp_path / "run"), "STAGECRAFT_BUDGET_S": "2"})
    assert isinstance(out, dict), out
    cpu = out["probes"]["cpu"]
    assert 1 <= cpu["online"] <= fsread.MAX_CPUS and 1 <= cpu["effective_cpus"] <= fsread.MAX_CPUS, cpu
    want = 1 if kind == "repeated" else min(fsread.MAX_CPUS, 100000 if kind == "distinct" else 20000)
    assert cpu["online"] == want, cpu


# A quota of 400 digits overflowed a float when divided by its period: the error dropped
# every cgroup limit, the cpuset and memory limit included. Values the kernel never
# writes (signs, "_", other scripts' digits, zero) now count as no quota, alone.
ODD_QUOTAS = ["9" * 400 + " 1", "9" * 21 + " 1", "-500000 100000", "0 100000", "1_50000 100000",
              "\u0661\u0665\u0660\u0660\u0660\u0660 \u0661\u0660\u0660\u0660\u0660\u0660", "+150000 100000",
              "150000 0", "150000 -100000", "150000\0 100000"]


@pytest.mark.parametrize("quota", ODD_QUOTAS, ids=lambda q: repr(q)[:30])
def test_h22_an_odd_v2_quota_keeps_the_other_limits(quota: str, tmp_path: Path) -> None:
    root, image = machine(tmp_path, {"/sys/fs/cgroup/cpu.max": quota, "/sys/fs/cgroup/cpuset.cpus.effective": "0-2\n"},
                          pieces=("host-16cpu", "cgroup-v2-quota-1.5"))
    out = check_plan(hostile.base_env(root, image, tmp_path / "run"))
    assert isinstance(out, dict), out
    cpu = out["probes"]["cpu"]
    assert (cpu["quota_cpus"], cpu["cpuset"], cpu["effective_cpus"]) == (None, 3, 3), cpu
    assert cpu["memory_limit_bytes"] == 2 << 30, cpu


@pytest.mark.parametrize("quota", ["9" * 400, "-1", "+150000", "1_50000", "0"])
def test_h22_an_odd_v1_quota_keeps_the_other_limits(quota: str, tmp_path: Path) -> None:
    root, image = machine(tmp_path, {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": quota},
                          pieces=("host-16cpu", "cgroup-v1-quota-1.5"))
    out = check_plan(hostile.base_env(root, image, tmp_path / "run"))
    assert isinstance(out, dict), out
    cpu = out["probes"]["cpu"]
    assert (cpu["quota_cpus"], cpu["cpuset"], cpu["memory_limit_bytes"]) == (None, 8, 512 << 20), cpu


@pytest.mark.parametrize("value", ["+5000000", "1_000", "\u0661\u0660\u0660\u0660", " -1", "9" * 21])
def test_h22_an_odd_memory_limit_is_no_limit(value: str, tmp_path: Path) -> None:
    root, image = machine(tmp_path, {"/sys/fs/cgroup/memory.max": value}, pieces=("host-16cpu", "cgroup-v2-quota-1.5"))
    out = check_plan(hostile.base_env(root, image, tmp_path / "run"))
    assert isinstance(out, dict) and out["probes"]["cpu"]["memory_limit_bytes"] is None, out
    assert out["probes"]["cpu"]["quota_cpus"] == 1.5, out["probes"]["cpu"]


# image.json's kernel sets of the wrong shape: "probe failed (AttributeError ...)", and an
# env name with a NUL stopped the command itself (exit 126). Now one line naming the file
# and the entry; the command runs without a kernel-set choice, as for any broken image.json.
def _set_with(**over: object) -> dict:
    return {"schema": 1, "kernel_sets": [{"name": "a", "device": "cpu", "requires": {}, "env": {}, **over}]}


BAD_IMAGES = [
    ({"schema": 1, "kernel_sets": [1, "x", None]}, "kernel_sets[0]: not an object"),
    (_set_with(requires=[1]), "kernel_sets[0].requires: not an object"),
    (_set_with(env="X=1"), "kernel_sets[0].env: not an object"),
    (_set_with(env={"A": 1}), "kernel_sets[0].env: A: not a string without NUL"),
    (_set_with(env={"B\0": "x"}), "kernel_sets[0].env: 'B\\x00' is not a variable name"),
    (_set_with(env={"C=D": "y"}), "kernel_sets[0].env: 'C=D' is not a variable name"),
    (_set_with(env={"": "y"}), "kernel_sets[0].env: '' is not a variable name"),
    (_set_with(env={"1X": "y"}), "is not a variable name"),
    (_set_with(env={"\u00c9": "y"}), "is not a variable name"),
    (_set_with(env={"A": "x\0y"}), "kernel_sets[0].env: A: not a string without NUL"),
    (_set_with(name=5), "kernel_sets[0].name: not a non-empty string"),
    (_set_with(name=""), "kernel_sets[0].name: not a non-empty string"),
    (_set_with(device=None), "kernel_sets[0].device: not a non-empty string"),
    ({**_set_with(), "device_strings": [1]}, "device_strings: not an object of strings"),
    ({**_set_with(), "device_strings": {"cpu": 1}}, "device_strings: not an object of strings"),
]


@pytest.mark.parametrize(("data", "fragment"), BAD_IMAGES, ids=[f for _, f in BAD_IMAGES])
def test_h22_an_image_json_of_the_wrong_shape_is_named_and_the_command_runs(data: dict, fragment: str,
                                                                           tmp_path: Path) -> None:
    root, _ = machine(tmp_path, pieces=("host-16cpu",))
    image = tmp_path / "bad-image.json"
    image.write_text(json.dumps(data))
    r = check_run(hostile.base_env(root, image, tmp_path / "run"))
    assert r.returncode == 0 and r.stdout.strip() == "ran", (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"stagecraft: probe failed (ValueError: {image}: "), lines
    assert fragment in lines[0] and lines[0].endswith("running the command without a kernel-set choice"), lines


def test_h22_a_sub_millisecond_budget_with_8_gpus_is_refused_as_an_option(tmp_path: Path, lib: Path) -> None:
    """STAGECRAFT_BUDGET_S=0.0000001 passed the option check; every probe then timed out
    and 8 working GPUs were refused (exit 78, "NVML did not answer within 0.0 s")."""
    from tests.fixtures.compose import IMAGES, NVML, compose

    root = compose(tmp_path / "root", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"))
    env = {**hostile.base_env(root, IMAGES / "gpu-cuda11.8.json", tmp_path / "run"),
           "LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / "h200x8.conf"),
           "STAGECRAFT_BUDGET_S": "0.0000001"}
    r = check_run(env)
    assert r.returncode == 2 and r.stderr.startswith(
        "stagecraft: refusing to start: STAGECRAFT_BUDGET_S='0.0000001': not a number of seconds in [0.001, 60]"), r.stderr
    assert not (tmp_path / "run").exists()


def test_h22_a_missing_runtime_directory_is_skipped_never_made(tmp_path: Path) -> None:
    """F11: XDG_RUNTIME_DIR=/nonexistent/dir made /nonexistent/dir/stagecraft with every
    parent. The XDG Base Directory spec has the system make that directory; the report
    now makes only its own last component, and only in a directory that exists. (The
    write itself would go on to /run or /tmp of this host, so the directory check is
    tested alone.)"""
    from entrypoint import runtime

    missing = tmp_path / "nonexistent" / "dir"
    assert not runtime._usable_dir(str(missing / "stagecraft"), explicit=False)
    assert not (tmp_path / "nonexistent").exists()
    (tmp_path / "xdg").mkdir()
    assert runtime._usable_dir(str(tmp_path / "xdg" / "stagecraft"), explicit=False)
    assert (tmp_path / "xdg" / "stagecraft").is_dir()
    named = tmp_path / "named" / "deep"  # a path the user named is made with its parents
    assert runtime._usable_dir(str(named), explicit=True) and named.is_dir()
