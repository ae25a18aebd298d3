"""Property-based tests (hypothesis) over the loader, the expander and the renderer.

The property, for any matrix: it either renders Dockerfiles in which every value stays
inside its own line and quoting, or it is refused with one-line problems (``InputError``;
exit status 2 through the CLI), within bounded time (hypothesis' deadline) and size;
never an internal error, never a hang.

"Stays inside its own line and quoting" is checked by difference: the matrix is
rendered again with every character of every value that could mean anything to a
Dockerfile or a shell replaced by ``x`` (its *twin*). Values are then plain text, so
any difference in structure between the two renderings (the instructions, the words and
``$`` expansions BuildKit sees, the syntax a shell sees in each RUN line) is a value that
escaped. Labels are compared with the matrix text itself.

Inputs are made three ways: structural mutations of the minimal matrix (values from
classes of characters, wrong types, missing and extra keys), mutations of its text
(YAML syntax, anchors, tags, raw bytes), and tag expressions built from Jinja2 pieces.

Budgets are hypothesis profiles (tests/conftest.py): ``ci`` by default (about half a
minute), ``long`` for ``make fuzz``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from stagecraft.bases import base_image
from stagecraft.cli import main
from stagecraft.errors import MAX_PROBLEMS, InputError
from stagecraft.expand import expand
from stagecraft.matrix import Matrix, load_matrix
from stagecraft.render import final_labels, render_stages, tag_dockerfile
from stagecraft.safetext import MAX_LINE, unsafe_positions
from tests.conftest import ROOT
from tests.unit import docpaths
from tests.unit.dockerfile_model import (
    LexError,
    instructions,
    labels,
    parse_words,
    process_word,
    shell_syntax,
)
from tests.unit.minimal_matrix import MINIMAL

SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
REV, CREATED = "0" * 40, "1970-01-01T00:00:00Z"
ENV = {"HOME": "/home/worker"}

# Characters that mean something somewhere on the way: every line break Python, YAML,
# Jinja2, a shell or the Dockerfile parser knows, other controls and format characters,
# shell and Dockerfile syntax, quotes, Jinja2 delimiters, spaces of other kinds,
# non-ASCII in and out of the BMP, a lone surrogate.
SPECIAL = list("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\x00\t\x1b\x7f\x9b\u200b\u202e\ufeff"
               "$`'\"\\{}()[]<>;&|#=*?~!%@:,/ -.\u00a0\u3000é日🐳") + ["\ud800", "{{", "}}",
                                                                      "{%", "%}", "${HOME}", "$(id)"]
TEXT = st.lists(st.one_of(st.sampled_from(SPECIAL), st.characters(max_codepoint=0x2FFFF),
                          st.sampled_from(string.ascii_lowercase + string.digits)),
                max_size=12).map("".join)
REALISTIC = st.sampled_from(["six", "six-1", "six-2", "deb12", "1.16.0", "3.11", "cpu", "nvidia",
                             "bootstrap", "pull", "six==1.16.0", "base", "runtime", "framework",
                             "base.Dockerfile.j2", "entrypoint", "tests/image/test_base.py",
                             "{{ framework.version }}", "0.19.*", "http://deb.debian.org/debian"])
SCALAR = st.one_of(TEXT, REALISTIC, st.integers(-2**70, 2**70), st.floats(), st.booleans(),
                   st.none())
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(TEXT, REALISTIC), inner, max_size=4)),
    max_leaves=12)

_PROJECT: Path | None = None


def _project() -> Path:
    """One scratch project for the whole module: the real templates, copied paths and
    suites (a fixture per example would rebuild it thousands of times)."""
    global _PROJECT
    if _PROJECT is None:
        root = Path(tempfile.mkdtemp(prefix="stagecraft-fuzz-"))
        caches = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in ("templates", "entrypoint", "probes"):
            shutil.copytree(ROOT / name, root / name, ignore=caches)
        (root / "tests").symlink_to(ROOT / "tests")
        _PROJECT = root
    return _PROJECT


@pytest.fixture(scope="module", autouse=True)
def _scratch():
    # A case that reached the engine would fail instead of answering for itself.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
        yield
    global _PROJECT
    if _PROJECT is not None:
        shutil.rmtree(_PROJECT, ignore_errors=True)
        _PROJECT = None


# -- the property ----------------------------------------------------------------------

def _check_refusal(exc: InputError) -> None:
    assert 0 < len(exc.problems) <= MAX_PROBLEMS + 1
    for problem in exc.problems:
        line = problem.line()
        assert line and not unsafe_positions(line), repr(line)
        assert len(line) <= MAX_LINE + 50, len(line)


_KEEP = set(string.ascii_letters + string.digits + "._-+:/=@%^,*~")


def _twin(value: Any) -> Any:
    if isinstance(value, str):
        return "".join(c if c in _KEEP else "x" for c in value)
    if isinstance(value, dict):
        return {_twin(k): _twin(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_twin(v) for v in value)
    return value


def _render_all(matrix: Matrix, spec) -> tuple[str, dict[str, str]]:
    stages = render_stages(matrix, spec)
    base = base_image(spec.base, None)
    marks = final_labels(matrix, spec, REV, CREATED)
    return tag_dockerfile(matrix, spec, stages, base.ref, marks), marks


def _structure(text: str) -> list[tuple]:
    """What BuildKit and the shell see as structure, leaving literal text out."""
    out: list[tuple] = []
    for ins in instructions(text):
        if ins.keyword == "run" and not ins.args.lstrip().startswith("["):
            args = ins.args
            mounts = []
            while args.startswith("--"):  # RUN --mount=...: flags before the command
                flag, _, args = args.partition(" ")
                mounts.append(flag)
            out.append(("run", tuple(mounts), tuple(shell_syntax(args))))
        elif ins.keyword in ("label", "env"):
            words = parse_words(ins.args)
            out.append((ins.keyword, len(words), tuple(
                (w.split("=", 1)[0], process_word(w, ENV).expanded) for w in words)))
        elif ins.keyword in ("cmd", "entrypoint", "healthcheck", "shell"):
            out.append((ins.keyword, ins.args))  # exec forms: the templates' own text
        else:
            out.append((ins.keyword, len(parse_words(ins.args)),
                        tuple(process_word(w, ENV).expanded for w in parse_words(ins.args))))
    return out


def _check_rendering(matrix: Matrix) -> None:
    specs = expand(matrix)
    twin_matrix = dataclasses.replace(
        matrix, components=_twin(matrix.components), entrypoint=_twin(matrix.entrypoint),
        source=_twin(matrix.source), vendor=_twin(matrix.vendor))
    for spec in specs:
        text, meant = _render_all(matrix, spec)
        assert text.endswith("\n") and not unsafe_positions(text, allow="\n"), "a line break escaped"
        twin_spec = dataclasses.replace(spec, components={
            axis: twin_matrix.components[axis][_twin(entry["name"])]
            for axis, entry in spec.components.items()})
        twin_text, _ = _render_all(twin_matrix, twin_spec)
        try:
            real, twin = _structure(text), _structure(twin_text)
            last = [i for i in instructions(text) if i.keyword == "label"][-1]
            got = {k: w.text for k, w in labels(last.args, ENV).items()}
        except LexError as exc:
            raise AssertionError(f"{spec.tag}: BuildKit would refuse the Dockerfile: {exc}") from None
        assert [r[0] for r in real] == [t[0] for t in twin], f"{spec.tag}: instructions differ"
        for r, t in zip(real, twin, strict=True):
            assert r == t, f"{spec.tag}: a value left its quoting: {r} != {t}"
        assert got == meant, f"{spec.tag}: labels are not the matrix text"


def _outcome(path: Path) -> str:
    try:
        matrix = load_matrix(path)
        _check_rendering(matrix)
    except InputError as exc:
        _check_refusal(exc)
        event("refused")
        return "refused"
    event("rendered")
    return "rendered"


def _write(text: str | bytes) -> Path:
    path = _project() / "matrix.yaml"
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    path.write_bytes(text)
    return path


# -- structural mutations --------------------------------------------------------------

BASE = yaml.safe_load(MINIMAL)



@st.composite
def mutated_matrix(draw: st.DrawFn) -> Any:
    data = yaml.safe_load(MINIMAL)
    for _ in range(draw(st.integers(1, 4))):
        paths = docpaths.paths(data)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace-text", "delete", "add", "rename", "append"]))
        if not path:
            continue
        parent, key = docpaths.get(data, path[:-1]), path[-1]
        if op == "replace":
            parent[key] = draw(VALUE)
        elif op == "replace-text":
            old = parent[key]
            new = draw(TEXT)
            parent[key] = (old[:draw(st.integers(0, len(old)))] + new if isinstance(old, str)
                           and draw(st.booleans()) else new)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.one_of(TEXT, REALISTIC))] = draw(VALUE)
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.one_of(TEXT, REALISTIC))] = parent.pop(key)
        elif op == "append" and isinstance(parent[key], list):
            parent[key].append(draw(VALUE))
    return data


@SETTINGS
@given(mutated_matrix(), st.booleans())
def test_structural_mutations(data, unicode):
    try:
        text = yaml.safe_dump(data, allow_unicode=unicode, sort_keys=False)
    except yaml.YAMLError:
        assume(False)
    _outcome(_write(text))


# -- text mutations --------------------------------------------------------------------

SNIPPETS = st.sampled_from([
    "&a ", "*a", "<<: *a\n", "<<: ", "!!binary ", "!vault ", "!!set ", "!!python/object ",
    "!!int ", "!!bool ", "!!timestamp ", "? ", "- ", ": ", "{", "}", "[", "]", "\"", "'", "|\n",
    ">\n", "\t", "%YAML 1.1\n", "---\n", "...\n", "\\u2028", "\\L", "\\N", "\\x00", "\\0",
    "\n", "\r\n", "\r", "#", "~", "null", ".nan", "2024-01-01", "0x1F", "1e999", "9" * 50,
    "x: &a [*a]\n", "  - name: six\n", "exclude: [{framework: six-1}]\n",
])


@st.composite
def mutated_text(draw: st.DrawFn) -> bytes:
    text = MINIMAL.encode()
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["snippet", "text", "bytes", "delete"]))
        if kind == "snippet":
            piece = draw(SNIPPETS).encode()
        elif kind == "text":
            piece = draw(TEXT).encode("utf-8", "surrogatepass")
        elif kind == "bytes":
            piece = draw(st.binary(max_size=6))
        else:
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
            continue
        text = text[:at] + piece + text[at:]
    return text


@SETTINGS
@given(mutated_text())
def test_text_mutations(text):
    _outcome(_write(text))


@SETTINGS
@given(mutated_text(), st.sampled_from([["list"], ["--list"], ["render", "1.16.0-cpu"],
                                        ["matrix"]]))
def test_the_command_line_answers_0_or_2(text, argv):
    """Through the CLI's in-process entry: exit 0 or 2, never 1 (an internal error), and
    every stderr line one line. DOCKER_HOST points nowhere (set by the test module)."""
    path = _write(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["--matrix", str(path), *argv])
        except SystemExit as exc:  # argparse
            code = exc.code
    lines = err.getvalue().splitlines()
    assert code in (0, 2), (code, lines)
    if code == 2:
        assert lines and all(ln.startswith("error: ") for ln in lines), lines
    assert all(not unsafe_positions(ln) and len(ln) <= MAX_LINE + 60 for ln in lines), lines


# -- free text where the schema lets any text through -----------------------------------

PRINTABLE = st.lists(st.one_of(
    st.sampled_from([c for c in SPECIAL if not unsafe_positions(c)]),
    st.characters(max_codepoint=0x2FFFF, exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))),
    min_size=1, max_size=16).map("".join)
MAYBE_UNSAFE = st.one_of(PRINTABLE, PRINTABLE, PRINTABLE, TEXT)
SPACES = st.sampled_from(["", " ", "\u00a0", "\u3000", "\u2028", "\u0085", "\t"])


@st.composite
def free_text_matrix(draw: st.DrawFn) -> Any:
    """The minimal matrix with text of any kind where the schema takes any text: apt
    reasons (comments), source and vendor (labels), descriptions, build.source,
    requires, kernel set descriptions (the image manifest), a constraint with spaces
    the schema's \\s lets through (shell words)."""
    data = yaml.safe_load(MINIMAL)
    fw1, fw2 = data["components"]["framework"]["six-1"], data["components"]["framework"]["six-2"]
    apt = data["components"]["base"]["deb12"]["apt"]
    for name in draw(st.lists(st.sampled_from(sorted(apt)), max_size=4)):
        apt[name]["why"] = "why " + draw(MAYBE_UNSAFE)
    if draw(st.booleans()):
        data["source"] = draw(MAYBE_UNSAFE)
    if draw(st.booleans()):
        data["vendor"] = draw(MAYBE_UNSAFE)
    if draw(st.booleans()):
        data["stages"]["base"]["description"] = draw(MAYBE_UNSAFE)
    if draw(st.booleans()):
        fw1["build"]["source"] = draw(MAYBE_UNSAFE)
    if draw(st.booleans()):
        fw2["requires"] = {draw(MAYBE_UNSAFE): draw(MAYBE_UNSAFE)}
    if draw(st.booleans()):
        fw2["kernel_sets"] = [{"name": "cpu", "device": "cpu", "description": draw(MAYBE_UNSAFE)}]
    text = yaml.safe_dump(data, allow_unicode=draw(st.booleans()), sort_keys=False)
    if draw(st.booleans()):  # a constraint, spaced the ways a schema's \s allows
        line = f'      constraints: ["six{draw(SPACES)}=={draw(SPACES)}1.16.0"]\n'
        text = text.replace("      device: cpu\n", "      device: cpu\n" + line, 1)
    return text


