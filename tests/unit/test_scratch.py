"""A run's scratch directory and its stage logs (issue 13, item 7), with real processes:
a dead run's directory is removed by the next run, a live one is left alone, and a
stage log held by one process is not truncated by another."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from stagecraft.scratch import claimed_log, run_scratch, start_time, sweep

ROOT = Path(__file__).resolve().parents[2]


def test_a_dead_runs_directory_is_swept_a_live_one_kept(tmp_path):
    proc = subprocess.Popen(["sleep", "60"])
    dead = tmp_path / f"run-{proc.pid}-{start_time(proc.pid)}"
    proc.kill()
    proc.wait()
    reused = tmp_path / f"run-{os.getpid()}-1"  # this pid, another start time: a dead run
    live = tmp_path / f"run-{os.getpid()}-{start_time(os.getpid())}"
    other = tmp_path / "run-notours"
    young = tmp_path / "run-999999999-1"  # no such pid, but made just now: maybe being made
    for d in (dead, reused, live, other, young):
        (d / "tmp1" / "context").mkdir(parents=True)
    for d in (dead, reused, live, other):
        _age(d)
    assert sorted(sweep(tmp_path)) == sorted([dead, reused])
    assert live.is_dir() and other.is_dir() and young.is_dir() and not dead.exists() and not reused.exists()
    _age(young)
    assert sweep(tmp_path) == [young]
    ahead = tmp_path / "run-999999999-2"  # dated an hour ahead (a clock stepped back)
    ahead.mkdir()
    _age(ahead, -3600.0)
    assert sweep(tmp_path) == [ahead]


def _age(directory: Path, seconds: float = 3600.0) -> None:
    """Set ``directory``'s times ``seconds`` back: a dead run's directory, not one being made."""
    then = time.time() - seconds
    os.utime(directory, (then, then))


def test_everything_temporary_lives_in_the_runs_directory(tmp_path):
    before = tempfile.tempdir
    with run_scratch(str(tmp_path)) as mine:
        assert mine.parent == tmp_path / f"stagecraft-{os.getuid()}"
        with tempfile.TemporaryDirectory(prefix="stagecraft-ctx-") as ctx:
            assert Path(ctx).parent == mine
        kept = Path(tempfile.mkdtemp())
        assert kept.parent == mine
    assert not mine.exists() and not kept.exists()
    assert tempfile.tempdir == before


def test_a_held_stage_log_is_not_taken_by_another_process(tmp_path):
    log = tmp_path / "logs" / "label-0123456789ab.log"
    script = ("import sys; from pathlib import Path; from stagecraft.scratch import claimed_log\n"
              "with claimed_log(Path(sys.argv[1])) as p:\n"
              "    p.write_text('second run\\n'); print(p)")
    with claimed_log(log) as mine:
        assert mine == log
        mine.write_text("first run, still building\n")
        proc = subprocess.run([sys.executable, "-c", script, str(log)], capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        theirs = Path(proc.stdout.strip())
        assert theirs != log and theirs.name.startswith("label-0123456789ab.") and theirs.suffix == ".log"
        assert log.read_text() == "first run, still building\n", "the other run truncated this log"
    with claimed_log(log) as again:  # free once the first run let go
        assert again == log


def _stale(tmp_path: Path) -> Path:
    stale = tmp_path / f"stagecraft-{os.getuid()}" / "run-999999999-1"  # no such pid
    (stale / "rootfs").mkdir(parents=True)
    _age(stale)
    return stale


def test_a_run_that_ends_sweeps_dead_runs_a_refused_one_does_not(tmp_path):
    """The sweep comes as a run ends that was not refused: after a normal end and after a
    failure, a dead run's directory is gone; after an ``InputError`` it is left as it was."""
    from stagecraft.errors import InputError

    stale = _stale(tmp_path)
    with pytest.raises(InputError), run_scratch(str(tmp_path)):
        assert stale.is_dir(), "swept as the run started"
        raise InputError.one("--tag x", "no such tag", "pass a tag from --list")
    assert (stale / "rootfs").is_dir(), "a refused run swept a dead run's directory"
    with pytest.raises(RuntimeError), run_scratch(str(tmp_path)):
        raise RuntimeError("a build failed")
    assert not stale.exists()
    stale = _stale(tmp_path)
    with run_scratch(str(tmp_path)) as mine:
        pass
    assert not stale.exists() and not mine.exists()


def test_a_command_that_runs_sweeps_dead_runs(tmp_path):
    """``build.py list`` on the real matrix, the counterpart of test_argcheck's refused runs."""
    stale = _stale(tmp_path)
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists()


def test_a_refused_run_makes_nothing_in_an_empty_tmpdir(tmp_path):
    """Review s29: the refused run made $TMPDIR/stagecraft-UID and left it. It takes back
    the base it made (when empty) along with its own directory."""
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "push", "2.6.2-cpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused run left a directory in $TMPDIR"


_LIVE = """
import sys, time
sys.path.insert(0, sys.argv[2])
from stagecraft.scratch import run_scratch
with run_scratch(sys.argv[1]) as mine:
    print(mine, flush=True)
    sys.stdin.readline()
    print(mine.exists(), flush=True)
"""
_END = """
import sys
sys.path.insert(0, sys.argv[2])
from stagecraft.scratch import run_scratch
with run_scratch(sys.argv[1]):
    pass
"""


