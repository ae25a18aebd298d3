"""A run killed (SIGKILL, which no handler holds) inside its tag phase: the next run puts
its names back (stagecraft/tagrecovery.py). The killed run is a real process running
tagging.apply_tags; the engine is a stand-in at the engine's interface (names kept in a
JSON file both processes share), as slow per name as the test needs to kill it half-way.
The real engine's side is the fault suite (tests/faults, tests/integration/test_faults.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stagecraft import tagrecovery
from stagecraft.errors import BuildError
from stagecraft.tagging import TagJournal, apply_tags

ENGINE_KEY = "engine-under-test"

CHILD = r"""
import json, sys, time
from pathlib import Path
from stagecraft.tagging import TagJournal, apply_tags
sys.path.insert(0, sys.argv[3])
from test_tagrecovery import FileEngine
engine = FileEngine(Path(sys.argv[1]), delay=float(sys.argv[4]))
moves = json.loads(sys.argv[2])
apply_tags(engine, [tuple(m) for m in moves], TagJournal(), 1, print, (Path(sys.argv[5]), sys.argv[6]))
print("done", flush=True)
"""


class FileEngine:
    """Names -> image ids in a JSON file (the engine's name table); ``delay`` s per tag."""

    def __init__(self, path: Path, delay: float = 0.0):
        self.path, self.delay = path, delay

    def _load(self) -> dict:
        return json.loads(self.path.read_text())

    def _save(self, names: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(names))
        os.replace(tmp, self.path)

    gone: frozenset = frozenset()  # image ids the engine no longer holds (pruned)
    fail_at: str = ""  # a name whose tag the engine refuses (it stopped answering)

    def image_id(self, ref: str) -> str | None:
        if ref.startswith("sha256:"):
            return None if ref in self.gone else ref
        return self._load().get(ref)

    def tag(self, image_id: str, ref: str) -> None:
        time.sleep(self.delay)
        if ref == self.fail_at:
            raise ConnectionError("Connection aborted.")
        self._save({**self._load(), ref: image_id})

    def untag(self, ref: str) -> None:
        names = self._load()
        names.pop(ref, None)
        self._save(names)


def _killed_mid_phase(tmp_path: Path, moves: list[tuple[str, str]]) -> FileEngine:
    """Run apply_tags in a child and SIGKILL it once it moved one name of ``moves``."""
    engine = FileEngine(tmp_path / "names.json")
    state = tmp_path / "state"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(engine.path), json.dumps(moves),
                              str(Path(__file__).parent), "0.3", str(state), ENGINE_KEY],
                             stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and engine.image_id(moves[0][0]) != moves[0][1]:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    return engine


