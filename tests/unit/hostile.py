"""Shared by the hostile-input corpus (test_entrypoint_hostile.py) and the entrypoint's
fuzzer (test_fuzz_entrypoint.py): fixture machines with odd nodes, and the properties
every run of the entrypoint must keep whatever its inputs (issue 22).

A run either runs the command, or exits 78 (no kernel set / strict) or 2 (a bad option of
its own) saying so on stderr in lines that start with ``stagecraft:``; it finishes within
its budget (per probed family) plus MARGIN_S, within MAX_RSS / MAX_PEAK bytes; it writes
nothing but its report at one of its candidate locations, and leaves every other node as
it was (type, inode, size); it never prints a traceback.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from tests.fixtures.compose import compose

REPO = Path(__file__).resolve().parents[2]
ENTRY = REPO / "entrypoint" / "stagecraft-entrypoint"
MARGIN_S = 10.0  # seconds over the budget: interpreter start on a loaded 2-core machine
MAX_RSS = 200 << 20  # bytes: a whole entrypoint process (it takes about 20 MiB)
MAX_PEAK = 64 << 20  # bytes: Python allocations of one in-process plan (tracemalloc)
FAMILIES = ("nvidia", "xpu", "npu", "amd", "mlu", "cpu")

# An image with a kernel set of every family, the CPU's last and without requirements:
# every family is probed, and something can always run unless strict mode refuses.
IMAGE = {"schema": 1, "framework": {"name": "fw", "version": "1"}, "device": "nvidia",
         "kernel_sets": [{"name": f"{f}-set", "device": f, "requires": {}, "env": {}} for f in FAMILIES[:-1]]
         + [{"name": "cpu-avx2", "device": "cpu", "requires": {"isa_level": "x86-64-v3"}, "env": {}},
            {"name": "cpu-any", "device": "cpu", "requires": {}, "env": {}}]}
PIECES = ("host-16cpu", "cgroup-v2-quota-1.5", "kunlun-r200", "ascend-910b", "cambricon-mlu370", "amd-mi210")


def node(path: Path, spec: Any) -> None:
    """Make ``spec`` at ``path``: bytes or str (a regular file), ``("fifo",)``,
    ``("dir",)``, ``("chardev",)`` (1:3, like /dev/null), ``("symlink", target)``,
    ``("missing",)``, ``("tool", script text)`` (an executable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.is_file() or path.is_fifo() or path.is_char_device():
        path.unlink()
    elif path.is_dir():
        import shutil

        shutil.rmtree(path)
    if isinstance(spec, (bytes, str)):
        path.write_bytes(spec.encode("utf-8", "surrogatepass") if isinstance(spec, str) else spec)
    elif spec[0] == "fifo":
        os.mkfifo(path)
    elif spec[0] == "dir":
        path.mkdir()
    elif spec[0] == "chardev":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    elif spec[0] == "symlink":
        path.symlink_to(spec[1])
    elif spec[0] == "tool":
        path.write_bytes(spec[1].encode("utf-8", "surrogatepass"))
        path.chmod(0o755)


def machine(tmp: Path, files: dict[str, Any] | None = None, pieces: tuple[str, ...] = PIECES,
            cpuinfo: str = "linux-rhel7-haswell") -> tuple[Path, Path]:
    """(root, image.json): a fixture root of ``pieces`` with ``files`` ({machine path:
    spec}) laid over it, and the every-family image."""
    root = compose(tmp / "root", cpuinfo, pieces)
    for p, spec in (files or {}).items():
        node(root / p.lstrip("/"), spec)
    image = tmp / "image.json"
    image.write_text(json.dumps(IMAGE))
    return root, image


def snapshot(top: Path) -> dict[str, tuple[int, int, int]]:
    """{relative path: (mode, inode, size)} of every node under top (links not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_mode, st.st_ino, st.st_size)
    return out


def changed(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def base_env(root: Path, image: Path, run: Path) -> dict[str, str]:
    """The test's environment: the fixture machine, the report under ``run``, and the
    fallback runtime dir beside it (XDG_RUNTIME_DIR, ``run``'s sibling ``xdg``, made here:
    the entrypoint never makes a runtime directory), so nothing lands on this host."""
    (run.parent / "xdg").mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STAGECRAFT_", "CUDA_", "NVIDIA_", "OMP_", "MKL_", "XPU_", "ASCEND_",
                                "ROCR_", "HIP_", "MLU_", "CN_", "LD_LIBRARY_PATH", "XDG_"))}
    env.update({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(image),
                "STAGECRAFT_REPORT": str(run / "report.json"), "XDG_RUNTIME_DIR": str(run.parent / "xdg"),
                "PATH": "/usr/local/bin:/usr/bin:/bin"})
    return env


def budget_of(env: dict[str, str]) -> float:
    try:
        from entrypoint.options import budget

        return budget(env)
    except ValueError:
        return 0.0


def check_plan(env: dict[str, str]) -> dict[str, Any] | str:
    """Run entrypoint.main.plan in this process; assert the properties that hold there
    (bounded time and Python memory, a JSON report, or one line for a bad option);
    returns the report, or the bad option's line."""
    from entrypoint import options
    from entrypoint.main import plan

    limit = len(FAMILIES) * budget_of(env) + MARGIN_S
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        out: dict[str, Any] | str = plan(env)["report"]
    except options.BadOption as exc:
        out = str(exc)
    finally:
        elapsed = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed <= limit, f"plan took {elapsed:.1f} s > {limit:.1f} s"
    assert peak <= MAX_PEAK, f"plan allocated {peak >> 20} MiB at its peak"
    if isinstance(out, str):
        assert out.startswith("refusing to start: STAGECRAFT_") and "\n" not in out, out
        return out
    json.dumps(out)
    assert out["chosen"] or out["refused"], out
    return out


class Ran:
    """A finished entrypoint process: returncode, stdout, stderr, elapsed (s), maxrss (bytes)."""

    def __init__(self, rc: int, out: str, err: str, elapsed: float, maxrss: int) -> None:
        self.returncode, self.stdout, self.stderr, self.elapsed, self.maxrss = rc, out, err, elapsed, maxrss


# The entrypoint is started by a small launcher process, which reports the entrypoint's
# own ru_maxrss from wait4(2): a process forked from pytest itself would inherit pytest's
# high-water RSS (Linux keeps it across fork and execve).
LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(ru.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_entry(env: dict[str, str], cmd: list[str], limit_s: float) -> Ran:
    """Run the entrypoint in a subprocess (through LAUNCHER), its session killed after
    ``limit_s`` seconds; its own peak RSS (bytes)."""
    import signal
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rss = os.path.join(d, "rss")
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, rss, sys.executable, str(ENTRY), *cmd],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
        try:
            out, err = p.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        elapsed = time.monotonic() - t0
        maxrss = int(Path(rss).read_text() or 0) if os.path.exists(rss) else 0
        return Ran(p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), elapsed, maxrss)


