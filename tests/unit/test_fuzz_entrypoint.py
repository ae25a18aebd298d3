"""Property-based tests (hypothesis) over the entrypoint's inputs (issue 22): every
environment variable it reads, the content and node type of every file it reads under a
fixture root (cpuinfo, CPU lists, cgroup v1/v2 files, mountinfo, /dev nodes, KFD
topology, ld.so.cache, version.info, image.json), vendor tools' output and exit codes
(stand-in executables), and the node at the report path.

The properties (tests/unit/hostile.py): each example plans within its budget per probed
family plus a margin, within bounded memory (tracemalloc peak in process; the process's
own peak RSS in a subprocess), and either chooses a kernel set, refuses (78) or names a
bad option of its own in one line (2); the report is written only at one of its
locations, no other node changes, and nothing prints a traceback.

``test_plan_and_report`` runs in this process (tens of ms an example) and carries the
long run; ``test_the_real_process`` runs the entrypoint in a subprocess, a sample of it.
Budgets are hypothesis profiles (tests/unit/conftest.py): ``ci`` by default, ``long``
for ``make fuzz`` (FUZZ_EXAMPLES examples).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entrypoint import jsonout, runtime
from tests.unit import hostile

SETTINGS = settings(suppress_health_check=list(HealthCheck), deadline=None)

SPECIAL = list("\n\r\x00\t\x1b\x85\u2028 -,:=.\u0661\u00b2_") + ["\ud800", "\udcff"]
JUNK = st.lists(st.one_of(st.sampled_from(SPECIAL), st.characters(max_codepoint=0x2FFFF),
                          st.sampled_from("0123456789abcdefx")), max_size=20).map("".join)
NUMBER = st.one_of(st.integers(-2**70, 2**70).map(str), st.floats().map(str),
                   st.sampled_from(["max", "nan", "inf", "-1", "0", "4294967295", "9" * 300]))
RANGE = st.one_of(st.integers(0, 2**40), st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)).map(
    lambda t: f"{t[0]}-{t[1]}"), st.sampled_from(["0-99999999", "0-8191", "5-3", "-1", "", "x"]))
RANGE_LIST = st.lists(RANGE.map(str), max_size=8).map(",".join)
BIG = st.sampled_from([(1 << 20) + 1, 3 << 20]).map(lambda n: "0-3," * (n // 4))
NODE = st.sampled_from([("fifo",), ("dir",), ("chardev",), ("symlink", "/dev/zero"), ("symlink", "loop"),
                        ("symlink", "nowhere"), ("missing",)])
CONTENT = st.one_of(JUNK, NUMBER, RANGE_LIST, BIG, st.binary(max_size=64), NODE,
                    st.sampled_from(["", "\n", "max 100000", "150000 100000", "simd_count 1\ngfx_target_version 90010\n"]))
CPUINFO = st.one_of(CONTENT, st.lists(st.sampled_from(["processor\t: 0", "flags\t\t: lm avx2 avx fma bmi2 sse4_2",
                                                       "vendor_id\t: GenuineIntel", "Features\t: asimd sve",
                                                       "CPU architecture: 8", "model name\t: x"]),
                                      max_size=30).map("\n".join))
FILES = ["/sys/devices/system/cpu/online", "/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpu.max",
         "/sys/fs/cgroup/memory.max", "/proc/self/cgroup", "/proc/self/mountinfo",
         "/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us",
         "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/dev/nvidia0", "/dev/nvidiactl", "/dev/xpu0", "/dev/xpuctrl", "/dev/davinci0", "/dev/davinci_manager",
         "/dev/kfd", "/dev/dri/renderD128", "/dev/cambricon_dev0", "/dev/cambricon_ctl",
         "/sys/class/kfd/kfd/topology/nodes/1/properties", "/sys/class/kfd/kfd/topology/nodes/1/name",
         "/sys/module/amdgpu/version", "/etc/ld.so.cache", "/usr/local/Ascend/driver/version.info"]
MOUNTINFO = st.sampled_from(["1 1 0:1 / / rw - cgroup2 cgroup2 rw", "1 1 0:1 /a /sys/fs/cgroup rw - cgroup2 c rw",
                             "1 1 0:1 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset",
                             "1 1 0:1 / x rw - cgroup cgroup rw,cpu,memory", " - cgroup2 "])
PIECE_SETS = [("host-16cpu",), ("host-16cpu", "cgroup-v2-quota-1.5"), ("cgroup-v1-quota-1.5",),
              ("cgroup-v2-cpuset-0-3", "nvidia-nodes"), ("kunlun-r200",), ("ascend-910b",), ("cambricon-mlu370",),
              ("amd-mi210",), ("host-16cpu", "cgroup-v2-quota-1.5", "kunlun-r200", "ascend-910b", "cambricon-mlu370")]
CPUINFOS = ["linux-rhel7-haswell", "linux-rhel9-neoverse_v2", "linux-scientific7-k10", None]
TOOLS = hostile_tools = {"npu": "/usr/local/sbin/npu-smi", "xpu": "/usr/local/xpu/bin/xpu_smi", "mlu": "/usr/bin/cnmon"}
TOOL_SCRIPT = st.one_of(
    st.sampled_from(["#!/bin/sh\nexec yes flood\n", "#!/bin/sh\nexec sleep 100\n", "#!/bin/sh\n(sleep 100) &\necho x\n",
                     "#!/bin/sh\nexec >&- 2>&-\nsleep 100\n", "#!/bin/sh\nkill -9 $$\n", "\x7fELF"]),
    st.tuples(JUNK, st.integers(0, 255)).map(
        lambda t: "#!/bin/sh\nprintf '%s\\n' " + "'" + t[0].replace("'", "").replace("\x00", "") + f"'\nexit {t[1]}\n"))

BUDGET = st.one_of(st.none(), st.sampled_from(["0.3", "0.05", "1", ".5"]), JUNK,
                   st.sampled_from(["nan", "inf", "1e999", "-1", "0", "", "61", "abc"]),
                   # h22 review: decimals of every size, sub-millisecond ones included
                   st.decimals(min_value=0, max_value=61, places=9, allow_nan=False).map(lambda d: format(d, "f")))
FLAG = st.one_of(st.none(), st.sampled_from(["1", "0", "true", "no", "", "maybe", " ON "]), JUNK)
DEVICE = st.one_of(st.none(), st.sampled_from(list(hostile.FAMILIES) + ["", "gpu"]), JUNK)
OTHER = st.dictionaries(st.sampled_from(["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "XPU_VISIBLE_DEVICES",
                                         "ASCEND_RT_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                         "MLU_VISIBLE_DEVICES", "CN_VISIBLE_DEVICES", "OMP_NUM_THREADS",
                                         "STAGECRAFT_KERNEL_SET", "STAGECRAFT_DEVICE_STRING", "PATH",
                                         "CUDA_DEVICE_ORDER", "MKL_NUM_THREADS"]),
                        st.one_of(JUNK, RANGE_LIST, st.sampled_from(["", "0", "all", "none", "void", "cpu-any"])),
                        max_size=4)
REPORT_NODE = st.one_of(st.none(), NODE, st.sampled_from(["", "not a report", '{"schema": 1, "probes": {}}']))


@st.composite
def inputs(draw: Any) -> dict[str, Any]:
    """One hostile machine and environment."""
    families = draw(st.lists(st.sampled_from(hostile.FAMILIES), unique=True, max_size=6))
    return {
        "pieces": draw(st.sampled_from(PIECE_SETS)), "cpuinfo": draw(st.sampled_from(CPUINFOS)),
        "cpuinfo_text": draw(st.one_of(st.none(), CPUINFO)),
        "files": draw(st.dictionaries(st.sampled_from(FILES), st.one_of(CONTENT, MOUNTINFO), max_size=4)),
        "tools": draw(st.dictionaries(st.sampled_from(sorted(TOOLS)), TOOL_SCRIPT, max_size=2)),
        "families": families,
        "env": {k: v for k, v in (("STAGECRAFT_BUDGET_S", draw(BUDGET)), ("STAGECRAFT_QUIET", draw(FLAG)),
                                  ("STAGECRAFT_STRICT", draw(FLAG)), ("STAGECRAFT_DEVICE", draw(DEVICE)))
                if v is not None} | draw(OTHER),
        "report": draw(REPORT_NODE),
    }


def lay_out(tmp: Path, x: dict[str, Any]) -> dict[str, str]:
    """The machine and environment of one example under tmp."""
    files = dict(x["files"])
    if x["cpuinfo_text"] is not None:
        files["/proc/cpuinfo"] = x["cpuinfo_text"]
    files.update({TOOLS[f]: ("tool", script) for f, script in x["tools"].items()})
    root, image = hostile.machine(tmp, files, pieces=x["pieces"], cpuinfo=x["cpuinfo"])
    sets = [s for s in hostile.IMAGE["kernel_sets"] if s["device"] in x["families"]]
    image.write_text(json.dumps({**hostile.IMAGE, "kernel_sets": sets}))
    env = hostile.base_env(root, image, tmp / "run")
    if x["report"] is not None:
        hostile.node(tmp / "run" / "report.json", x["report"])
    env.update(x["env"])
    return {k: v.replace("\0", "") for k, v in env.items()}


def _allowed(tmp: Path) -> set[str]:
    """Paths (relative to tmp) the entrypoint may create or change: its report locations."""
    return {"run", "run/report.json", "xdg/stagecraft", "xdg/stagecraft/report.json"}


@SETTINGS
@given(x=inputs())
def test_plan_and_report(x: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = lay_out(tmp, x)
        before = hostile.snapshot(tmp)
        out = hostile.check_plan(env)
        if isinstance(out, dict):
            text = jsonout.dumps(out)  # the start path's writer, on what hostile input made
            assert text == json.dumps(out, indent=1, sort_keys=True)
            path, line = runtime.write(text, env)
            assert path in (str(tmp / "run" / "report.json"), str(tmp / "xdg" / "stagecraft" / "report.json"))
            assert "\n" not in line
            assert runtime.load(path) is not None
        moved = hostile.changed(before, hostile.snapshot(tmp))
        assert moved <= _allowed(tmp), moved - _allowed(tmp)
        if x["report"] not in (None, ("missing",)) and "run/report.json" in moved:  # replaced: only our own report
            assert x["report"] == '{"schema": 1, "probes": {}}', x["report"]


SUBPROCESS = settings(SETTINGS, max_examples=max(20, settings.default.max_examples // 10))


@SUBPROCESS
@given(x=inputs())
def test_the_real_process(x: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = lay_out(tmp, x)
        before = hostile.snapshot(tmp)
        hostile.check_run({k: v.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape")
                           for k, v in env.items()})
        moved = hostile.changed(before, hostile.snapshot(tmp))
        assert moved <= _allowed(tmp), moved - _allowed(tmp)


@settings(SETTINGS, max_examples=max(10, settings.default.max_examples // 25))
@given(budget=BUDGET.filter(lambda b: b is not None))
def test_a_budget_never_silently_drops_working_gpus(budget: str, lib: Path) -> None:
    """8 working GPUs (stand-in NVML): whatever STAGECRAFT_BUDGET_S holds, the GPUs are
    chosen, or the line says why not (a timeout within a tiny budget), or the value is
    refused in one line naming the variable (issue 22)."""
    from tests.fixtures.compose import IMAGES, NVML, compose

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        root = compose(tmp / "root", "linux-rhel7-haswell", ("host-16cpu", "nvidia-nodes"))
        env = {**hostile.base_env(root, IMAGES / "gpu-cuda11.8.json", tmp / "run"),
               "LD_LIBRARY_PATH": str(lib.parent), "STAGECRAFT_NVML_CONFIG": str(NVML / "h200x8.conf"),
               "STAGECRAFT_BUDGET_S": budget.replace("\0", "").encode("utf-8", "surrogatepass").decode(
                   "utf-8", "surrogateescape")}  # an environment holds no NUL
        r = hostile.check_run(env)
        if r.returncode == 2:
            assert r.stderr.startswith("stagecraft: refusing to start: STAGECRAFT_BUDGET_S="), r.stderr
        else:
            assert r.returncode == 0, r.stderr
            assert "cuda11.8-sm (8x NVIDIA H200" in r.stderr or "timeout: NVML did not answer" in r.stderr, r.stderr


@SETTINGS
@given(parts=st.lists(st.tuples(st.integers(0, 20000), st.one_of(st.none(), st.integers(0, 20000))), max_size=12),
       bound=st.integers(0, 20000))
def test_cpu_lists_match_a_plain_reading(parts: list[tuple[int, int | None]], bound: int) -> None:
    """probes.fsread.parse_range_list against the obvious set arithmetic, clipped at the
    bound and at MAX_CPUS."""
    from probes import fsread

    text = ",".join(str(a) if b is None else f"{a}-{b}" for a, b in parts)
    want = set()
    for a, b in parts:
        want.update(range(a, (a if b is None else b) + 1))
    assert fsread.parse_range_list(text, bound) == sorted(c for c in want if c < min(bound, fsread.MAX_CPUS))
