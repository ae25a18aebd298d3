"""Property-based tests (hypothesis) over matrix.lock (issue 22).

The property, for any lock beside a sound matrix: it either loads and every image
renders with it, or it is refused with exactly one line that names the lock
(``matrix.lock`` or ``matrix.lock:LINE``), exit status 2 through the CLI; never an
internal error (KeyError, RecursionError, exit 1), never a traceback, within a bounded
time and memory for each example, and nothing beside the lock is created or changed.

Locks are made two ways from a sound one (``lock_fixture.synthetic_lock`` of the
minimal matrix): mutations of its parsed content (keys dropped, added or renamed, values
of the wrong type, huge or deeply nested values, bad names, versions and digests),
sealed again as ``build.py lock`` seals (so the checks behind the seal are reached) or
not; and mutations of its text (brackets, raw bytes, truncation, floods).

Budgets are hypothesis profiles (tests/conftest.py): ``ci`` by default, ``long`` for
``make fuzz`` (FUZZ_EXAMPLES examples for each test).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from stagecraft import lockfile
from stagecraft.cli import main
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import Matrix, load_matrix
from stagecraft.render import render_stages
from stagecraft.safetext import MAX_LINE, unsafe_positions
from tests.conftest import ROOT
from tests.unit import docpaths
from tests.unit.lock_fixture import synthetic_lock
from tests.unit.minimal_matrix import MINIMAL

SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
BUDGET_S = 10  # one example: loading, validating and rendering take milliseconds
MAX_GROWTH_KIB = 200 * 1024  # peak resident memory of one example above its start


def _status(field: str) -> int:
    """``VmHWM`` or ``VmRSS`` of this process (KiB), from /proc/self/status."""
    with open("/proc/self/status") as fh:
        return next(int(ln.split()[1]) for ln in fh if ln.startswith(field + ":"))


def _reset_peak() -> int:
    """Reset this process's peak resident set size (``VmHWM``; proc(5), clear_refs
    value 5, Linux 4.0+) and return the resident size now (KiB): the peak after an
    example, less this, is what the example added at its worst."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status("VmRSS")


