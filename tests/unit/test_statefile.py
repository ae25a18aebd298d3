"""State files written whole or not at all, read back bounded (stagecraft/statefile.py)."""

from __future__ import annotations

import json
import os
import socket

import pytest

from stagecraft import statefile


def test_write_atomic_replaces_whole_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "rec.json"
    statefile.write_json(p, {"a": 1})
    statefile.write_json(p, {"b": [1, 2]})
    assert json.loads(p.read_text()) == {"b": [1, 2]}
    assert sorted(x.name for x in tmp_path.iterdir()) == ["rec.json"]
    assert statefile.read_json(p) == {"b": [1, 2]}


@pytest.mark.parametrize("node", ["dir", "fifo", "socket", "symlink-to-dir"])
def test_write_atomic_never_replaces_what_is_not_a_regular_file(tmp_path, node):
    p = tmp_path / "rec.json"
    if node == "dir":
        p.mkdir()
    elif node == "fifo":
        os.mkfifo(p)
    elif node == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
    else:
        (tmp_path / "d").mkdir()
        p.symlink_to(tmp_path / "d")
    kind = os.lstat(p).st_mode
    with pytest.raises(FileExistsError):
        statefile.write_atomic(p, "x")
    assert os.lstat(p).st_mode == kind
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".")] == []


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "rec.json"
    statefile.write_json(p, {"old": True})

    def full(fd):  # the disk fills at the flush to disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        statefile.write_json(p, {"new": True})
    monkeypatch.undo()
    assert statefile.read_json(p) == {"old": True}
    assert [x.name for x in tmp_path.iterdir()] == ["rec.json"]


@pytest.mark.parametrize("text, why", [
    ('{"passed": true, "counts": {"pa', "not whole JSON"),
    ("", "not whole JSON"),
    ("\xff\xfe", "not whole JSON"),
    ("[1, 2]", "a JSON list"),
])
def test_half_or_odd_files_are_unreadable_never_valid(tmp_path, text, why):
    p = tmp_path / "rec.json"
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(statefile.Unreadable, match=why):
        statefile.read_json(p)


def test_read_is_bounded_and_a_fifo_answers_at_once(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"x": "' + "a" * 2000 + '"}')
    with pytest.raises(statefile.Unreadable, match="larger than 1000 bytes"):
        statefile.read_json(big, limit=1000)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(statefile.Unreadable, match="not a regular file"):
        statefile.read_json(fifo)
    assert statefile.read_json(tmp_path / "missing.json") is None


def test_a_directory_is_unreadable_not_an_oserror_about_a_descriptor(tmp_path):
    (tmp_path / "rec.json").mkdir()
    with pytest.raises(statefile.Unreadable, match="not a regular file"):
        statefile.read_json(tmp_path / "rec.json")


# A child whose files may not grow past 16 bytes (RLIMIT_FSIZE, SIGXFSZ ignored): its
# writes then fail as on a full disk, from write(2) on an open file, with no file name.
_TOO_BIG = """
import errno, json, resource, signal, sys
from stagecraft import statefile
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
try:
    statefile.write_json(__import__("pathlib").Path(sys.argv[1]), {"k": "x" * 4096})
except OSError as exc:
    print(json.dumps([exc.errno, exc.filename, str(exc)]))
"""


def test_a_write_that_fails_names_the_state_file_and_keeps_the_old_one(tmp_path):
    """Found by the fault suite (a state directory filled mid-run): the run's last line
    was ``failed: : No space left on device`` with no place, as write(2) and fsync(2) on
    an open file raise without a file name. The error now names the file; the old
    content and the directory stay as they were."""
    import errno
    import subprocess
    import sys

    p = tmp_path / "rec.json"
    p.write_text("{}\n")
    done = subprocess.run([sys.executable, "-c", _TOO_BIG, str(p)], capture_output=True, text=True,
                          timeout=60, cwd=os.path.dirname(os.path.dirname(statefile.__file__)))
    assert done.returncode == 0, done.stderr
    code, filename, words = json.loads(done.stdout)
    assert code == errno.EFBIG and filename == str(p) and str(p) in words
    assert p.read_text() == "{}\n" and sorted(x.name for x in tmp_path.iterdir()) == ["rec.json"]


def test_named_keeps_an_error_that_has_a_name():
    import errno

    err = FileNotFoundError(errno.ENOENT, "No such file or directory", "/a")
    assert statefile.named(err, "/b") is err
    full = statefile.named(OSError(errno.ENOSPC, "No space left on device"), "/s/x.json")
    assert (full.errno, full.filename) == (errno.ENOSPC, "/s/x.json")

