"""The shape of the import graph (issue 21): imports go one way, no module takes another's
private name, the infrastructure does not reach the renderer, and the runtime side (what
runs in every image: probes/, entrypoint/) needs nothing of the build driver.

The graph is read from the source (tests/unit/import_graph.py), function-level imports
included; the second half of this file checks that reading on small made-up packages, so
a rule that finds nothing here has been seen to find something there.
"""

from __future__ import annotations

import ast
import textwrap
from itertools import pairwise
from pathlib import Path

import pytest

from tests.unit import import_graph

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("stagecraft", "probes", "entrypoint")
RUNTIME = ("probes", "entrypoint")

# Private helper modules of probes/ that the entrypoint uses as well: entrypoint and probes
# ship together as the runtime side. Each is to become public (a module without the
# underscore) once the files other work is changing have landed; until then each pair is
# listed here, and a pair no longer found fails the test, so the list only shrinks.
SHARED_RUNTIME_HELPERS = {
    ("entrypoint.envplan", "probes._show"),
    ("entrypoint.main", "probes._show"),
    ("entrypoint.health", "probes._budget"),
    ("entrypoint.health", "probes._fs"),
    # issue 22: the entrypoint reads image.json and reports through the one bounded
    # reader, and names bad values with the one escaping helper
    ("entrypoint.main", "probes._fs"),
    ("entrypoint.runtime", "probes._fs"),
    ("entrypoint.runtime", "probes._show"),
    ("entrypoint.options", "probes._show"),
}


@pytest.fixture(scope="module")
def uses() -> list[import_graph.Use]:
    return import_graph.read_uses(ROOT, PACKAGES)


def _runtime_uses_of_driver(uses: list[import_graph.Use]) -> list[str]:
    return sorted(f"{u.where}: {u.importer} imports {u.target}" for u in uses
                  if u.importer.partition(".")[0] in RUNTIME
                  and u.target.partition(".")[0] not in RUNTIME)


def _private_crossings(uses: list[import_graph.Use]) -> list[str]:
    kept = [u for u in uses if (u.importer, u.target) not in SHARED_RUNTIME_HELPERS]
    return import_graph.private_crossings(kept)


def test_the_graph_is_read_at_all(uses):
    # A reading that lost the relative or the function-level imports would pass every
    # rule below: these three are known to be there.
    edges = import_graph.graph(uses)
    assert "stagecraft.errors" in edges["stagecraft.cli"]  # `from .errors import ...`
    assert "probes.types" in edges["probes"]  # the package's own __init__
    assert "probes.rank" in edges["probes.report"]  # inside best_tag()


def test_no_import_cycle(uses):
    edges = import_graph.graph(uses)
    found = import_graph.cycles(edges)
    shown = [f"  {' -> '.join(c)} (at {', '.join(edges[a][b] for a, b in pairwise(c))})"
             for c in found]
    assert not found, "import cycles (each module imports the next):\n" + "\n".join(shown)


def test_no_private_name_crosses_modules(uses):
    crossings = _private_crossings(uses)
    assert not crossings, ("private names used outside their module (make the name "
                           "public, with a docstring, or move it):\n" + "\n".join(crossings))


def test_each_listed_shared_runtime_helper_is_still_used(uses):
    pairs = {(u.importer, u.target) for u in uses}
    gone = SHARED_RUNTIME_HELPERS - pairs
    assert not gone, f"no longer imported, take them off SHARED_RUNTIME_HELPERS: {sorted(gone)}"


def test_the_engine_does_not_reach_the_renderer(uses):
    chain = import_graph.path_between(import_graph.graph(uses), "stagecraft.engine",
                                      "stagecraft.render")
    assert chain is None, ("the engine (infrastructure) imports the renderer: "
                           + " -> ".join(chain or []))


def test_the_runtime_side_imports_nothing_of_the_driver(uses):
    found = _runtime_uses_of_driver(uses)
    assert not found, "probes/ and entrypoint/ run in every image, without stagecraft:\n" \
        + "\n".join(found)


# The reading itself, on made-up packages.

def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_cycle_through_a_function_level_import_is_found_with_its_path(tmp_path):
    root = _tree(tmp_path, {
        "alpha/__init__.py": "",
        "alpha/a.py": "from . import b\n",
        "alpha/b.py": "from alpha.c import thing\n",
        "alpha/c.py": "def f():\n    from alpha import a\n    thing = 1\n",
    })
    edges = import_graph.graph(import_graph.read_uses(root, ("alpha",)))
    found = import_graph.cycles(edges)
    assert len(found) == 1
    cycle = found[0]
    assert cycle[0] == cycle[-1] and set(cycle) == {"alpha.a", "alpha.b", "alpha.c"}
    for a, b in pairwise(cycle):
        assert b in edges[a], f"{a} -> {b} is no import"
    assert edges["alpha.c"]["alpha.a"] == "alpha/c.py:2"


def test_a_graph_without_cycles_has_none_and_self_imports_do_not_count(tmp_path):
    root = _tree(tmp_path, {
        "alpha/__init__.py": "from alpha.a import x\n",
        "alpha/a.py": "from alpha.b import y\nx = y\nfrom alpha.a import x as z\n",
        "alpha/b.py": "y = 1\n",
    })
    assert import_graph.cycles(import_graph.graph(import_graph.read_uses(root, ("alpha",)))) == []


