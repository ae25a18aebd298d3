"""entrypoint/tmpdir.py: TMPDIR for the command when no temporary directory is writable
(a read-only root without a tmpfs /tmp), in this process and through the entrypoint."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from entrypoint.tmpdir import tmpdir_env

GONE = ("/nonexistent/stagecraft-tmp", "/nonexistent/stagecraft-var-tmp")


def test_tmpdir_beside_the_report_when_nothing_is_writable(tmp_path: Path) -> None:
    report = tmp_path / "shm" / "stagecraft-1000" / "report.json"
    report.parent.mkdir(parents=True)
    got = tmpdir_env({}, str(report), cwd="/nonexistent", dirs=GONE)
    assert got == {"TMPDIR": str(report.parent / "tmp")}
    assert (report.parent / "tmp").is_dir() and (report.parent / "tmp").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("case", ["tmp-writable", "cwd-writable", "tmpdir-set", "temp-set", "no-report"])
def test_nothing_changes_when_a_temporary_directory_exists(tmp_path: Path, case: str) -> None:
    report = tmp_path / "r" / "report.json"
    report.parent.mkdir()
    env = {"TMPDIR": "/x"} if case == "tmpdir-set" else {"TEMP": "/x"} if case == "temp-set" else {}
    dirs = (*GONE, str(tmp_path)) if case == "tmp-writable" else GONE
    cwd = str(tmp_path) if case == "cwd-writable" else "/nonexistent"
    got = tmpdir_env(env, None if case == "no-report" else str(report), cwd=cwd, dirs=dirs)
    assert got == {} and not (report.parent / "tmp").exists(), case


def test_a_directory_that_cannot_be_made_gives_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert tmpdir_env({}, str(blocker / "report.json"), cwd="/nonexistent", dirs=GONE) == {}


def test_the_entrypoint_leaves_tmpdir_alone_where_tmp_is_writable(tmp_path: Path) -> None:
    """Through the real entrypoint on this machine (/tmp writable): no TMPDIR appears."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP") and not k.startswith("STAGECRAFT_")}
    env.update({"STAGECRAFT_QUIET": "1", "STAGECRAFT_REPORT": str(tmp_path / "report.json"),
                "STAGECRAFT_PROBE_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"})
    cp = subprocess.run([sys.executable, str(REPO / "entrypoint/stagecraft-entrypoint"), "sh", "-c",
                         'echo "[${TMPDIR-unset}]"'], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert cp.returncode == 0 and cp.stdout.strip() == "[unset]", cp.stdout + cp.stderr
