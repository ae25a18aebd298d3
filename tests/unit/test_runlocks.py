"""Locks between runs on one state directory (stagecraft/runlocks.py), with real
processes holding them: a second holder waits and says so once, a dead holder (even
SIGKILLed) never keeps it waiting, and a symbolic link is never followed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stagecraft import runlocks
from stagecraft.bases import BaseImage
from stagecraft.builder import _base_lock
from tests.conftest import ROOT

HOLD = """
import sys, time
from pathlib import Path
from stagecraft import runlocks
with runlocks.held(Path(sys.argv[1]), "x", print):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)  # only SIGKILL is sent, which no disposition changes
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_waits_says_who_holds_it_and_then_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(runlocks, "NOTE_EVERY_S", 0.6)  # a note a minute, in a test's time
    path = runlocks.lock_path(tmp_path / "bases", "engine-a", "stagecraft-base/debian:bookworm-amd64-0123")
    said: list[str] = []
    proc = _holder(path, 2.5)
    t0 = time.monotonic()
    with runlocks.held(path, "the other run", said.append):
        waited = time.monotonic() - t0
        assert waited > 2.2, "held while the other process still held it"
        assert path.read_text() == f"{os.getpid()}\n"
    assert waited > runlocks.NOTE_AFTER_S and len(said) >= 2, said
    assert said[0] == f"waiting for the other run (held by pid {proc.pid}, 1 s so far; {path})"
    assert all(n.startswith(f"waiting for the other run (held by pid {proc.pid}, ") for n in said)
    proc.wait()


def test_a_sigkilled_holder_never_keeps_the_next_run_waiting(tmp_path):
    path = tmp_path / "x.lock"
    proc = _holder(path, 600)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    said: list[str] = []
    with runlocks.held(path, "waiting", said.append):
        pass
    assert said == []


def test_locks_are_per_engine_and_name():
    folder = Path("/s/bases")
    a = runlocks.lock_path(folder, "engine-a", "base:1")
    assert a != runlocks.lock_path(folder, "engine-b", "base:1") != runlocks.lock_path(folder, "engine-a", "base:2")
    assert a == runlocks.lock_path(folder, "engine-a", "base:1") and a.parent == folder


def test_a_symbolic_link_at_the_lock_path_is_not_followed(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep")
    link = tmp_path / "x.lock"
    link.symlink_to(target)
    with pytest.raises(OSError), runlocks.held(link, "waiting", print):
        pass
    assert target.read_text() == "keep"


def _base() -> BaseImage:
    return BaseImage(name="deb12", source="bootstrap", ref="stagecraft-base/debian:bookworm-amd64-0123",
                     identity="x")


def test_a_bootstrapped_base_waits_for_the_run_making_it(tmp_path):
    locks = (tmp_path / "bases", "engine-a")
    path = runlocks.lock_path(*locks, _base().ref)
    proc = _holder(path, 2.0)
    said: list[str] = []
    t0 = time.monotonic()
    with _base_lock(_base(), locks, said.append):
        assert time.monotonic() - t0 > 1.7, "held while the other process still held it"
    assert said == [f"waiting for another run to make or find base deb12 (held by pid {proc.pid}, 1 s so far; {path})"]
    # A pulled base takes no lock (the same digest gives the same image).
    proc = _holder(path, 600)
    try:
        pulled = BaseImage(name="deb12", source="pull", ref=_base().ref, identity="y")
        with _base_lock(pulled, locks, said.append):
            pass
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(said) == 1


def test_a_lock_that_cannot_be_made_leaves_the_base_made_without_it_and_says_so(tmp_path):
    (tmp_path / "bases").write_text("a file where the lock folder would be")
    said: list[str] = []
    with _base_lock(_base(), (tmp_path / "bases", "engine-a"), said.append):
        pass
    assert len(said) == 1 and said[0].startswith("base deb12: no lock against another run making it at the same "
                                                 f"time ({tmp_path / 'bases'}/") and said[0].endswith("going on without")


def test_a_folder_or_file_someone_else_placed_is_refused_and_left_alone(tmp_path):
    """/run/lock is writable by every user: a link, a shared folder or a hard link placed
    at the lock's path never leads the run to write (or truncate) another file."""
    precious = tmp_path / "precious"
    precious.write_text("keep")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError), runlocks.held(tmp_path / "linked" / "x.lock", "w", print):
        pass
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(OSError), runlocks.held(shared / "x.lock", "w", print):
        pass
    mine = tmp_path / "mine"
    mine.mkdir()
    os.link(precious, mine / "x.lock")
    with pytest.raises(OSError), runlocks.held(mine / "x.lock", "w", print):
        pass
    os.mkfifo(mine / "y.lock")
    with pytest.raises(OSError), runlocks.held(mine / "y.lock", "w", print):
        pass
    assert precious.read_text() == "keep" and list((tmp_path / "elsewhere").iterdir()) == []