def test_each_form_of_private_use_is_found_and_a_package_may_use_its_own(tmp_path):
    root = _tree(tmp_path, {
        "alpha/__init__.py": "",
        "alpha/_impl.py": "def helper(): pass\n",
        "alpha/pub.py": "_secret = 1\nfrom alpha import _impl\nfrom ._impl import helper\n",
        "beta/__init__.py": "",
        "beta/one.py": "from alpha.pub import _secret\n",
        "beta/two.py": "def f():\n    from alpha import pub\n    return pub._secret\n",
        "beta/three.py": "import alpha._impl\n",
        "beta/four.py": "import alpha.pub as p\nimport alpha\nq = alpha.pub._secret + p.__name__\n",
    })
    found = import_graph.private_crossings(import_graph.read_uses(root, ("alpha", "beta")))
    assert found == [
        "beta/four.py:3: beta.four uses private name alpha.pub._secret",
        "beta/one.py:1: beta.one uses private name alpha.pub._secret",
        "beta/three.py:1: beta.three imports private module alpha._impl (private to package alpha)",
        "beta/two.py:3: beta.two uses private name alpha.pub._secret",
    ]


def test_the_runtime_rule_and_the_renderer_rule_see_indirect_and_late_imports(tmp_path):
    root = _tree(tmp_path, {
        "stagecraft/__init__.py": "",
        "stagecraft/engine.py": "def assemble():\n    from .index import make\n",
        "stagecraft/index.py": "from stagecraft.render import text\n",
        "stagecraft/render.py": "text = ''\n",
        "probes/__init__.py": "",
        "probes/x.py": "def f():\n    import stagecraft.render\n",
        "entrypoint/__init__.py": "",
        "entrypoint/run": "#!/usr/bin/python3\nfrom stagecraft import errors\n",
    })
    uses = import_graph.read_uses(root, PACKAGES)
    chain = import_graph.path_between(import_graph.graph(uses), "stagecraft.engine",
                                      "stagecraft.render")
    assert chain == ["stagecraft.engine", "stagecraft.index", "stagecraft.render"]
    assert _runtime_uses_of_driver(uses) == [
        "entrypoint/run:2: entrypoint.run imports stagecraft",
        "probes/x.py:2: probes.x imports stagecraft.render",
    ]


# Sizes (issue 21): no module over 450 lines, no function or method over 80 lines, counted
# from its `def` (decorators aside) to the end of its body as ast's lineno..end_lineno.
# Measured: every non-test Python file of the project: stagecraft/ (catalog/ included),
# probes/ and entrypoint/ (their suffix-less Python scripts too), build.py, bench/*.py and
# any scripts/**/*.py. tests/ is test code and not measured: tests/nvml_standin is the
# stand-in NVML the tests hand to the probes, part of the test fixtures, built only by them.

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80

# {path or path::qualname: reason}. An entry that no longer exceeds its limit fails the
# test, so the list only shrinks.
SIZE_EXCEPTIONS = {
    "stagecraft/cli.py": "issue 21 part A (h21-pipeline) rewrites it",
    "stagecraft/cli.py::cmd_build": "issue 21 part A (h21-pipeline) rewrites it",
}


def sized_files(root: Path) -> list[Path]:
    """The measured files under ``root``, sorted: see the comment above."""
    files = set(import_graph.module_files(root, PACKAGES).values())
    files.update(p for p in (root / "build.py",) if p.is_file())
    for folder in ("bench", "scripts"):
        files.update(p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(files)


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def oversized(root: Path) -> dict[str, int]:
    """{path or path::qualname: lines} for each measured module over MAX_MODULE_LINES and
    each function or method (nested ones included, named ``outer.inner``) over
    MAX_FUNCTION_LINES."""
    found: dict[str, int] = {}
    for path in sized_files(root):
        text = path.read_text(encoding="utf-8")
        shown = path.relative_to(root).as_posix()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[shown] = lines
        for name, length in _functions(ast.parse(text, filename=shown)):
            if length > MAX_FUNCTION_LINES:
                found[f"{shown}::{name}"] = length
    return found


def test_no_module_or_function_is_over_its_size():
    found = oversized(ROOT)
    over = [f"  {where}: {lines} lines" for where, lines in sorted(found.items())
            if where not in SIZE_EXCEPTIONS]
    assert not over, (f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a "
                      "function (split it into named steps):\n" + "\n".join(over))
    gone = sorted(set(SIZE_EXCEPTIONS) - set(found))
    assert not gone, f"within the limits now, take them off SIZE_EXCEPTIONS: {gone}"


def test_the_size_reading_finds_long_modules_methods_and_nested_functions(tmp_path):
    body = "    x = 1\n" * MAX_FUNCTION_LINES  # with its `def`, one line over
    root = _tree(tmp_path, {
        "stagecraft/__init__.py": "",
        "stagecraft/short.py": "def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1),
        "stagecraft/long.py": "y = 1\n" * (MAX_MODULE_LINES + 1),
        "stagecraft/cls.py": "class K:\n    @property\n    def m(self):\n" + "    " + body.replace("\n    ", "\n        "),
        "probes/__init__.py": "def outer():\n    def inner():\n" + "    " + body.replace("\n    ", "\n        "),
        "entrypoint/run": "#!/usr/bin/python3\ndef g():\n" + body,
        "bench/b.py": "async def h():\n" + body,
        "build.py": "",
        "tests/t.py": "def t():\n" + body,
    })
    assert oversized(root) == {
        "stagecraft/long.py": MAX_MODULE_LINES + 1,
        "stagecraft/cls.py::K.m": MAX_FUNCTION_LINES + 1,
        "probes/__init__.py::outer": MAX_FUNCTION_LINES + 2,
        "probes/__init__.py::outer.inner": MAX_FUNCTION_LINES + 1,
        "entrypoint/run::g": MAX_FUNCTION_LINES + 1,
        "bench/b.py::h": MAX_FUNCTION_LINES + 1,
    }
