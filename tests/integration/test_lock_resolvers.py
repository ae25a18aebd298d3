"""`build.py lock` against the real Debian mirror and PyPI, for a small matrix (Debian 12
base, six as the framework): the real resolvers (debootstrap, apt, uv) fill it, the file
is deterministic, a second run touches nothing, and `--upgrade` reports what moved.
About 60 s (apt indexes, debootstrap --print-debs, uv resolutions; the upgrade test resolves the Debian entry again)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stagecraft import lockfile
from tests.unit.minimal_matrix import MINIMAL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def locked(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("lock")
    for name in ("templates", "entrypoint", "probes", "tests/image"):
        shutil.copytree(ROOT / name, d / name, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "matrix.yaml").write_text(MINIMAL)
    proc = _lock(d)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return d


def _lock(d: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix",
                           str(d / "matrix.yaml"), "lock", *args],
                          capture_output=True, text=True, timeout=600)


def test_lock_records_every_package_with_its_hash(locked):
    lock = lockfile.read(locked / "matrix.lock")
    deb = lock.debian["debian deb12 linux/amd64"]
    assert {"libc6", "dpkg", "bash", "apt"} <= set(deb["base"])  # essential set and apt
    assert deb["base"]["libc6"]["version"].startswith("2.36-")
    assert {"tini", "python3", "python3-venv", "ca-certificates"} <= set(deb["stages"]["base"])
    assert not set(deb["stages"]["base"]) & set(deb["base"])  # only what the stage adds
    py = lock.python["runtime six-2 on deb12 linux/amd64"]
    assert py["python_platform"] == "x86_64-manylinux_2_36"  # Debian 12's glibc
    assert py["packages"]["six"] == {"version": "1.17.0", "files": {
        "six-1.17.0-py2.py3-none-any.whl":
            "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"}}
    assert set(py["packages"]) == {"six", "nvidia-ml-py"}


def test_lock_again_changes_nothing(locked):
    before = (locked / "matrix.lock").read_bytes()
    proc = _lock(locked)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "0 package change(s)" in proc.stderr and "uv pip compile" not in proc.stderr
    assert (locked / "matrix.lock").read_bytes() == before
    assert _lock(locked, "--check").returncode == 0


def test_upgrade_prints_old_and_new(locked, tmp_path):
    d = tmp_path / "p"
    shutil.copytree(locked, d)
    lock_file = d / "matrix.lock"
    text = lock_file.read_text()
    current = lockfile.loads(text).debian["debian deb12 linux/amd64"]["stages"]["base"]["tini"]["version"]
    # A lock made before the mirror moved: tini one revision older.
    lock_file.write_text(lockfile.with_seal_renewed(text.replace(
        f'"tini": {{"version": "{current}"', '"tini": {"version": "0.19.0-1"', 1)))
    proc = _lock(d, "--upgrade", "tini")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"tini: 0.19.0-1 -> {current} [deb12 linux/amd64]"]
    assert _lock(d, "--check").returncode == 0
