"""The command line: each command has its own options and its own --help (the docker and
buildx convention), `build` is the default command, and every command the README shows
parses to the command it names."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stagecraft import cli

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[list[str]]:
    """Every `python3 build.py ...` line of the README's code blocks, as argv lists."""
    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\s*(?:python3?|\.venv/bin/python) build\.py(.*?)(?:#.*)?$", line)
        if m:
            out.append(shlex.split(m.group(1)))
    return out


def test_readme_commands_parse_to_the_command_they_name():
    commands = _readme_commands()
    assert len(commands) >= 12, commands
    for argv in commands:
        args = cli._parse(argv)
        named = next((a for a in argv if a in cli.COMMANDS), cli.DEFAULT_COMMAND)
        assert args.command == named, (argv, args.command)


@pytest.mark.parametrize("argv, command", [
    (["--tag", "2.6.2-cpu"], "build"),
    (["--all", "--jobs", "2"], "build"),
    (["--list"], "build"),
    ([], "build"),
    (["--matrix", "m.yaml", "--tag", "x"], "build"),
    (["--matrix=m.yaml", "plan", "--all"], "plan"),
    (["plan", "--matrix", "m.yaml", "--all"], "plan"),
    (["build", "--tag", "x"], "build"),
])
def test_default_command_is_build(argv, command):
    args = cli._parse(argv)
    assert args.command == command
    if "m.yaml" in " ".join(argv):
        assert args.matrix == "m.yaml", "--matrix before or after the command is the same"


def _help(*argv: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), *argv, "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_each_command_has_its_own_help():
    top = _help()
    for name in cli.COMMANDS:
        assert re.search(rf"^\s+{name}\s", top, re.M), f"{name} missing from build.py --help"
    assert "--format" not in top and "--cache" not in top, "a command's option is global"
    build = _help("build")
    assert _help("--tag", "x") == build, "build.py --tag X --help is build's help"
    for foreign in ("--format", "--cache ", "--output"):
        assert foreign not in build, f"build --help lists {foreign}"
    assert "--jobs" in build and "--push" in build
    assert "--format" in _help("matrix") and "--jobs" not in _help("matrix")
    assert "--cache SPEC" in _help("bake") and "--jobs" not in _help("bake")
    assert "--retries" in _help("push") and "--dry-run" not in _help("push")


def test_a_command_refuses_another_commands_option(capsys):
    with pytest.raises(SystemExit) as exc:
        cli._parse(["matrix", "--jobs", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unrecognized arguments: --jobs" in err[0], err


def test_command_after_options_is_named(capsys):
    with pytest.raises(SystemExit) as exc:
        cli._parse(["--all", "plan"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "`plan` must come before its options" in err, err


def test_adding_a_command_is_one_function(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))

    def _opts(p):
        p.add_argument("--older-than", type=int, default=7)

    @cli.command("prune-example", "an example command", cli._json, _opts)
    def cmd_prune_example(args):
        return 0 if args.older_than == 3 and args.json else 1

    args = cli._parse(["prune-example", "--older-than", "3", "--json"])
    assert args.run(args) == 0
