"""entrypoint.main.execvpe searches $PATH as os.execvpe does (it is written out only to
spare the start the ``warnings`` import of os.get_exec_path): each case runs both in a
child process and compares what ran, the exit code and the error."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from entrypoint import imagefile
from tests.fixtures.compose import IMAGES

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from entrypoint.main import execvpe
fn = os.execvpe if sys.argv[2] == "os" else execvpe
env = dict(os.environ)
if sys.argv[3] == "-":
    env.pop("PATH", None)
else:
    env["PATH"] = sys.argv[3]
try:
    fn(sys.argv[4], [sys.argv[4], "arg"], env)
except OSError as exc:
    print(type(exc).__name__, exc.errno)  # os gives the file name as bytes: not compared
    sys.exit(3)
except ValueError as exc:
    print("ValueError")  # the wording differs (os.fsencode's); the start refuses a NUL first
    sys.exit(4)
"""


def _script(path: Path, text: str, mode: int = 0o755) -> None:
    path.write_text(f"#!/bin/sh\necho {text} \"$@\"\n")
    path.chmod(mode)


@pytest.fixture()
def dirs(tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "cwd").mkdir()
    _script(tmp_path / "a" / "noexec", "a-noexec", 0o644)  # EACCES: remembered, search goes on
    _script(tmp_path / "b" / "noexec", "b-noexec")
    _script(tmp_path / "a" / "only-noexec", "x", 0o644)
    _script(tmp_path / "b" / "tool", "b-tool")
    _script(tmp_path / "cwd" / "here", "cwd-here")
    (tmp_path / "a" / "isdir").mkdir()  # a directory of the name: EACCES
    _script(tmp_path / "b" / "isdir", "b-isdir")
    (tmp_path / "file").write_text("")  # a PATH entry that is a file: ENOTDIR
    return tmp_path


CASES = [
    ("{d}/a:{d}/b", "tool"),
    ("{d}/a:{d}/b", "noexec"),  # os: the first EACCES is kept, but b's runs
    ("{d}/a", "only-noexec"),  # PermissionError
    ("{d}/a:{d}/b", "missing"),  # FileNotFoundError
    ("{d}/file:{d}/b", "tool"),  # ENOTDIR skipped
    ("{d}/a:{d}/b", "isdir"),
    (":{d}/b", "here"),  # an empty entry is the working directory
    ("", "here"),
    ("-", "sh"),  # PATH unset: os.defpath
    ("{d}/a:{d}/b", "{d}/b/tool"),  # a slash: no search
    ("{d}/a:{d}/b", "{d}/a/noexec"),
    ("{d}/a:{d}/b", "nul\0name"),
]


@pytest.mark.parametrize(("path", "name"), CASES, ids=[f"{i}-{c[1][-8:]}" for i, c in enumerate(CASES)])
def test_execvpe_searches_as_os_execvpe_does(dirs: Path, path: str, name: str) -> None:
    out = {}
    for impl in ("os", "ours"):
        argv = [sys.executable, "-c", CHILD, str(ROOT), impl, path.format(d=dirs), name.format(d=dirs)]
        if "\0" in name:  # argv cannot carry a NUL: the child builds the name
            argv[-1] = "nul"
            argv[2] = CHILD.replace("sys.argv[4]", "'nul\\0name'")
        cp = subprocess.run(argv, capture_output=True, text=True, cwd=dirs / "cwd", timeout=30, check=False)
        out[impl] = (cp.returncode, cp.stdout, cp.stderr)
    assert out["ours"] == out["os"]
    assert out["os"][0] != 0 or out["os"][1].strip().endswith("arg")


def test_entrypoint_start_imports_no_warnings_module(tmp_path: Path) -> None:
    """The reason execvpe is ours: the start path stays without ``warnings`` (and without
    ``importlib``, ``threading``, probes.hwcap), which cost 1.3 ms of every start
    together (bench/startup.py, BENCHMARKS.md); nor ``json``, ``re`` and ``enum``
    (entrypoint/jsonout.py, entrypoint/imagefile.py), 3 to 4 ms more. A command that prints sys.modules of the
    entrypoint cannot be run after exec, so the entrypoint runs with its exec replaced."""
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); sys.argv = ['e', 'true']\n"
            "def stop(*a): print(' '.join(sorted(sys.modules)), flush=True); os._exit(0)\n"
            "os.execve = stop\n"
            "from entrypoint.main import main; main()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    env["STAGECRAFT_REPORT"] = str(tmp_path / "report.json")
    # image.json with its build-time twin, as in every image (entrypoint/imagefile.py)
    image = shutil.copy(IMAGES / "cpu-avx-only.json", tmp_path / "image.json")
    imagefile.write_twin(str(image))
    env["STAGECRAFT_IMAGE_JSON"] = str(image)
    cp = subprocess.run([sys.executable, "-IS", "-c", code, str(ROOT)], capture_output=True, text=True,
                        env=env, timeout=60, check=False)
    assert cp.returncode == 0, cp.stderr
    mods = set(cp.stdout.split())
    assert "entrypoint.main" in mods and "probes.cpu" in mods
    assert not mods & {"warnings", "importlib", "threading", "probes.hwcap", "fnmatch", "typing",
                       "json", "re", "enum"}, mods
    report = json.loads((tmp_path / "report.json").read_text())  # written without json, read with it
    assert report["image"] and report["line"]
