"""The tag phase holds SIGINT and SIGTERM (real signals to this process) and its journal
words what the engine holds; the engine side is tests/integration/test_build_behaviour.py
(test_tag_phase_is_all_or_nothing_under_signals)."""

from __future__ import annotations

import os
import signal

from stagecraft.tagging import TagJournal, held_signals


def test_signals_are_held_inside_and_restored_after():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with held_signals() as pending:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # Python runs handlers between bytecodes: give it some
            pass
    assert pending == [signal.SIGINT, signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_journal_words_each_state():
    assert TagJournal().interrupted().startswith("interrupted: no tag was moved;")
    moved = [f"r/x:{i}" for i in range(10)]
    done = TagJournal("done", moved, images=2)
    assert done.interrupted().startswith(
        "interrupted after tagging: every tag of the run was moved (10 name(s) of 2 image(s)")
    assert "and 4 more" in done.summary()
    back = TagJournal("restored", moved)
    assert back.interrupted().startswith("interrupted: no tag was moved (10 name(s) already "
                                         "moved were put back)")
    part = TagJournal("partial", moved, stuck=moved[:2], cause="engine gone")
    assert "2 of 10 name(s) could not be put back (engine gone): r/x:0, r/x:1" in part.summary()
