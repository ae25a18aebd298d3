"""The image suites' ``host`` runs a command again when runc could not start it in the
container (tests/image/conftest.py ``StartedExecDocker``): fault suite seed 20261398,
trial 42, read runc's words as a listing of /tmp ("build leftovers: ['OCI', 'runtime',
...]"). The docker CLI is a stand-in at the lowest level: a script on PATH that answers
``docker exec`` as the real one did, then as a working one."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAID = ("OCI runtime exec failed: exec failed: unable to start container process: waiting for init "
        "preliminary setup: read init-p: connection reset by peer: unknown")


@pytest.fixture
def image_conftest():
    spec = importlib.util.spec_from_file_location("image_conftest", ROOT / "tests" / "image" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def standin_docker(tmp_path: Path, monkeypatch, answers: list[tuple[str, int]]) -> Path:
    """A docker CLI on PATH whose Nth call prints ``answers[N]``'s text and exits with its
    code (the last answer repeats); each call's argv goes to ``calls``."""
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    cli = tmp_path / "bin" / "docker"
    cli.parent.mkdir()
    cli.write_text(f"""#!/usr/bin/env python3
import json, sys
from pathlib import Path
calls = Path({str(tmp_path / "calls")!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
with open(calls, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
answers = json.loads(Path({str(tmp_path / "answers.json")!r}).read_text())
text, rc = answers[min(n, len(answers) - 1)]
print(text)
sys.exit(rc)
""")
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{cli.parent}:{os.environ['PATH']}")
    return tmp_path / "calls"


def calls(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_command_runc_could_not_start_is_run_again(image_conftest, tmp_path, monkeypatch):
    log = standin_docker(tmp_path, monkeypatch, [(SAID, 126), ("", 0)])
    out = image_conftest.StartedExecDocker("c0ffee").run("find /tmp -mindepth 1")
    assert (out.rc, out.stdout) == (0, "\n")
    made = calls(log)
    assert len(made) == 2 and made[0] == made[1] and made[0][:2] == ["exec", "c0ffee"]


def test_never_started_three_times_the_last_answer_stands(image_conftest, tmp_path, monkeypatch):
    log = standin_docker(tmp_path, monkeypatch, [(SAID, 126)])
    out = image_conftest.StartedExecDocker("c0ffee").run("true")
    assert out.rc == 126 and image_conftest.EXEC_NOT_STARTED in out.stdout
    assert len(calls(log)) == image_conftest.EXEC_TRIES


@pytest.mark.parametrize("answer", [("sh: 1: ./x: Permission denied", 126), ("", 1), ("/tmp/leftover", 0)],
                         ids=["126-of-the-command", "failed", "succeeded"])
def test_what_the_command_itself_answered_stands(image_conftest, tmp_path, monkeypatch, answer):
    log = standin_docker(tmp_path, monkeypatch, [answer, ("never", 0)])
    out = image_conftest.StartedExecDocker("c0ffee").run("x")
    assert (out.stdout.strip(), out.rc) == answer
    assert len(calls(log)) == 1
