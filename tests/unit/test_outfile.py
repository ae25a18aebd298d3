"""-o FILE is written whole, through a temporary file and a rename, and only over a
regular file or nothing (issue 22, item 6: `render -o FIFO` hung)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stagecraft import outfile


def test_a_new_file_gets_the_umask_mode_and_no_temporary_stays(tmp_path: Path):
    old = os.umask(0o027)
    try:
        outfile.write_text(str(tmp_path / "out"), "text\n")
    finally:
        os.umask(old)
    assert (tmp_path / "out").read_text() == "text\n"
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_existing_file_is_replaced_keeping_its_mode(tmp_path: Path):
    target = tmp_path / "out"
    target.write_text("old, longer than the new text\n")
    target.chmod(0o604)
    outfile.write_text(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_link_is_followed_and_stays(tmp_path: Path):
    (tmp_path / "real").write_text("old\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    outfile.write_text(str(tmp_path / "link"), "new\n")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "new\n"


@pytest.mark.parametrize("kind", ["fifo", "dir", "device", "dangling-dir"])
def test_what_is_not_a_regular_file_is_never_replaced(tmp_path: Path, kind: str):
    path = {"fifo": tmp_path / "fifo", "dir": tmp_path / "dir", "device": Path("/dev/null"),
            "dangling-dir": tmp_path / "nope" / "out"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "dir":
        path.mkdir()
    assert outfile.problem(str(path)), kind
    before = os.stat(path).st_mode if path.exists() else None
    with pytest.raises(OSError):
        outfile.write_text(str(path), "x\n")
    assert (os.stat(path).st_mode if path.exists() else None) == before, kind
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")], "a temporary file stayed"


def test_a_regular_file_or_nothing_has_no_problem(tmp_path: Path):
    (tmp_path / "f").write_text("x")
    assert outfile.problem(str(tmp_path / "f")) == ""
    assert outfile.problem(str(tmp_path / "new")) == ""
