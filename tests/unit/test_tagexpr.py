"""Tag expressions: what the matrix needs works; work is bounded before it is done."""

from __future__ import annotations

import pytest

from stagecraft import tagexpr
from stagecraft.errors import InputError

CONTEXT = {"framework": {"version": "2.6.2", "name": "paddle-2.6.2-cpu"},
           "cuda": {"cuda": "11.8", "cudnn": "8.6.0.163"}, "jupyter": None}


@pytest.mark.parametrize("source,expected", [
    ("{{ framework.version }}-cpu{{ '-jupyter' if jupyter else '' }}", "2.6.2-cpu"),
    ("{{ cuda.cudnn.split('.')[:2] | join('.') }}", "8.6"),
    ("{{ framework.version ~ '-cpu' if cuda.cuda == '11.8' else '' }}", "2.6.2-cpu"),
    ("{{ framework.name | replace('paddle-', '') | upper }}", "2.6.2-CPU"),
    ("{{ 100000 | string }}-{{ 2 ** 10 }}-{{ range(3) | join }}", "100000-1024-012"),
    ("{{ framework.get('missing', 'x') }}", "x"),
])
def test_expressions_the_matrix_uses(source, expected):
    assert tagexpr.render(tagexpr.compile_expression(source), CONTEXT) == expected


@pytest.mark.parametrize("source,fragment", ids=range(8), argvalues=[
    ("{% for i in range(9) %}x{% endfor %}", "for is not allowed"),
    ("{% macro m() %}{% endmacro %}", "macro is not allowed"),
    ("{% include 'base.Dockerfile.j2' %}", "include is not allowed"),
    ("{{ framework.version | center(10**9) }}", "No filter named 'center'"),
    ("{{ " + "(" * 400 + "1" + ")" * 400 + " }}", "nested too deeply|syntax error"),
    ("{{ x", "syntax error"),
    # Jinja folds constants while compiling: their errors and bounds are met there.
    ("{{ 1[::-1] ~ 'x' }}", "UndefinedError"),
    ("x" * 2000, "at most 1024"),
])
def test_refused_at_compile(source, fragment):
    with pytest.raises(InputError, match=fragment):
        tagexpr.compile_expression(source)


@pytest.mark.parametrize("source,fragment", [
    ("{{ range(10**6) | join }}", "larger than"),
    ("{{ 10 ** 100000 }}", "too large"),
    ("{{ (10 ** 1000) ** 1000 }}", "too large"),
    ("{{ framework.version * 10**9 }}", "too large"),
    ("{{ ('x' * 4000) ~ ('x' * 4000) | replace('x', 'xxxxx') }}", "at most 4096"),
    ("{{ '%999999999d' % 1 }}", "string formatting"),
    ("{{ '" + "x" * 900 + "' | replace('x', 'xxxxxxxxxx') }}", "at most 4096"),
    ("{{ framework.version.ljust(10**9) }}", "calling 'ljust'"),
    ("{{ framework.__class__ }}", "unsafe"),
    ("{{ lipsum(10**9) }}", "'lipsum' is undefined"),
    ("{{ cycler.__init__.__globals__ }}", "unsafe"),
])
def test_refused_at_render(source, fragment):
    with pytest.raises(Exception, match=fragment):
        tagexpr.render(tagexpr.compile_expression(source), CONTEXT)


@pytest.mark.parametrize("source", ["{{ 1[::-1] }}", "{{ framework.version }}-{{ 10[::-1] }}"])
def test_a_python_compile_warning_is_the_one_line_error(source):
    """Python warns while compiling Jinja's code for `1[::-1]` ("'int' object is not
    subscriptable"); that is bad input, said once as the error, never a SyntaxWarning on
    the user's terminal."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="tag expression: 'int' object is not subscriptable"):
            tagexpr.compile_expression(source)
    assert not [w for w in seen if issubclass(w.category, SyntaxWarning)], [str(w.message) for w in seen]


def test_the_warning_case_through_the_command_line(project):
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.unit.minimal_matrix import MINIMAL

    path = project(MINIMAL.replace('"{{ framework.version }}-cpu"', '"{{ framework.version }}-{{ 1[::-1] }}"'))
    proc = subprocess.run([sys.executable, "-W", "always", str(ROOT / "build.py"), "--list"],
                          cwd=path.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'int' object is not subscriptable" in lines[0], lines
    assert "Warning" not in proc.stderr, proc.stderr
