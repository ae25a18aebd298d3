"""The run context (stagecraft/pipeline/context.py): the typed options of a parsed command
line, and the state directory and image choice that every command of a run shares, each
made once. The real command line parses; the real matrix is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from stagecraft import cli
from stagecraft.errors import InputError
from stagecraft.pipeline.context import MAX_TAG, Options, RunContext
from stagecraft.tagging import TagJournal

ROOT = Path(__file__).resolve().parents[2]
MATRIX = str(ROOT / "matrix.yaml")


def _context(**opts) -> RunContext:
    return RunContext(Options(matrix=MATRIX, **opts), TagJournal())


def test_options_take_what_was_given_and_default_what_the_command_lacks():
    opts = Options.from_args(cli._parse(["matrix", "--format", "github", "--tag", "a", "-t", "b"]))
    assert opts.format == "github" and opts.tag == ("a", "b"), opts
    # `matrix` has no --jobs, --state-dir or --push: the defaults a build would have
    assert (opts.jobs, opts.state_dir, opts.push, opts.retries) == (1, None, False, 3), opts
    opts = Options.from_args(cli._parse(["--tag", "x", "--jobs", "3", "--push", "--state-dir", "S"]))
    assert (opts.jobs, opts.push, opts.state_dir, opts.test) == (3, True, "S", False), opts


def test_the_context_carries_the_runs_journal():
    args = cli._parse(["list"])
    args.journal = TagJournal()
    assert RunContext.from_args(args).journal is args.journal


def test_the_state_dir_is_checked_without_being_made_then_made_once(tmp_path):
    state = tmp_path / "deep" / "state"
    ctx = _context(state_dir=str(state))
    assert ctx.state_dir(create=False) == state
    assert not state.exists(), "a check made the directory"
    assert ctx.state_dir() == state and state.is_dir()
    assert ctx.state_dir() == state and ctx.state_dir(create=False) == state


def test_a_state_dir_that_is_a_file_is_refused_and_nothing_is_made(tmp_path):
    taken = tmp_path / "file"
    taken.write_text("x")
    ctx = _context(state_dir=str(taken / "below"))
    for create in (False, True):
        with pytest.raises(InputError) as exc:
            ctx.state_dir(create=create)
        (problem,) = exc.value.problems
        assert problem.where.startswith("--state-dir ") and str(taken) in problem.where, problem
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_default_state_dir_is_beside_the_matrix():
    assert _context().state_dir(create=False) == ROOT / ".stagecraft"


def test_select_names_tags_refuses_long_and_empty_choices():
    ctx = _context(tag=("2.6.2-cpu", "2.6.2-cpu"))
    assert [s.tag for s in ctx.select(default_all=False)] == ["2.6.2-cpu"], "a tag twice is one image"
    assert _context(all=True).select(default_all=False) == _context().specs
    assert len(_context().select(default_all=True)) == len(_context().specs) > 1
    with pytest.raises(InputError, match="no image chosen"):
        _context().select(default_all=False)
    with pytest.raises(InputError, match=f"longer than {MAX_TAG} characters"):
        _context(tag=("x" * (MAX_TAG + 1),)).select(default_all=False)
    with pytest.raises(InputError):
        _context(tag=("no-such-tag",)).select(default_all=False)