def test_a_live_run_in_another_pid_namespace_is_not_swept(tmp_path):
    """Review s29: two runs sharing $TMPDIR from two pid namespaces (a build in a container
    with the host's /tmp mounted): judged by pid and start time alone, the live run's
    directory looked dead to the other, which removed it as it ended. The run's lock
    (flock on .lock) tells across namespaces."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a pid namespace")
    live = subprocess.Popen([sys.executable, "-c", _LIVE, str(tmp_path), str(ROOT)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert live.stdout is not None and live.stdin is not None
    try:
        mine = Path(live.stdout.readline().strip())
        subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", _END, str(tmp_path),
                        str(ROOT)], check=True, timeout=60)
        live.stdin.write("\n")
        live.stdin.flush()
        still = live.stdout.readline().strip()
    finally:
        live.stdin.close()
        live.wait(timeout=30)
    assert mine.name.startswith("run-") and still == "True", "a live run's directory was removed"
    assert not mine.exists(), "the live run's own end did not remove its directory"


def test_a_dead_runs_locked_directory_is_swept(tmp_path):
    """A run killed with SIGKILL leaves its directory and lock file; the lock went with
    the process, so the next run's sweep removes it, even under a name that looks alive."""
    script = ("import sys, time; sys.path.insert(0, sys.argv[2])\n"
              "from stagecraft.scratch import run_scratch\n"
              "with run_scratch(sys.argv[1]) as mine:\n"
              "    (mine / 'big').write_bytes(b'x' * 1000); print(mine, flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(ROOT)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    left = Path(proc.stdout.readline().strip())
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert (left / "big").is_file() and (left / ".lock").is_file()
    alias = left.parent / f"run-{os.getpid()}-{start_time(os.getpid())}"  # this live process's name
    left.rename(alias)
    assert sweep(left.parent) == [alias] and not alias.exists()


def test_a_sweep_at_the_instant_a_run_locks_leaves_the_run_alone(tmp_path, monkeypatch):
    """Review s41: the run made ``.lock`` and then flock-ed it; another run's sweep in
    between found the lock free and removed the live run's directory. At that instant (a
    stand-in flock that runs another process's sweep first), the directory must stay."""
    import fcntl

    real_flock = fcntl.flock
    swept: list[str] = []

    def flock_after_a_sweep(fd, operation):
        if operation == fcntl.LOCK_EX and not swept:
            where = os.readlink(f"/proc/self/fd/{fd}")
            proc = subprocess.run([sys.executable, "-c", _SWEEP, str(Path(where).parents[1]), str(ROOT)],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            swept.append(proc.stdout.strip())
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_sweep)
    with run_scratch(str(tmp_path)) as mine:
        assert swept == ["[]"], "the sweep did not run at the instant the run locked"
        assert mine.is_dir(), "another run's sweep removed this live run's directory"
        (mine / "context").mkdir()
    assert not mine.exists()


_SWEEP = """import sys; sys.path.insert(0, sys.argv[2])
from pathlib import Path
from stagecraft.scratch import sweep
print([str(p) for p in sweep(Path(sys.argv[1]))])
"""


_SLOW_SWEEP = """import sys, time, fcntl; sys.path.insert(0, sys.argv[2])
real_flock = fcntl.flock

def late_flock(fd, operation):
    print("opened", flush=True)
    sys.stdin.readline()  # held here, between its open of .lock and its flock
    return real_flock(fd, operation)

fcntl.flock = late_flock
from pathlib import Path
from stagecraft.scratch import sweep
print([str(p) for p in sweep(Path(sys.argv[1]))], flush=True)
"""


def test_a_sweep_that_opened_an_ended_runs_lock_leaves_the_next_run_of_that_name_alone(tmp_path):
    """Review s41: a sweep opened a live run's ``.lock``; that run ended (its directory
    and lock removed) and a new run made the same name (same pid and start time: the same
    process, or one in another pid namespace); the sweep then took the lock of the removed
    file and removed the new, live directory by its path. It must check that the file it
    locked is still the one at ``.lock``."""
    with run_scratch(str(tmp_path)) as first:
        sweeper = subprocess.Popen([sys.executable, "-c", _SLOW_SWEEP, str(first.parent), str(ROOT)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert sweeper.stdout is not None and sweeper.stdin is not None
        assert sweeper.stdout.readline().strip() == "opened"
    with run_scratch(str(tmp_path)) as second:
        assert second == first, "not the same name: the case is not reached"
        (second / "work").write_text("in use")
        sweeper.stdin.write("\n")
        sweeper.stdin.flush()
        said = sweeper.stdout.readline().strip()
        sweeper.wait(timeout=60)
        assert said == "[]" and (second / "work").is_file(), "a sweep removed a live run's directory"


def test_a_lock_that_cannot_be_made_leaves_no_directory(tmp_path, monkeypatch):
    """Where the lock cannot be put in place (a file system that refuses the rename: a
    stand-in ``os.rename``), the run fails before it starts and takes its directory back:
    no directory with only a half-made lock is left to pile up."""
    def refused(src, dst, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "rename", refused)
    with pytest.raises(PermissionError), run_scratch(str(tmp_path)):
        pass
    monkeypatch.undo()
    assert list((tmp_path / f"stagecraft-{os.getuid()}").iterdir()) == []