def check_run(env: dict[str, str], marker: str = "ran") -> Ran:
    """Run ``sh -c 'echo ran'`` through the entrypoint and assert the process properties
    (module docstring). Returns the run."""
    limit = len(FAMILIES) * budget_of(env) + MARGIN_S
    r = run_entry(env, ["/bin/sh", "-c", f"echo {marker}"], limit + 30)
    assert r.elapsed <= limit, f"took {r.elapsed:.1f} s > {limit:.1f} s: {r.stderr[-500:]}"
    assert r.maxrss <= MAX_RSS, f"RSS {r.maxrss >> 20} MiB"
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stderr.splitlines()
    assert all(ln.startswith("stagecraft:") for ln in lines), lines[:5]
    if r.returncode == 0:
        assert r.stdout.strip() == marker, (r.stdout[-500:], r.stderr[-500:])
    else:
        assert r.returncode in (2, 78) and marker not in r.stdout, (r.returncode, r.stderr[-500:])
        assert lines and lines[0].startswith("stagecraft: refusing to start: "), lines[:3]
        if r.returncode == 2:  # a bad option: one line; an override the image cannot meet
            # (checked when choosing, after probing): that line and where the report is
            assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith(
                ("stagecraft: full report: ", "stagecraft: report not written to "))), lines
    return r