def test_a_sigkilled_phase_is_put_back_by_the_next_run(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"})  # r/x:latest is new
    moves = [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new"), ("r/x:latest", "sha256:new")]
    _killed_mid_phase(tmp_path, moves)
    split = engine._load()
    assert split["r/x:1.0"] == "sha256:new" and split.get("r/x:latest") is None  # half-way
    said: list[str] = []
    back = tagrecovery.recover_now(engine, tmp_path / "state", ENGINE_KEY, said.append)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}
    assert back and set(back) <= {m[0] for m in moves}
    assert any(s.startswith("recovered: a run (pid") and "name(s) put back" in s for s in said), said
    assert list((tmp_path / "state" / "tags").glob("pending-*")) == []


def test_a_name_moved_since_the_crash_is_left_where_it_is(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"})
    moves = [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")]
    _killed_mid_phase(tmp_path, moves)
    engine.tag("sha256:someone-else", "r/x:1.0")
    # The next build's own tag phase recovers first, then moves its names.
    apply_tags(engine, [("r/x:1", "sha256:third")], TagJournal(), 1, lambda s: None,
               (tmp_path / "state", ENGINE_KEY))
    assert engine._load() == {"r/x:1.0": "sha256:someone-else", "r/x:1": "sha256:third"}


def test_two_runs_tag_phases_do_not_overlap(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({})
    state = tmp_path / "state"
    first = [(f"r/x:{i}", "sha256:a") for i in range(4)]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(engine.path), json.dumps(first),
                              str(Path(__file__).parent), "0.6", str(state), ENGINE_KEY],
                             stdout=subprocess.PIPE, text=True)
    while engine.image_id("r/x:0") is None:
        time.sleep(0.01)
    said: list[str] = []
    apply_tags(engine, [(f"r/x:{i}", "sha256:b") for i in range(4)], TagJournal(), 1, said.append,
               (state, ENGINE_KEY))
    assert child.wait(30) == 0
    # The second phase waited for the whole first one: every name is the second run's.
    assert engine._load() == {f"r/x:{i}": "sha256:b" for i in range(4)}
    assert any("waiting for another run's tag phase" in s for s in said)


def test_an_unreadable_record_is_set_aside_and_said(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1": "sha256:old"})
    lock, pending = tagrecovery._paths(tmp_path, ENGINE_KEY)
    pending.parent.mkdir(parents=True)
    pending.write_text('{"schema": 1, "moves": [["r/x:1", "sha')
    said: list[str] = []
    assert tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, said.append) == []
    assert len(list(pending.parent.glob("*.unreadable"))) == 1 and not pending.exists()
    assert "unreadable" in said[0] and engine._load() == {"r/x:1": "sha256:old"}


def _pending_record(state: Path, before: dict, moves: list, begun: int | None = None) -> Path:
    """A dead run's record, as ``begin`` writes it, with progress marks for the first
    ``begun`` names (default: every name) as ``apply_tags`` makes them before each move."""
    _, pending = tagrecovery._paths(state, ENGINE_KEY)
    pending.parent.mkdir(parents=True, exist_ok=True)
    progress = tagrecovery.begin(pending, moves, before)
    for i in range(len(moves) if begun is None else begun):
        progress.mark(i)
    progress.close()
    return pending


def test_a_pruned_image_before_leaves_the_names_on_the_new_one_and_settles(tmp_path):
    """The dead run moved every name; its old image was pruned since: the names stay on
    the (tested, complete) new image, the record goes and the next run goes on."""
    engine = FileEngine(tmp_path / "names.json")
    engine.gone = frozenset({"sha256:old"})
    engine._save({"r/x:1.0": "sha256:new", "r/x:1": "sha256:new"})
    pending = _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                              [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")])
    said: list[str] = []
    apply_tags(engine, [("r/x:1.0", "sha256:newer"), ("r/x:1", "sha256:newer")], TagJournal(), 1,
               said.append, (tmp_path, ENGINE_KEY))
    assert engine._load() == {"r/x:1.0": "sha256:newer", "r/x:1": "sha256:newer"}
    assert not pending.exists()
    assert any("2 left on its tested new image" in s for s in said), said


def test_recovery_that_fails_half_way_says_what_it_put_back_and_keeps_the_record(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:new", "r/x:1": "sha256:new"})
    engine.fail_at = "r/x:1.0"  # the engine goes away after the alias was put back
    pending = _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                              [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")])
    with pytest.raises(BuildError, match=r"putting back its name r/x:1.0 failed .*put back so far: r/x:1;"):
        tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert pending.exists()  # the next run finishes it
    engine.fail_at = ""
    tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"} and not pending.exists()


def test_unreadable_records_are_set_aside_without_replacing_an_earlier_one(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({})
    _, pending = tagrecovery._paths(tmp_path, ENGINE_KEY)
    pending.parent.mkdir(parents=True)
    for text in ("{", "[1"):
        pending.write_text(text)
        tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
        time.sleep(1.1)  # the set-aside name carries the second
    kept = sorted(p.read_text() for p in pending.parent.glob("*.unreadable"))
    assert kept == ["[1", "{"]


def test_a_fifo_at_the_record_path_is_refused_and_left(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine._save({})
    _, pending = tagrecovery._paths(tmp_path, ENGINE_KEY)
    pending.parent.mkdir(parents=True)
    os.mkfifo(pending)
    with pytest.raises(BuildError, match="is not a file this tool wrote"):
        tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    import stat

    assert stat.S_ISFIFO(os.lstat(pending).st_mode)


class ReturningEngine(FileEngine):
    """The engine stops answering (ConnectionError, as requests raises it for a closed
    socket) at the tag of ``fail_at`` and answers nothing until ``back_at`` (a
    time.monotonic()); with ``lose``, the name being moved is lost first, as the
    containerd image store's delete-then-create loses it when the engine dies inside."""

    back_at: float = 0.0
    lose: bool = False

    def _down(self) -> bool:
        return time.monotonic() < self.back_at

    def image_id(self, ref: str) -> str | None:
        if self._down():
            raise ConnectionError("Connection refused")
        return super().image_id(ref)

    def tag(self, image_id: str, ref: str) -> None:
        if self._down():
            raise ConnectionError("Connection refused")
        if ref == self.fail_at:
            self.fail_at, self.back_at = "", time.monotonic() + 1.5
            if self.lose:
                self.untag(ref)
            raise ConnectionError("('Connection aborted.', RemoteDisconnected())")
        super().tag(image_id, ref)

    def untag(self, ref: str) -> None:
        if self._down():
            raise ConnectionError("Connection refused")
        super().untag(ref)


@pytest.mark.parametrize("lose", [False, True])
def test_an_engine_back_within_the_wait_gets_every_name_put_back_in_the_run(tmp_path, lose):
    engine = ReturningEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"})
    engine.fail_at, engine.lose = "r/x:1", lose
    said: list[str] = []
    journal = TagJournal()
    with pytest.raises(BuildError) as err:
        apply_tags(engine, [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")], journal, 1,
                   said.append, (tmp_path, ENGINE_KEY))
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}
    assert journal.state == "restored" and not journal.stuck
    assert "the Docker engine stopped answering" in str(err.value)
    assert "no tag was moved (2 name(s) already moved were put back)" in str(err.value)
    assert any("waiting up to" in s for s in said) and any("answers again" in s for s in said)
    assert list((tmp_path / "tags").glob("pending-*")) == []


def test_a_name_the_engine_lost_inside_its_move_is_put_back_by_the_next_run(tmp_path):
    """The engine died inside the alias's move (delete done, create not): the record's
    name is absent, and recovery gives it its image before, not "moved by someone"."""
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:new"})  # r/x:1 lost
    pending = _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                              [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")])
    back = tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}
    assert sorted(back) == ["r/x:1", "r/x:1.0"] and not pending.exists()


def test_a_lost_name_whose_image_before_is_pruned_goes_to_the_new_image(tmp_path):
    engine = FileEngine(tmp_path / "names.json")
    engine.gone = frozenset({"sha256:old"})
    engine._save({"r/x:1.0": "sha256:new"})
    _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                    [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")])
    tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:new", "r/x:1": "sha256:new"}


def test_an_engine_that_stays_away_leaves_the_record_and_says_the_next_run_finishes(tmp_path, monkeypatch):
    engine = ReturningEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"})
    engine.fail_at = "r/x:1"
    monkeypatch.setattr("stagecraft.tagging.ENGINE_RETURN_S", 0.5)  # the engine is back at 1.5 s
    journal = TagJournal()
    with pytest.raises(BuildError) as err:
        apply_tags(engine, [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")], journal, 1,
                   lambda s: None, (tmp_path, ENGINE_KEY))
    assert journal.state == "partial" and journal.stuck == ["r/x:1.0", "r/x:1"]
    assert "`build.py build` or `push` on this state directory puts them back before anything else" in str(err.value)
    time.sleep(1.5)
    tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}


def test_a_name_the_dead_run_never_began_to_move_is_left_as_found(tmp_path):
    """The run died after moving r/x:1.0, before it began r/x:1; then somebody removed
    r/x:1 (docker rmi): recovery puts r/x:1.0 back and does not bring r/x:1 back."""
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:new"})
    pending = _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                              [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")], begun=1)
    said: list[str] = []
    assert tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, said.append) == ["r/x:1.0"]
    assert engine._load() == {"r/x:1.0": "sha256:old"}
    assert "1 of 1 name(s) put back" in said[-1]
    assert not pending.exists() and not pending.with_suffix(".progress").exists()


def test_a_record_without_progress_counts_every_name_as_begun(tmp_path):
    """A record of a version before progress marks: every name is settled as before."""
    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:new"})
    pending = _pending_record(tmp_path, {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"},
                              [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")])
    pending.with_suffix(".progress").unlink()
    tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}


def test_an_interrupted_phase_with_the_engine_away_does_not_say_it_waits(tmp_path):
    """Ctrl-C (held) during the phase, and the engine gone as the names go back: no wait
    (the user asked to stop), no claim of one, the cause names both; the record stays."""
    import signal as sig

    engine = ReturningEngine(tmp_path / "names.json")
    engine._save({"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"})
    real_tag = engine.tag

    def tag(image_id: str, ref: str) -> None:
        real_tag(image_id, ref)
        if ref == "r/x:1.0":
            os.kill(os.getpid(), sig.SIGINT)  # held by apply_tags
            engine.back_at = time.monotonic() + 1.0

    engine.tag = tag  # type: ignore[method-assign]
    said: list[str] = []
    journal = TagJournal()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        apply_tags(engine, [("r/x:1.0", "sha256:new"), ("r/x:1", "sha256:new")], journal, 1,
                   said.append, (tmp_path, ENGINE_KEY))
    assert time.monotonic() - t0 < 0.9 and not any("waiting" in s for s in said), said
    assert journal.state == "partial" and journal.cause == "interrupted, and the Docker engine did not answer"
    time.sleep(1.0)
    engine.tag = real_tag  # type: ignore[method-assign]
    tagrecovery.recover_now(engine, tmp_path, ENGINE_KEY, lambda s: None)
    assert engine._load() == {"r/x:1.0": "sha256:old", "r/x:1": "sha256:old"}


class HungEngine(FileEngine):
    """Answers nothing once ``hung`` (each call times out after CALL_S, as requests'
    ReadTimeout after the client's timeout)."""

    CALL_S = 0.3
    hung = False
    calls = 0  # calls made while hung

    def _maybe(self) -> None:
        if self.hung:
            self.calls += 1
            time.sleep(self.CALL_S)
            raise ConnectionError("Read timed out.")

    def image_id(self, ref: str) -> str | None:
        self._maybe()
        return super().image_id(ref)

    def tag(self, image_id: str, ref: str) -> None:
        self._maybe()
        super().tag(image_id, ref)
        if ref == "r/x:3":
            self.hung = True


def test_the_wait_for_a_hung_engine_is_bounded_call_by_call(tmp_path, monkeypatch):
    """An engine that takes each call to its timeout: the wait stops at ENGINE_RETURN_S
    plus at most one call, not after every name's calls."""
    monkeypatch.setattr("stagecraft.tagging.ENGINE_RETURN_S", 0.5)
    engine = HungEngine(tmp_path / "names.json")
    names = [f"r/x:{i}" for i in range(1, 7)]
    engine._save({n: "sha256:old" for n in names})
    with pytest.raises(BuildError):
        apply_tags(engine, [(n, "sha256:new") for n in names], TagJournal(), 1, lambda s: None,
                   (tmp_path, ENGINE_KEY))
    # r/x:4's move timed out; one pass puts back r/x:4..1 (4 calls, 1.2 s, past the
    # 0.5 s wait): no second pass starts. (Before, the deadline was read only between
    # passes: 4 more calls, each up to the client's timeout, signals held.)
    assert engine.calls == 1 + 4


def test_a_fifo_at_the_progress_path_is_refused_before_any_name_moves(tmp_path):
    """Something other than a file of ours where the progress goes: no wait on a FIFO,
    no name moved, the FIFO left."""
    import stat

    engine = FileEngine(tmp_path / "names.json")
    engine._save({"r/x:1": "sha256:old"})
    _, pending = tagrecovery._paths(tmp_path, ENGINE_KEY)
    pending.parent.mkdir(parents=True)
    os.mkfifo(pending.with_suffix(".progress"))
    with pytest.raises(BuildError, match=r"tagging not started: cannot write .*\.progress \(.*\); no tag was moved"):
        apply_tags(engine, [("r/x:1", "sha256:new")], TagJournal(), 1, lambda s: None,
                   (tmp_path, ENGINE_KEY))
    assert engine._load() == {"r/x:1": "sha256:old"}
    assert stat.S_ISFIFO(os.lstat(pending.with_suffix(".progress")).st_mode) and not pending.exists()
