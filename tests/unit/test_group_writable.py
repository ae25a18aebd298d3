"""What makes the images extensible by any uid in group 0, on the host (no Docker):
fix-permissions on a real tree, the umask the entrypoint and bash-env set per user.

The images themselves are checked by tests/image/test_runtime.py (pip as uid 1000 and
12345) and tests/integration/test_extending.py (a derived Dockerfile, PaddleOCR).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

FIX = ROOT / "entrypoint" / "fix-permissions"
BASH_ENV = ROOT / "entrypoint" / "bash-env"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching uid needs root")


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    venv = tmp_path / "venv"
    (venv / "lib" / "pkg").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "lib" / "pkg" / "mod.py").write_text("x = 1\n")
    (venv / "bin" / "tool").write_text("#!/bin/sh\n")
    for p in (venv, venv / "lib", venv / "lib" / "pkg", venv / "bin"):
        p.chmod(0o755)
    (venv / "lib" / "pkg" / "mod.py").chmod(0o644)
    (venv / "bin" / "tool").chmod(0o755)
    outside = tmp_path / "python3.11"  # what a venv's bin/python points at
    outside.write_text("system\n")
    outside.chmod(0o755)
    (venv / "bin" / "python").symlink_to(outside)
    return venv, outside


def test_fix_permissions_makes_a_tree_group0_writable(tmp_path):
    venv, outside = _tree(tmp_path)
    proc = subprocess.run([str(FIX), str(venv)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for path in venv.rglob("*"):
        st = path.lstat()
        if path.is_symlink():
            continue
        assert st.st_gid == 0, f"{path}: gid {st.st_gid}"
        if path.is_dir():
            assert stat.S_IMODE(st.st_mode) & 0o2070 == 0o2070, f"{path}: {oct(st.st_mode)}"
        else:
            assert stat.S_IMODE(st.st_mode) & 0o060 == 0o060, f"{path}: {oct(st.st_mode)}"
    assert stat.S_IMODE(venv.stat().st_mode) == 0o2775
    assert stat.S_IMODE((venv / "bin" / "tool").stat().st_mode) == 0o775, "executable bits kept"
    # The link's target is the system's: untouched.
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755, "fix-permissions followed a symlink"


def test_fix_permissions_touches_only_what_is_not_right(tmp_path):
    """In a Dockerfile RUN, a change of mode copies the file up into the new layer: a
    second run must change nothing (no inode change time moves)."""
    venv, _ = _tree(tmp_path)
    subprocess.run([str(FIX), str(venv)], check=True)
    before = {p: p.lstat().st_ctime_ns for p in venv.rglob("*")}
    new = venv / "lib" / "pkg" / "new.py"
    new.write_text("y = 2\n")
    new.chmod(0o644)
    subprocess.run([str(FIX), str(venv)], check=True)
    changed = [p for p, ctime in before.items() if p.lstat().st_ctime_ns != ctime and p != new.parent]
    assert changed == [], f"touched although right: {changed}"
    assert stat.S_IMODE(new.stat().st_mode) == 0o664


@pytest.mark.parametrize("args,fragment", [([], "usage: fix-permissions DIR..."),
                                           (["/nonexistent-dir"], "/nonexistent-dir: not a directory")])
def test_fix_permissions_bad_input(args, fragment):
    proc = subprocess.run([str(FIX), *args], capture_output=True, text=True)
    assert proc.returncode == 2 and fragment in proc.stderr, (proc.returncode, proc.stderr)


@as_root
@pytest.mark.parametrize("user,before,after", [(12345, 0o022, 0o002), (1000, 0o022, 0o002),
                                               (12345, 0o077, 0o077), (0, 0o022, 0o022)])
def test_entrypoint_umask(user, before, after):
    """What `docker run` (and Jupyter, its kernels, `%pip`) gets: the entrypoint's own
    function, in a forked child that has become ``user``."""
    from entrypoint.main import share_with_group

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, then ask
        try:
            os.setgid(0)
            os.setuid(user)
            os.umask(before)
            share_with_group()
            os.write(write, str(os.umask(0)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    got = int(os.read(read, 64).decode() or "-1")
    os.close(read)
    assert got == after, f"uid {user}, umask {oct(before)}: {oct(got)}"


@as_root
@pytest.mark.parametrize("user,before,after", [(12345, 0o022, "0002"), (0, 0o022, "0022"),
                                               (12345, 0o027, "0027")])
def test_bash_env_umask(user, before, after):
    """What every Dockerfile RUN step of a derived image gets (non-interactive bash)."""
    proc = subprocess.run(["bash", "-c", "umask"], env={"BASH_ENV": str(BASH_ENV), "PATH": "/usr/bin:/bin"},
                          user=user, group=0, umask=before, capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == after, f"uid {user}, umask {oct(before)}: {proc.stdout}"
