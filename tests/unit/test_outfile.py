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


# --- what appears while the result is written (the check and the rename are apart) -------

def _meanwhile(monkeypatch: pytest.MonkeyPatch, action) -> None:
    """Run ``action`` between the temporary file's write and its rename: at the
    ``os.chmod`` that write_text makes of its temporary file (the library call, patched
    for this test, is the seam; no function of ours is replaced)."""
    real = os.chmod

    def chmod(path, mode, *a, **kw):
        action()
        return real(path, mode, *a, **kw)
    monkeypatch.setattr(os, "chmod", chmod)


@pytest.mark.parametrize("kind", ["fifo", "dir", "file"])
def test_what_appears_where_nothing_was_is_never_replaced(tmp_path: Path, monkeypatch, kind: str):
    out = tmp_path / "Dockerfile"
    make = {"fifo": lambda: os.mkfifo(out), "dir": lambda: out.mkdir(),
            "file": lambda: out.write_text("theirs")}[kind]
    _meanwhile(monkeypatch, make)
    with pytest.raises(FileExistsError, match="created there while writing"):
        outfile.write_text(str(out), "ours")
    monkeypatch.undo()
    assert {"fifo": stat.S_ISFIFO, "dir": stat.S_ISDIR, "file": stat.S_ISREG}[kind](os.lstat(out).st_mode)
    if kind == "file":
        assert out.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"], "the temporary file stayed"


@pytest.mark.parametrize("kind", ["fifo", "other-file", "removed"])
def test_a_file_swapped_while_writing_is_left_alone(tmp_path: Path, monkeypatch, kind: str):
    out = tmp_path / "Dockerfile"
    out.write_text("old")

    def swap() -> None:
        out.unlink()
        if kind == "fifo":
            os.mkfifo(out)
        elif kind == "other-file":
            out.write_text("someone else's")
    _meanwhile(monkeypatch, swap)
    with pytest.raises(FileExistsError, match="replaced, changed or removed while writing"):
        outfile.write_text(str(out), "ours")
    monkeypatch.undo()
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(out).st_mode)
    elif kind == "other-file":
        assert out.read_text() == "someone else's"
    else:
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["Dockerfile"] if kind != "removed" else [])


def test_a_pipe_named_through_proc_is_a_fifo(tmp_path: Path):
    """h22 review: the realpath of /proc/self/fd/N on a pipe (``pipe:[N]``) names nothing,
    which passed as "a new file"; the node the path names is a FIFO."""
    r, w = os.pipe()
    try:
        assert outfile.problem(f"/proc/self/fd/{w}") == "is a FIFO, not a regular file"
        with pytest.raises(FileExistsError):
            outfile.write_text(f"/proc/self/fd/{w}", "x")
    finally:
        os.close(r)
        os.close(w)


def test_a_loop_or_a_link_to_nothing(tmp_path: Path):
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "f")
    assert outfile.problem(str(tmp_path / "loop")).startswith("cannot look at it (Too many levels")
    assert outfile.problem(str(tmp_path / "dangling")) == f"directory {tmp_path / 'nowhere'} does not exist"
