"""Builds install exactly matrix.lock: a copy of the project whose lock has one hash
changed (its seal renewed, as if the index or the mirror served other bytes than the ones
locked) fails that stage with exit 1, naming the package and both hashes; a locked
Debian version the mirror no longer serves stops with "run `build.py lock --upgrade`".

The copy has the project's own files, so every stage below the changed one has the key
the main build of 2.6.2-cpu makes (reused when built): each case builds one stage and
stops at its check (about 30-60 s each: paddle's wheel download, one apt download)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stagecraft import lockfile
from tests.integration.harness import ROOT, run_cli

RUNTIME = "runtime paddle-2.6.2-cpu on debian12 linux/amd64"
DEBIAN = "debian debian12 linux/amd64"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("templates", "entrypoint", "probes", "tests/image"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("matrix.yaml", "matrix.lock", ".dockerignore"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _edit(project: Path, change) -> None:
    path = project / "matrix.lock"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(lockfile.with_seal_renewed(json.dumps(doc)))


def _build(project: Path):
    return run_cli("--matrix", str(project / "matrix.yaml"), "--tag", "2.6.2-cpu", "--platform", "linux/amd64",
                   "--state-dir", str(project / ".state"), "--repository", "stagecraft-it/locked",
                   cwd=project, timeout=1800)


def test_changed_wheel_hash_fails_the_stage_naming_package_and_hashes(project):
    fake = "0" * 64
    real = {}

    def change(doc):
        rec = doc["python"][RUNTIME]["packages"]["paddlepaddle"]
        (name, sha), = rec["files"].items()
        real["sha"] = sha
        rec["files"][name] = fake

    _edit(project, change)
    proc = _build(project)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"hash mismatch for paddlepaddle==2.6.2: lock sha256:{fake}, downloaded sha256:{real['sha']}" \
        in proc.stderr, proc.stderr[-2000:]


def test_changed_deb_hash_fails_the_stage_naming_package_and_hashes(project):
    fake = "f" * 64
    real = {}

    def change(doc):
        rec = doc["debian"][DEBIAN]["stages"]["base"]["tini"]
        real.update(rec)
        rec["sha256"] = fake

    _edit(project, change)
    proc = _build(project)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert (f"stagecraft: hash mismatch for tini {real['version']}: lock sha256:{fake}, "
            f"downloaded sha256:{real['sha256']}") in proc.stderr, proc.stderr[-2000:]


def test_locked_version_gone_from_the_mirror(project):
    def change(doc):
        doc["debian"][DEBIAN]["stages"]["base"]["tini"]["version"] = "0.19.0-0stagecraft1"

    _edit(project, change)
    proc = _build(project)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert ("stagecraft: tini 0.19.0-0stagecraft1 is locked but the mirror no longer serves it; "
            "run `build.py lock --upgrade`") in proc.stderr, proc.stderr[-2000:]
