"""Stage chains in build order and satisfiable requirement sets (issue 22, item 5): the
pure rules (chains, pins), the optional-stage case checked as each image builds it, and
the issue's reproductions on the real matrix through the real command line."""

from __future__ import annotations

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
    ("numpy==1.26.4",), ("numpy==1.26.4", "numpy>=1.20", "numpy<2"), ("numpy>=2", "numpy<=2"),
    ("numpy~=2.2", "numpy<2.3"), ("numpy==1.*", "numpy>=1.5"), ("numpy>=2rc1", "numpy<2"),
    ("numpy>=1.0", "numpy<=1.0", "numpy!=1.0"),  # empty, but finer than bounds: left to pip
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
    # h22 review: bounds that leave no version, without an exact pin (were left to pip)
    (("numpy>=2", "numpy<1"), 1, "constraint 'numpy<1' conflicts with constraint 'numpy>=2'"),
    (("numpy>2", "numpy<=2"), 1, "no version of numpy satisfies both"),
    (("numpy>=2", "numpy<2.0.0"), 1, "no version of numpy satisfies both"),
    (("numpy~=2.2", "numpy>=3"), 1, "no version of numpy satisfies both"),
    (("numpy>=1,<5", "numpy<3", "NumPy>=4"), 2, "'NumPy>=4' conflicts with constraint 'numpy<3'"),
    (("numpy>=1!1.0", "numpy<2"), 1, "no version of numpy satisfies both"),
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


@pytest.mark.parametrize("old, new, fragment", [
    ("chain: [base, runtime]\n", "chain: [runtime, base]\n",
     "the chain starts with stage 'runtime', which is built on one of 'base', 'cuda', 'accel', not on the OS base image"),
    ("chain: [base, runtime]\n", "chain: [runtime]\n", "the chain starts with stage 'runtime'"),
    ("        - numpy==1.26.4\n", "        - numpy==1.26.4\n        - numpy==2.0.0\n",
     "constraint 'numpy==2.0.0' conflicts with constraint 'numpy==1.26.4'"),
    ("        - numpy==1.26.4\n", "        - numpy==1.26.4\n        - paddlepaddle<2.6\n",
     "constraint 'paddlepaddle<2.6' conflicts with the framework's own pin 'paddlepaddle==2.6.2'"),
    ("        - numpy==1.26.4\n", "        - numpy>=2\n        - numpy<1\n",
     "constraint 'numpy<1' conflicts with constraint 'numpy>=2'"),
], ids=["runtime-base", "runtime-only", "numpy-twice", "against-framework-pin", "h22-disjoint-ranges"])
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


# -- properties (hypothesis) ----------------------------------------------------------------

from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from stagecraft.bases import base_image  # noqa: E402
from stagecraft.render import render_stages, tag_dockerfile  # noqa: E402

# The project fixture's directory is reused by every example (the matrix is rewritten);
# a share of the profile's budget: each example loads a matrix (tens of ms).
PROPERTY = settings(deadline=None, max_examples=max(1, settings.default.max_examples // 3),
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
EXTRA = ["x1", "x2", "x3"]  # stages on the base template: they render with the base alone
ALL = ["base", "runtime", *EXTRA]


def _stage_block(name: str, parents: list[str]) -> str:
    tpl = "runtime.Dockerfile.j2\n    uses: [framework]\n    copies: [entrypoint, probes]" \
        if name == "runtime" else "base.Dockerfile.j2"
    line = f"    parents: [{', '.join(parents)}]\n" if parents else ""
    return f"  {name}:\n    template: {tpl}\n{line}"


@st.composite
def chained_matrix(draw) -> tuple[str, dict[str, list[str]], list[str]]:
    parents = {s: draw(st.lists(st.sampled_from(ALL), max_size=3, unique=True)) for s in ALL}
    chain = draw(st.lists(st.sampled_from(ALL), min_size=1, max_size=5, unique=True))
    head, rest = MINIMAL.split("stages:\n", 1)
    _, tail = rest.split("components:\n", 1)
    stages = "".join(_stage_block(s, parents[s]) for s in ALL)
    text = (head + "stages:\n" + stages + "components:\n" + tail).replace(
        "chain: [base, runtime]", f"chain: [{', '.join(chain)}]")
    return text, parents, chain


@PROPERTY
@given(chained_matrix())
def test_a_chain_that_loads_builds_each_stage_on_one_of_its_parents(project, monkeypatch, case):
    """Any stages' parents, any chain: refused with lines at matrix.yaml:N, or every
    rendered FROM puts a stage on one of its parents and the first on the OS base image
    (the rendered Dockerfile is the oracle, not the rule)."""
    text, parents, chain = case
    path = project(text)
    monkeypatch.chdir(path.parent)
    try:
        matrix = load_matrix(path)
        specs = expand(matrix)
    except InputError as exc:
        assert all(p.line().startswith("matrix.yaml") for p in exc.problems), exc
        event("refused")
        return
    event("rendered")
    for spec in specs:
        base = base_image(spec.base, None)
        text = tag_dockerfile(matrix, spec, render_stages(matrix, spec), base.ref, {})
        froms = [ln.split()[1:] for ln in text.splitlines() if ln.startswith("FROM ")]
        froms = [f for f in froms if len(f) == 3 and f[1] == "AS" and f[2] in ALL]
        assert froms[0][0] == base.ref and not parents[froms[0][2]], froms
        for parent, _, stage in froms[1:]:
            assert parent in parents[stage], (parent, stage, froms)


VERSIONS = ["0.9", "1.0", "1.0.1", "1.5", "2.0", "2.0.1", "2.5", "3.0"]
SPECS = st.builds(lambda op, v: f"numpy{op}{v}", st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "~="]),
                  st.sampled_from(VERSIONS)) | st.sampled_from(["numpy==1.*", "numpy==2.*", "NumPy==1.0"])


@PROPERTY
@given(st.lists(SPECS, min_size=1, max_size=4, unique=True))
def test_constraints_are_refused_exactly_when_no_pinned_version_satisfies_them(project, monkeypatch, specs):
    from packaging.requirements import Requirement
    from packaging.version import Version

    line = f"      constraints: [{', '.join(repr(s) for s in specs)}]\n"
    text = MINIMAL.replace('      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + line, 1)
    path = project(text)
    monkeypatch.chdir(path.parent)
    reqs = [Requirement(s) for s in specs]
    pinned = [Version(s.version) for r in reqs for s in r.specifier
              if s.operator == "==" and not s.version.endswith("*")]
    grid = [Version(v) for v in VERSIONS] + pinned
    satisfiable = any(all(r.specifier.contains(v) for r in reqs) for v in grid)
    # h22 review: without a pin, bounds that leave no version are refused too; refused
    # only when no version of a dense grid (between, below, above the points) satisfies
    dense = [Version(f"{v}{x}") for v in VERSIONS + ["0.1", "9.0"] for x in ("", ".0.1", ".post1", "rc1", ".dev1", ".1")]
    none_dense = not any(all(r.specifier.contains(v, prereleases=True) for r in reqs) for v in dense)
    try:
        load_matrix(path)
        refused = False
    except InputError as exc:
        assert all("no version of numpy satisfies both" in p.what for p in exc.problems), exc
        refused = True
    event("refused" if refused else "loaded")
    if pinned:
        assert refused == (not satisfiable), (specs, refused)
    else:
        assert none_dense or not refused, (specs, refused)
