"""Every build.py command line the fault suite's trials run parses, for both projects
(tests/faults: a run that exits 2 on its arguments would be a fault no trial injected)."""

from __future__ import annotations

import pytest

from stagecraft.cli import _parse
from tests.faults.rig import PROJECTS, Rig
from tests.faults.trials import command


@pytest.mark.parametrize("key", sorted(PROJECTS))
def test_every_trial_command_line_parses(tmp_path, monkeypatch, key):
    monkeypatch.setattr(Rig, "push_to", property(lambda self: "127.0.0.1:5001"))  # no engine here
    rig = Rig(tmp_path / "work", PROJECTS[key])
    tag = next(iter(rig.project.tags))
    lines = [command(tag, push, rig, json_out=j, test=t)
             for push in (False, True) for j in (False, True) for t in (False, True)]
    lines += [["push", "--tag", tag, "--registry", rig.push_to],
              ["verify", f"{rig.push_to}/{rig.project.repository}:{tag}", "--key", "cosign.pub"]]
    for line in lines:
        argv = rig.argv(*line)[2:]  # without the interpreter and build.py
        assert _parse(argv).command == line[0], argv
        assert ("--platform" in argv) == (rig.project.host_platform_only and line[0] in ("build", "test")), argv


def test_push_takes_no_platform():
    """Why the real project's pushes go without --platform (push pushes what was built)."""
    with pytest.raises(SystemExit) as exc:
        _parse(["push", "--tag", "2.6.2-cpu", "--registry", "127.0.0.1:5001", "--platform", "linux/amd64"])
    assert exc.value.code == 2