@SETTINGS
@given(free_text_matrix())
def test_free_text(text):
    _outcome(_write(text))


# -- tag expressions -------------------------------------------------------------------

ATOMS = st.sampled_from(["framework.version", "base.os", "base.version", "framework.name",
                         "framework.device", "'x'", "'-'", "1", "10", "framework.package"])
EXPRESSIONS = st.recursive(ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from([" ~ ", " + ", " * ", " ** ", " % "]), inner).map("".join),
    st.tuples(inner, st.sampled_from(["|lower", "|upper", "|replace('.', '')", "|replace('1', 'x' * 9)",
                                      ".split('.')[0]", "|string", "|length", "|list|join('-')",
                                      "|default('d')", "|center(10**9)", ".ljust(10**9)",
                                      "|truncate(3)", "[::-1]", "[0]"])).map("".join),
    st.tuples(st.just("("), inner, st.just(" if "), inner, st.just(" == "), inner,
              st.just(" else "), inner, st.just(")")).map("".join),
), max_leaves=6)

PIECES = st.sampled_from([
    "{{ ", " }}", "{% ", " %}", "for i in range(99999)", "endfor", "if ", "else", "endif",
    "framework.version", "framework", "base.os", "framework.name", "framework.__class__",
    "| join", "| replace('1', 'x' * 9)", "| center(10**9)", "| list", "| upper",
    "| default('x')", " ** ", " * ", " ~ ", " + ", " % ", "10", "10**100", "99999999",
    "range(", "range(10**6)", ")", "(", "lipsum(10**9)", "cycler", "namespace()",
    "self", "'x'", "'%999999999d'", ".split('.')", "[0]", "[::-1]", ".ljust(10**9)",
    ".zfill(100)", "{% set x = 1 %}", "{% macro m() %}{% endmacro %}", "{% include 'x' %}",
    "-cpu", "x", "{{ framework.version }}", "{# c #}", "{% raw %}", "{% endraw %}",
    "\u2028", "\n", "$HOME", "\\",
])


