"""What `pip install .` gives is enough to run the product, validation included: every
third-party module that the driver, the probes and the image suites (run by
`build.py test`) import belongs to a runtime dependency of pyproject.toml, and a Python
that lacks the test tools is told so in one line, with no test record written."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.unit.minimal_matrix import MINIMAL

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"stagecraft", "probes", "entrypoint", "tests"}
# What `build.py test` runs that no file imports: pytest loads testinfra as a plugin.
PLUGINS = {"pytest", "pytest-testinfra"}
# Imported only where the standard library lacks the module (tomllib before 3.11); the
# dependency carries a python_version marker.
VERSION_FALLBACKS = {"tomli"}


def _runtime_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {canonicalize_name(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in project["dependencies"]}


def _imports(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - FIRST_PARTY - {"__future__"}


def test_runtime_dependencies_cover_build_py_test():
    files = [*ROOT.glob("stagecraft/*.py"), *ROOT.glob("probes/*.py"),
             *ROOT.glob("tests/image/*.py"), ROOT / "tests" / "conftest.py", ROOT / "build.py"]
    dists = importlib.metadata.packages_distributions()
    needed = set(PLUGINS)
    for module in _imports(files) - VERSION_FALLBACKS:
        assert module in dists, f"{module} is imported but no installed distribution provides it"
        needed |= {canonicalize_name(d) for d in dists[module]}
    deps = _runtime_dependencies()
    missing = {d for d in needed if d not in deps}
    assert not missing, f"imported at run time, not in [project].dependencies: {missing}"


def _python_without(tmp_path: Path, hidden: tuple[str, ...]) -> tuple[list[str], str]:
    """This very Python with its site-packages, less the top-level names ``hidden``: a
    farm of links to everything else, and ``-S`` so the real directory is not added.
    Returns (argv prefix running a script given after it, the line that sets the path)."""
    farm = tmp_path / "site"
    farm.mkdir()
    for lib in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(lib).iterdir():
            if entry.name.split("-")[0].split(".")[0].lstrip("_").lower() in hidden:
                continue
            if not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry)
    setup = f"import sys, runpy; sys.path.insert(0, {str(farm)!r})"
    run = f"{setup}; sys.argv.pop(0); runpy.run_path(sys.argv[0], run_name='__main__')"
    return [sys.executable, "-S", "-c", run], setup


@pytest.mark.parametrize("argv", [["test", "--tag", "1.16.0-cpu"], ["--tag", "1.16.0-cpu", "--test"]])
def test_missing_test_tools_are_one_line_and_no_record(argv, project, tmp_path):
    python, setup = _python_without(tmp_path, ("pytest", "testinfra"))
    probe = subprocess.run([sys.executable, "-S", "-c", f"{setup}; import importlib.util as u; "
                            "print(u.find_spec('pytest'), u.find_spec('docker') is not None)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.split() == ["None", "True"], probe.stdout + probe.stderr
    path = project(MINIMAL)
    state = tmp_path / "state"
    proc = subprocess.run([*python, str(ROOT / "build.py"), "--matrix", str(path), *argv, "--state-dir", str(state)],
                          capture_output=True, text=True, timeout=120, cwd=path.parent,
                          env={**os.environ, "DOCKER_HOST": "tcp://127.0.0.1:9"})
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(err) == 1 and "has no pytest, pytest-testinfra" in err[0], err
    assert not (state / "test-records").exists(), "a missing tool was recorded as a test"
