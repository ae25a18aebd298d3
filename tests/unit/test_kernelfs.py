"""Results and state never go to a kernel interface (issue 22 review, F14: as root,
``-o /proc/x.txt`` and ``--state-dir /proc/x`` passed the checks, since ``os.access``
says yes to root there; ``-o`` then failed after the render, ``--state-dir`` after the
engine was reached)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stagecraft import argcheck, kernelfs, outfile

ROOT = Path(__file__).resolve().parents[2]
TABLE = "\n".join([
    "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw",
    "23 22 0:5 / /proc rw,nosuid - proc proc rw",
    "24 22 0:6 / /sys rw - sysfs sysfs rw",
    "25 24 0:7 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw",
    r"26 22 0:8 / /mnt/my\040disk rw - tmpfs tmpfs rw",
    "27 22 0:9 / /srv/results rw - xfs /dev/sdb1 rw",
    "garbage line without separator",
    "1 2 3 - ",
])


@pytest.mark.parametrize(("path", "kind"), [
    ("/proc/x.txt", "proc"), ("/proc", "proc"), ("/sys/kernel/x", "sysfs"),
    ("/sys/fs/cgroup/a/b", "cgroup2"), ("/mnt/my disk/out", "tmpfs"), ("/srv/results/a", "xfs"),
    ("/procfoo/x", "ext4"), ("/home/u/Dockerfile", "ext4"),
])
def test_the_longest_mount_point_above_the_path_names_the_type(path: str, kind: str):
    assert kernelfs.fs_type(path, TABLE) == kind
    assert bool(kernelfs.kernel_interface(path, TABLE)) == (kind in ("proc", "sysfs", "cgroup2"))


def test_an_unreadable_or_empty_table_knows_nothing():
    assert kernelfs.fs_type("/proc/x", "") is None
    assert kernelfs.kernel_interface("/proc/x", "nonsense\n\\\\\\") == ""


def test_a_result_file_on_proc_or_sys_is_refused_here():
    # this machine's own mount table: /proc is procfs wherever these tests run
    assert "kernel interface" in outfile.problem("/proc/stagecraft-x.txt") or \
        "not writable" in outfile.problem("/proc/stagecraft-x.txt")
    assert outfile.problem("/sys/stagecraft-x.txt")
    assert argcheck.state_dir_problem(Path("/proc/stagecraft-state"))
    assert argcheck.state_dir_problem(Path("/sys/kernel"))


def test_render_to_proc_is_one_line_exit_2_before_rendering(tmp_path: Path):
    r = subprocess.run([sys.executable, str(ROOT / "build.py"), "render", "--tag", "2.6.2-cpu", "-o",
                        "/proc/stagecraft-render.txt"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "/proc/stagecraft-render.txt" in r.stderr, r.stderr
    assert r.stdout == ""
