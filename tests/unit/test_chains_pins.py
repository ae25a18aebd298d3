"""Stage chains in build order and satisfiable requirement sets (issue 22, item 5): the
pure rules (chains, pins), the optional-stage case checked as each image builds it, and
the issue's reproductions on the real matrix through the real command line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stagecraft import chains, pins
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from tests.conftest import ROOT
from tests.unit.minimal_matrix import MINIMAL

PARENTS = {"base": [], "cuda": ["base"], "accel": ["cuda"], "runtime": ["base", "cuda", "accel"],
           "jupyter": ["runtime"], "toolkit": ["runtime"]}


@pytest.mark.parametrize("chain", [
    ["base"], ["base", "runtime"], ["base", "runtime", "jupyter"], ["base", "cuda", "runtime"],
    ["base", "cuda", "accel", "runtime", "jupyter"], ["base", "runtime", "toolkit"],
])
def test_chains_in_build_order_pass(chain):
    assert chains.chain_problem(chain, PARENTS) is None


@pytest.mark.parametrize("chain, at, fragment", [
    (["runtime", "base"], 0, "starts with stage 'runtime', which is built on one of 'base', 'cuda', 'accel'"),
    (["runtime"], 0, "not on the OS base image"),
    (["cuda", "accel", "runtime"], 0, "starts with stage 'cuda'"),
    (["base", "jupyter", "runtime"], 1, "stage 'jupyter' is built on 'runtime', but the chain puts it on 'base'"),
    (["base", "runtime", "cuda"], 2, "stage 'cuda' is built on 'base', but the chain puts it on 'runtime'"),
    (["base", "accel", "cuda", "runtime"], 1, "stage 'accel' is built on 'cuda'"),
    (["base", "runtime", "jupyter", "toolkit"], 3, "stage 'toolkit' is built on 'runtime', but the chain puts it on 'jupyter'"),
    (["base", "runtime", "base"], 2, "stage 'base' is built on the OS base image"),
])
def test_chains_out_of_order_are_named(chain, at, fragment):
    found = chains.chain_problem(chain, PARENTS)
    assert found is not None and found[0] == at and fragment in found[1], found


def test_cycles():
    assert chains.cycle(PARENTS) is None
    assert chains.cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) in (["a", "b", "c", "a"],
                                                                ["b", "c", "a", "b"], ["c", "a", "b", "c"])
    assert chains.cycle({"a": ["a"]}) == ["a", "a"]
    assert chains.cycle({"a": ["nowhere"]}) is None
    deep = {f"s{i}": [f"s{i + 1}"] for i in range(5000)}  # iterative: no recursion limit
    assert chains.cycle(deep) is None
    deep["s5000"] = ["s0"]
    assert len(chains.cycle(deep)) == 5002


def _lines(*texts: str) -> list[pins.Line]:
    return [pins.Line(t, (i,)) for i, t in enumerate(texts)]


@pytest.mark.parametrize("texts", [
    ("numpy==1.26.4",), ("numpy==1.26.4", "numpy>=1.20", "numpy<2"), ("numpy>=2", "numpy<1"),
    ("six==1.16.0", "Six>=1.0"), ("a==1.0", "b==2.0"), ("numpy==1.26.*", "numpy==1.26.4"),
    ("torch==2.10.0+cu128", "torch>=2.10"), ("x===1.0", "x===1.0"), ("pre==2.0rc1", "pre>=2.0rc1"),
])
def test_satisfiable_sets_pass(texts):
    assert pins.conflicts(_lines(*texts)) == []


@pytest.mark.parametrize("texts, at, fragment", [
    (("numpy==1.0", "numpy==2.0"), 1, "constraint 'numpy==2.0' conflicts with constraint 'numpy==1.0'"),
    (("six==1.16.0", "six<1.16"), 1, "no version of six satisfies both"),
    (("six==1.16.0", "six>>1.15"), 1, "is not a valid requirement"),
    (("Foo.Bar==1", "foo-bar==2"), 1, "no version of foo-bar satisfies both"),
    (("numpy>=2", "numpy<3", "numpy==1.26.4"), 2, "conflicts with constraint 'numpy>=2'"),
    (("x==1.0", "x!=1.0"), 1, "conflicts"),
    (("x===1.0", "x==2.0"), 1, "conflicts"),
    (("numpy==1.*.2",), 0, "is not a valid requirement"),
])
def test_unsatisfiable_sets_are_named(texts, at, fragment):
    found = pins.conflicts(_lines(*texts))
    assert found and fragment in found[0][1], found
    if at is not None:
        assert found[0][0] == (at,), found


def test_every_conflict_line_is_named_once():
    found = pins.conflicts(_lines("a==1", "a==2", "a==3", "b==1"))
    assert [p for p, _ in found] == [(1,), (2,)]


# -- through the loader ---------------------------------------------------------------------

@pytest.fixture
def minimal(project):
    def write(text: str) -> Path:
        return project(text)
    return write


def test_an_optional_stage_that_leaves_a_chain_out_of_order(minimal, monkeypatch):
    """A runtime built on an optional stage: the image without it would put the runtime
    on the base. The chain as written is sound, so the image's chain is refused, at the
    group's chain line."""
    text = (MINIMAL
            .replace("  runtime:\n    template: runtime.Dockerfile.j2\n    parents: [base]\n",
                     "  jupyter:\n    template: jupyter.Dockerfile.j2\n    parents: [base]\n    uses: [jupyter]\n"
                     "  runtime:\n    template: runtime.Dockerfile.j2\n    parents: [jupyter]\n")
            .replace("  framework:\n", "  jupyter:\n    lab4: {jupyterlab: \"4.6.6\"}\n  framework:\n")
            .replace("chain: [base, runtime]", "chain: [base, jupyter, runtime]")
            .replace("      framework: [six-1, six-2]", "      framework: [six-1]\n      jupyter: [null, lab4]")
            .replace('tag: "{{ framework.version }}-cpu"', "tag: \"{{ framework.version }}-cpu{{ '-j' if jupyter else '' }}\"")
            .replace('aliases: ["{{ framework.version }}"]', "aliases: [\"{{ framework.version }}{{ '-j' if jupyter else '' }}\"]"))
    path = minimal(text)
    monkeypatch.chdir(path.parent)
    with pytest.raises(InputError) as info:
        expand(load_matrix(path))
    lines = [p.line() for p in info.value.problems]
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "chain: [base, jupyter, runtime]" in ln)
    assert len(lines) == 1 and lines[0].startswith(f"matrix.yaml:{line}: image group 'six': image "
                                                   "'1.16.0-cpu' leaves out the stages of its unset "
                                                   "components, and then stage 'runtime' is built on "
                                                   "'jupyter', but the chain puts it on 'base'"), lines