class _Project:
    """One scratch project for the module: the minimal matrix, its sound lock, the real
    templates and copied paths (a fixture per example would rebuild it each time)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="stagecraft-lockfuzz-"))
        caches = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in ("templates", "entrypoint", "probes"):
            shutil.copytree(ROOT / name, self.root / name, ignore=caches)
        (self.root / "tests").symlink_to(ROOT / "tests")
        (self.root / "matrix.yaml").write_text(MINIMAL)
        self.matrix: Matrix = load_matrix(self.root / "matrix.yaml")
        self.specs = expand(self.matrix)
        self.sound = synthetic_lock(self.matrix)
        self.doc = json.loads(self.sound)
        self.lock = self.root / "matrix.lock"
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.lock.write_bytes(data)
        # A new modification time for every example: the lock is read once per file
        # version (lockfile.load_for), and two examples may fall in one clock tick.
        self.writes += 1
        os.utime(self.lock, ns=(self.writes * 10**9, self.writes * 10**9))

    def listing(self) -> dict[str, tuple[int, int]]:
        """Every entry of the project directory but the lock, with its size and mtime: a
        file written beside the lock (a temporary, a report) or a directory changed."""
        return {e.name: (e.stat(follow_symlinks=False).st_size, e.stat(follow_symlinks=False).st_mtime_ns)
                for e in os.scandir(self.root) if e.name != self.lock.name}


_P: _Project | None = None


def project() -> _Project:
    global _P
    if _P is None:
        _P = _Project()
    return _P


@pytest.fixture(scope="module", autouse=True)
def _scratch():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # a case that reached an engine fails
        yield
    global _P, _R
    for made in (_P, _R):
        if made is not None:
            shutil.rmtree(made.root, ignore_errors=True)
    _P = _R = None


def seal(doc: Any) -> bytes:
    """``doc`` as JSON with its integrity digest renewed (as `build.py lock` writes it)
    when it is a mapping: the checks behind the seal then see the mutation."""
    if isinstance(doc, dict):
        body = {k: v for k, v in doc.items() if k != "integrity"}
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        doc = {**body, "integrity": "sha256:" + hashlib.sha256(canon.encode()).hexdigest()}
    return json.dumps(doc).encode()


# -- the property ----------------------------------------------------------------------

def _check_refusal(exc: InputError) -> None:
    assert len(exc.problems) == 1, [p.line() for p in exc.problems]
    line = exc.problems[0].line()
    assert exc.problems[0].where.split(":")[0] == "matrix.lock", line
    assert not unsafe_positions(line) and len(line) <= MAX_LINE + 50, repr(line)


def outcome(data: bytes, record: bool = True) -> str:
    """Write ``data`` as the lock, load it and render every image with it: "rendered" or
    "refused", checking the property on the way."""
    p = project()
    before = p.listing()
    p.write(data)
    rss = _reset_peak()
    start = time.monotonic()
    try:
        try:
            lockfile.loads(data.decode("utf-8"), "matrix.lock")
        except UnicodeDecodeError:
            pass  # the file reader refuses it below, naming the byte's line
        for spec in p.specs:
            render_stages(p.matrix, spec)
        result = "rendered"
    except InputError as exc:
        _check_refusal(exc)
        result = "refused"
    took = time.monotonic() - start
    grew = _status("VmHWM") - rss
    assert took < BUDGET_S, f"{took:.1f} s for one lock"
    assert grew < MAX_GROWTH_KIB, f"{grew // 1024} MiB more at the peak for one lock"
    assert p.listing() == before, "something beside the lock was created or changed"
    if record:
        event(result)
    return result


# -- content mutations -----------------------------------------------------------------

SHA = "c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026"
WORDS = st.sampled_from([
    "", " ", "six", "Six", "six_", "six--x", "-six", "six.", "1.16.0", "1.16.0x", "1..16", "v1",
    "1!2.0", "1.0+local", "1.0.post1.dev2", "0.19.1-1", "1:2.36-9", "2.36-9+deb12u14", "a:b",
    "1.0~rc1", SHA, SHA.upper(), SHA[:63], SHA + "0", "sha256:" + SHA,
    "http://deb.debian.org/debian", "ftp://x", "https://x y", "linux/amd64", "linux/mips",
    "3.11", "3", "x86_64-manylinux_2_36", "six-1.16.0-py3-none-any.whl", "six-1.16.0.tar.gz",
    "numpy-1.26.4-py3-none-any.whl", "six-1.16.0.exe", "../six.whl", "six==1.16.0",
    "six>>1", "runtime six-1 on deb12 linux/amd64", "debian deb12 linux/amd64", "debian x",
    "release", "base", "stages", "inputs", "packages", "files", "version", "sha256",
    "unresolved", "python_platform", "integrity", "schema", "stagecraft-lock/1",
    "a\nb", "a\u2028b", "\x00", "\ud800", "é", "日本", "\u202e", "$(id)", "'", '"', "\\",
    "Sat, 11 Jul 2026 10:16:37 UTC", "tini", "libc6", "libstdc++6", "Tini",
]) | st.builds(lambda c, n: c * n, st.sampled_from(["x", "1", "1."]), st.sampled_from([300, 5000]))
SCALARS = st.one_of(WORDS, st.text(max_size=20), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(WORDS, inner, max_size=4)), max_leaves=10)


def _nested(depth: int, leaf: Any, kind: str) -> Any:
    for _ in range(depth):
        leaf = [leaf] if kind == "list" else {"k": leaf}
    return leaf


HUGE = st.one_of(
    st.builds(_nested, st.integers(10, 400), SCALARS, st.sampled_from(["list", "dict"])),
    st.builds(lambda n, v: [v] * n, st.integers(1000, 20_000), SCALARS),
    st.builds(lambda n: {f"pkg{i}": {"version": "1.0", "files": {f"pkg{i}-1.0.tar.gz": SHA}}
                         for i in range(n)}, st.integers(1000, 6000)),
    st.builds(lambda n: "x" * n, st.integers(10_000, 1_000_000)),
    st.builds(lambda n: 10 ** n, st.integers(300, 4000)),
)



@st.composite
def mutated_doc(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(project().doc)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(docpaths.paths(doc)))
        if not path:
            continue
        parent, key = docpaths.get(doc, path[:-1]), path[-1]
        # A huge value is one operation in about twenty: each costs a second or so.
        op = draw(st.sampled_from(["replace", "word", "delete", "add", "rename", "append"] * 3
                                  + ["huge"]))
        if op == "replace":
            parent[key] = draw(VALUES)
        elif op == "word":
            parent[key] = draw(WORDS)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(WORDS)] = draw(VALUES)
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(WORDS)] = parent.pop(key)
        elif op == "huge":
            parent[key] = draw(HUGE)
        elif op == "append" and isinstance(parent[key], list):
            parent[key].append(draw(VALUES))
    return doc


@SETTINGS
@given(mutated_doc(), st.integers(0, 9))
def test_content_mutations(doc, unsealed):
    data = seal(doc) if unsealed else json.dumps(doc).encode()
    outcome(data)


# -- text mutations --------------------------------------------------------------------

SNIPPETS = st.sampled_from([
    "[", "]", "{", "}", ",", ":", '"', "\\", "\\u0000", "\\ud800", "\\u2028", "NaN", "Infinity",
    "-Infinity", "1e999", "9" * 5000, "null", "true", "\n", "\r\n", "\t", "\ufeff", "//",
    '"a": 1,', '"integrity": "x",', '"schema": "stagecraft-lock/1",',
])
FLOODS = st.builds(lambda piece, n: piece * n, st.sampled_from(["[", "{", '{"a":', "[1,", '"', "\\"]),
                   st.integers(1, 200_000))


@st.composite
def mutated_text(draw: st.DrawFn) -> bytes:
    text = project().sound.encode()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["snippet", "bytes", "delete", "truncate", "flood"]))
        if kind == "snippet":
            text = text[:at] + draw(SNIPPETS).encode("utf-8", "surrogatepass") + text[at:]
        elif kind == "bytes":
            text = text[:at] + draw(st.binary(max_size=8)) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 60)):]
        elif kind == "truncate":
            text = text[:at]
        else:
            text = text[:at] + draw(FLOODS).encode() + text[at:]
    return text


@SETTINGS
@given(mutated_text())
def test_text_mutations(data):
    outcome(data)


@SETTINGS
@given(st.one_of(st.binary(max_size=200), FLOODS.map(str.encode),
                 st.builds(seal, VALUES), st.builds(seal, HUGE)))
def test_anything_as_a_lock(data):
    outcome(data)


# -- through the command line ----------------------------------------------------------

@SETTINGS
@given(st.one_of(mutated_doc().map(seal), mutated_text()),
       st.sampled_from([["lock", "--check"], ["render", "1.16.0-cpu"], ["render", "1.17.0-cpu"]]))
def test_the_command_line_answers_0_or_2_with_one_line(data, argv):
    """The CLI's in-process entry: exit 0, or 2 naming the lock: one line for a lock that
    is refused as such; for a sound lock that differs from the matrix, `lock --check`
    lists each difference on its line. Never 1 (an internal error)."""
    p = project()
    try:
        lockfile.loads(data.decode("utf-8"), "matrix.lock")
        sound = True
    except (InputError, UnicodeDecodeError):
        sound = False
    before = p.listing()
    p.write(data)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(["--matrix", str(p.root / "matrix.yaml"), *argv])
        except SystemExit as exc:  # argparse
            code = exc.code
    lines = err.getvalue().splitlines()
    assert code in (0, 2), (code, lines)
    if code == 2:
        assert all(ln.startswith("error: matrix.lock") for ln in lines), lines
        assert len(lines) == 1 or (sound and argv[0] == "lock"), lines
    assert all(not unsafe_positions(ln) and len(ln) <= MAX_LINE + 60 for ln in lines), lines
    assert p.listing() == before
    event(f"exit {code}")


def test_the_sound_lock_renders():
    """The property's other side is reachable: the unmutated lock loads and renders, and
    the oracle refuses what it should; the memory measure sees growth."""
    rss = _reset_peak()
    hold = bytearray(64 * 1024 * 1024)
    assert _status("VmHWM") - rss > 60 * 1024
    del hold
    assert outcome(project().sound.encode(), record=False) == "rendered"
    assert outcome(b"[" * 100_000, record=False) == "refused"
    doc = copy.deepcopy(project().doc)
    del doc["debian"]["debian deb12 linux/amd64"]["release"]
    assert outcome(seal(doc), record=False) == "refused"


# -- the committed lock ------------------------------------------------------------------

class _Real:
    """A copy of the project's matrix and committed lock: entries the minimal lock lacks
    (several platforms, sets resolved over another, `unresolved`)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="stagecraft-lockfuzz-real-"))
        for name in ("templates", "entrypoint", "probes", "tests/image"):
            shutil.copytree(ROOT / name, self.root / name, ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("matrix.yaml", "matrix.lock"):
            shutil.copy(ROOT / name, self.root / name)
        self.matrix = load_matrix(self.root / "matrix.yaml")
        specs = {s.tag: s for s in expand(self.matrix)}
        # A CPU image resolved over its runtime, and the GPU image whose runtime is unresolved.
        self.specs = [specs["2.6.2-cpu-jupyter"], specs["3.2.0-gpu-cuda12.6-cudnn9.5"]]
        self.doc = json.loads((ROOT / "matrix.lock").read_text())
        self.writes = 0


_R: _Real | None = None


def real() -> _Real:
    global _R
    if _R is None:
        _R = _Real()
    return _R


@st.composite
def mutated_real(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(real().doc)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["debian", "python"]))
        key = draw(st.sampled_from(sorted(doc[kind])))
        path = draw(st.sampled_from(docpaths.paths(doc[kind][key])[:400]))
        if not path:
            doc[kind][key] = draw(VALUES)
            continue
        parent, last = docpaths.get(doc[kind][key], path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "word", "delete", "rename"]))
        if op == "replace":
            parent[last] = draw(VALUES)
        elif op == "word":
            parent[last] = draw(WORDS)
        elif op == "delete":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(WORDS)] = parent.pop(last)
    return doc


@settings(SETTINGS, max_examples=max(1, settings.default.max_examples // 25))
@given(st.data())
def test_mutations_of_the_committed_lock(data):
    """Mutations of the committed lock, resealed: they load and both images render, or
    one line names the lock."""
    doc = data.draw(mutated_real())
    lock = _R.root / "matrix.lock"
    lock.write_bytes(seal(doc))
    _R.writes += 1
    os.utime(lock, ns=(_R.writes * 10**9, _R.writes * 10**9))
    start = time.monotonic()
    try:
        for spec in _R.specs:
            render_stages(_R.matrix, spec)
        event("rendered")
    except InputError as exc:
        _check_refusal(exc)
        event("refused")
    assert time.monotonic() - start < BUDGET_S


def test_the_committed_lock_renders_both_images():
    r = real()
    (r.root / "matrix.lock").write_bytes(seal(r.doc))
    r.writes += 1
    os.utime(r.root / "matrix.lock", ns=(r.writes * 10**9, r.writes * 10**9))
    for spec in r.specs:
        assert render_stages(r.matrix, spec)