TAGS = st.one_of(
    st.lists(PIECES, min_size=1, max_size=10).map("".join),
    st.tuples(st.just("{{ framework.version }}-{{ "), EXPRESSIONS, st.just(" }}")).map("".join),
    st.tuples(st.just("{{ framework.version }}-"), st.lists(PIECES, max_size=4).map("".join)).map("".join),
)


@SETTINGS
@given(TAGS, st.lists(st.one_of(TAGS, st.tuples(st.just("{{ "), EXPRESSIONS, st.just(" }}"))
                                .map("".join)), max_size=2))
def test_tag_expressions(tag, aliases):
    data = yaml.safe_load(MINIMAL)
    data["images"][0]["tag"] = tag
    data["images"][0]["aliases"] = aliases
    _outcome(_write(yaml.safe_dump(data, sort_keys=False)))


def test_the_twin_oracle_sees_an_escaped_value():
    """The oracle is not blind: a template that puts a value in a RUN line unquoted, or
    in a LABEL without dquote, is caught."""
    path = _write(MINIMAL.replace("source: https://example.invalid/src",
                                  "source: 'x; touch /pwned'"))
    matrix = load_matrix(path)
    template = _project() / "templates" / "runtime.Dockerfile.j2"
    original = template.read_text()
    try:
        for line, value in (("RUN echo {{ entrypoint.source }}\n", "x; touch /pwned"),
                            ("RUN echo \"{{ entrypoint.source }}\"\n", "$(touch /pwned)"),
                            ('LABEL a="{{ entrypoint.source }}"\n', "a $HOME b")):
            template.write_text(original + line)
            bad = dataclasses.replace(matrix, entrypoint={**matrix.entrypoint, "source": value})
            with pytest.raises(AssertionError, match="left its quoting"):
                _check_rendering(bad)
    finally:
        template.write_text(original)
        template.touch()
