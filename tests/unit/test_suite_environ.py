"""The image suites import the stagecraft that runs them (stagecraft.testing.suite_environ),
wherever the project lies and whatever another checkout's editable install points at: the
fault suite's project copy once ran its suites against a stale editable install and every
build failed with ``No module named 'stagecraft'``."""

from __future__ import annotations

import os
import subprocess
import sys

from stagecraft.testing import PACKAGE_HOME, suite_environ


def _imported_from(env: dict[str, str], cwd) -> str:
    out = subprocess.run([sys.executable, "-c", "import stagecraft; print(stagecraft.__file__)"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_a_project_elsewhere_imports_this_stagecraft(tmp_path):
    # The project's own directory holds no stagecraft; another one (an installed copy, a
    # stale checkout) is on the caller's path and must not win.
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    (other / "stagecraft").mkdir(parents=True)
    (other / "stagecraft" / "__init__.py").write_text("raise ImportError('the wrong stagecraft')\n")
    env = {**os.environ, "PYTHONPATH": str(other)}
    got = _imported_from(suite_environ(env), project)
    assert got == str(PACKAGE_HOME / "stagecraft" / "__init__.py")
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert _imported_from(suite_environ(bare), project) == got


def test_the_callers_pythonpath_is_kept_after_it(tmp_path):
    env = suite_environ({"PYTHONPATH": f"/opt/a{os.pathsep}{PACKAGE_HOME}{os.pathsep}/opt/b", "X": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(PACKAGE_HOME), "/opt/a", "/opt/b"]
    assert env["X"] == "1"
    assert suite_environ({})["PYTHONPATH"] == str(PACKAGE_HOME)
