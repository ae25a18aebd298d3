"""A base bootstrap stopped mid-way leaves nothing behind (stagecraft/bases.py ``_ALONE``).

Found by hand (2026-12-06): SIGTERM to `build.py --tag 2.6.2-cpu` while debootstrap
bootstrapped the arm64 base left debootstrap's /proc mount inside the run's scratch
directory, and the run's last line was 'failed: a file of the run: Cannot call rmtree on a
symbolic link' instead of the interruption. Here a stand-in debootstrap (the real one
needs a mirror and minutes) does what the real one does first: it mounts a file system
inside the target, then works on; the run is interrupted as a user interrupts it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="debootstrap runs as root, in util-linux unshare")

STAND_IN = """#!/bin/sh
# debootstrap [OPTIONS] SUITE TARGET MIRROR: the target is the second-to-last word.
eval "target=\\${$(($# - 1))}"
mkdir -p "$target/proc"
mount -t tmpfs "$MARK" "$target/proc" || exit 97
touch "$target/proc/inside" "$READY"
exec sh -c 'while :; do sleep 1; done' "$MARK"
"""

PROGRAM = """
import signal, sys
from stagecraft import bases, interrupts
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, interrupts.terminate)
base = bases.BaseImage(name="debian12", source="bootstrap", ref="stagecraft-base/debian:t",
                       identity="t", suite="bookworm", mirror="http://deb.debian.org/debian",
                       variant="minbase", arch=bases.host_arch())
try:
    bases._bootstrap(None, base, print)
except KeyboardInterrupt as exc:
    print("interrupted:", type(exc).__name__, file=sys.stderr)
    sys.exit(130)
"""


def _marked(mark: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def _leave_nothing(mark: str) -> None:
    """Whatever the outcome, no mount or process of this test stays on the host (the
    assertions below say whether the product left one)."""
    leftover = {"mounts": [], "pids": []}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].split()[1:2] == [mark]:
            leftover["mounts"].append(line.split()[4])
    deadline = time.monotonic() + 10  # a SIGKILL of the namespace's processes takes a moment
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover["pids"] = _marked(mark)
    _leave_nothing.found = leftover  # type: ignore[attr-defined]
    for pid in leftover["pids"]:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    for point in sorted(leftover["mounts"], key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_bootstrap_leaves_no_mount_no_process_and_no_directory(tmp_path, signum):
    mark = f"stagecraft-test-{uuid.uuid4().hex[:12]}"
    bin_dir, scratch, ready = tmp_path / "bin", tmp_path / "scratch", tmp_path / "ready"
    bin_dir.mkdir()
    scratch.mkdir()
    (bin_dir / "debootstrap").write_text(STAND_IN)
    (bin_dir / "debootstrap").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(scratch),
           "MARK": mark, "READY": str(ready), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 30
        # READY comes just before the stand-in's exec into the marked process: wait for both
        # (a loaded machine ran the check between the two).
        while not (ready.exists() and _marked(mark)):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, ("the stand-in's process is not running" if ready.exists()
                                                 else "the stand-in never started")
            time.sleep(0.05)
        if signum == signal.SIGINT:  # Ctrl-C: the terminal signals the whole foreground group
            os.killpg(child.pid, signum)
        else:  # `kill PID`, as a supervisor stops the run
            child.send_signal(signum)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        _leave_nothing(mark)
    assert child.returncode == 130, (out, err)
    assert "interrupted: " in err and "rmtree" not in err
    assert _leave_nothing.found == {"mounts": [], "pids": []}, "debootstrap's mount or processes outlived the run"
    assert list(scratch.iterdir()) == [], "the bootstrap's directory was left"