def test_the_real_matrix_passes_both_rules():
    matrix = load_matrix(ROOT / "matrix.yaml")
    assert expand(matrix)
    assert matrix.stages["runtime"].parents == ("base", "cuda", "accel")


@pytest.fixture
def real_project(tmp_path: Path) -> Path:
    for name in ("templates", "entrypoint", "probes", "tests/image"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("matrix.yaml", "matrix.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("old, new, fragment", [
    ("chain: [base, runtime]\n", "chain: [runtime, base]\n",
     "the chain starts with stage 'runtime', which is built on one of 'base', 'cuda', 'accel', not on the OS base image"),
    ("chain: [base, runtime]\n", "chain: [runtime]\n", "the chain starts with stage 'runtime'"),
    ("        - numpy==1.26.4\n", "        - numpy==1.26.4\n        - numpy==2.0.0\n",
     "constraint 'numpy==2.0.0' conflicts with constraint 'numpy==1.26.4'"),
    ("        - numpy==1.26.4\n", "        - numpy==1.26.4\n        - paddlepaddle<2.6\n",
     "constraint 'paddlepaddle<2.6' conflicts with the framework's own pin 'paddlepaddle==2.6.2'"),
], ids=["runtime-base", "runtime-only", "numpy-twice", "against-framework-pin"])
def test_issue_reproductions_on_the_real_matrix(real_project, old, new, fragment):
    m = real_project / "matrix.yaml"
    text = m.read_text()
    assert old in text
    text = text.replace(old, new, 1)
    m.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == new.splitlines()[-1].strip())
    for argv in (["render", "2.6.2-cpu"], ["lock", "--check"]):
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), *argv], cwd=real_project,
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": "tcp://127.0.0.1:9"})
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert any(ln.startswith(f"error: matrix.yaml:{line}: ") and fragment in ln for ln in lines), lines
        assert "Traceback" not in proc.stderr and proc.stdout == ""
