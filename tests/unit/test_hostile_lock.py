"""Hostile matrix.lock inputs (issue 22): a corpus, each case refused with one line that
names the lock, the entry and (where the text has one) the line, exit status 2; never an
internal error. The reproductions of the issue run through the real command line.

Cases mutate a sound lock of the minimal matrix (``lock_fixture``); content cases are
sealed again as ``build.py lock`` seals, so they reach the checks behind the seal.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stagecraft import lockfile
from stagecraft.errors import InputError
from stagecraft.matrix import load_matrix
from tests.conftest import ROOT
from tests.unit.lock_fixture import synthetic_lock
from tests.unit.minimal_matrix import MINIMAL
from tests.unit.test_lock_fuzz import seal

DEB = "debian deb12 linux/amd64"
PY = "runtime six-1 on deb12 linux/amd64"
SHA = "c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026"


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("minimal")
    for name in ("templates", "entrypoint", "probes"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").symlink_to(ROOT / "tests")
    (root / "matrix.yaml").write_text(MINIMAL)
    return synthetic_lock(load_matrix(root / "matrix.yaml"))


def _set(path: tuple, value: Any):
    def op(doc: dict) -> dict:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return doc
    return op


def _drop(path: tuple):
    def op(doc: dict) -> dict:
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        return doc
    return op


def _rename(path: tuple, new: str):
    def op(doc: dict) -> dict:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[new] = node.pop(path[-1])
        return doc
    return op


REL = ("debian", DEB, "release")
LIBC = ("debian", DEB, "base", "libc6")
DIN = ("debian", DEB, "inputs")
PKG = ("python", PY, "packages", "six")
PIN = ("python", PY, "inputs")
WHEEL = "six-1.16.0-py3-none-any.whl"

# (id, mutation of the parsed lock, fragment of the one refusal line)
CONTENT_CASES: list[tuple[str, Any, str]] = [
    # The issue's reproduction: a Debian entry without its release passed lock --check.
    ("no-release", _drop(REL), "debian entry 'debian deb12 linux/amd64': 'release' is a required property"),
    ("no-matrix", _drop(("matrix",)), "'matrix' is a required property"),
    ("no-debian", _drop(("debian",)), "'debian' is a required property"),
    ("no-python", _drop(("python",)), "'python' is a required property"),
    ("extra-top-key", _set(("extras",), {}), "unknown key ('extras' was unexpected)"),
    ("matrix-list", _set(("matrix",), []), "[] is not of type 'object'"),
    ("debian-list", _set(("debian",), [1]), "[1] is not of type 'object'"),
    ("python-null", _set(("python",), None), "None is not of type 'object'"),
    ("python-string", _set(("python",), "x"), "'x' is not of type 'object'"),
    ("repository-int", _set(("matrix", "repository"), 7), "7 is not of type 'string'"),
    ("no-source", _drop(("matrix", "source")), "'source' is a required property"),
    ("matrix-extra", _set(("matrix", "registry"), "x"), "unknown key ('registry' was unexpected)"),
    ("debian-entry-list", _set(("debian", DEB), []), "[] is not of type 'object'"),
    ("debian-key-short", _rename(("debian", DEB), "debian deb12"), "'debian deb12' is not of the expected form"),
    ("debian-key-other", _rename(("debian", DEB), "ubuntu deb12 linux/amd64"), "is not of the expected form"),
    ("debian-key-newline", _rename(("debian", DEB), "debian deb12\nlinux/amd64"), "is not of the expected form"),
    ("no-inputs", _drop(DIN), "'inputs' is a required property"),
    ("no-base", _drop(("debian", DEB, "base")), "'base' is a required property"),
    ("no-stages", _drop(("debian", DEB, "stages")), "'stages' is a required property"),
    ("debian-extra", _set(("debian", DEB, "sources"), {}), "unknown key ('sources' was unexpected)"),
    ("release-no-date", _drop(REL + ("date",)), "'date' is a required property"),
    ("release-no-inrelease", _drop(REL + ("inrelease_sha256",)), "'inrelease_sha256' is a required property"),
    ("release-no-epoch", _drop(REL + ("source_date_epoch",)), "'source_date_epoch' is a required property"),
    ("epoch-text", _set(REL + ("source_date_epoch",), "1783764997"), "'1783764997' is not of type 'integer'"),
    ("epoch-negative", _set(REL + ("source_date_epoch",), -1), "-1 is negative"),
    ("epoch-float", _set(REL + ("source_date_epoch",), 1.5), "1.5 is not of type 'integer'"),
    ("epoch-huge", _set(REL + ("source_date_epoch",), 10**30), "is above the limit"),
    ("epoch-bool", _set(REL + ("source_date_epoch",), True), "True is not of type 'integer'"),
    ("epoch-null", _set(REL + ("source_date_epoch",), None), "None is not of type 'integer'"),
    ("date-newline", _set(REL + ("date",), "Sat\nRUN x"), "is not of the expected form"),
    ("date-int", _set(REL + ("date",), 5), "5 is not of type 'string'"),
    ("inrelease-upper", _set(REL + ("inrelease_sha256",), SHA.upper()), "is not of the expected form"),
    ("inrelease-short", _set(REL + ("inrelease_sha256",), SHA[:63]), "is not of the expected form"),
    ("inrelease-long", _set(REL + ("inrelease_sha256",), SHA + "0"), "is not of the expected form"),
    ("inrelease-prefixed", _set(REL + ("inrelease_sha256",), "sha256:" + SHA), "is not of the expected form"),
    ("release-extra", _set(REL + ("by",), "me"), "unknown key ('by' was unexpected)"),
    ("deb-no-version", _drop(LIBC + ("version",)), "'version' is a required property"),
    ("deb-no-sha", _drop(LIBC + ("sha256",)), "'sha256' is a required property"),
    ("deb-extra", _set(LIBC + ("size",), 1), "unknown key ('size' was unexpected)"),
    ("deb-version-int", _set(LIBC + ("version",), 2), "2 is not of type 'string'"),
    ("deb-version-space", _set(LIBC + ("version",), "2.36 9"), "is not of the expected form"),
    ("deb-version-letters", _set(LIBC + ("version",), "abc"), "is not of the expected form"),
    ("deb-version-empty", _set(LIBC + ("version",), ""), "is not of the expected form"),
    ("deb-version-epoch-only", _set(LIBC + ("version",), "1:"), "is not of the expected form"),
    ("deb-version-shell", _set(LIBC + ("version",), "2.36-9;rm -rf /"), "is not of the expected form"),
    ("deb-version-star", _set(LIBC + ("version",), "2.36*"), "is not of the expected form"),
    ("deb-version-trailing-dash", _set(LIBC + ("version",), "2.36-"), "is not of the expected form"),
    ("deb-sha-upper", _set(LIBC + ("sha256",), SHA.upper()), "is not of the expected form"),
    ("deb-sha-short", _set(LIBC + ("sha256",), "abc"), "is not of the expected form"),
    ("deb-sha-null", _set(LIBC + ("sha256",), None), "None is not of type 'string'"),
    ("deb-record-list", _set(LIBC, ["2.36", SHA]), "is not of type 'object'"),
    ("deb-name-upper", _rename(LIBC, "Libc6"), "'Libc6' is not of the expected form"),
    ("deb-name-space", _rename(LIBC, "libc 6"), "is not of the expected form"),
    ("deb-name-dash", _rename(LIBC, "-libc6"), "is not of the expected form"),
    ("deb-name-one-char", _rename(LIBC, "l"), "is not of the expected form"),
    ("deb-name-slash", _rename(LIBC, "../libc6"), "is not of the expected form"),
    ("deb-name-newline", _rename(LIBC, "libc6\n"), "key 'libc6\\n' holds U+000A (LINE FEED)"),
    ("stage-set-list", _set(("debian", DEB, "stages", "base"), []), "[] is not of type 'object'"),
    ("mirror-ftp", _set(DIN + ("mirror",), "ftp://deb.debian.org"), "is not of the expected form"),
    ("mirror-space", _set(DIN + ("mirror",), "http://x y"), "is not of the expected form"),
    ("mirror-int", _set(DIN + ("mirror",), 80), "80 is not of type 'string'"),
    ("no-arch", _drop(DIN + ("arch",)), "'arch' is a required property"),
    ("include-bad-name", _set(DIN + ("include",), ["Curl"]), "'Curl' is not of the expected form"),
    ("include-string", _set(DIN + ("include",), "curl"), "'curl' is not of type 'array'"),
    ("apt-spec-shell", _set(DIN + ("stages", "base"), ["tini=0.19;rm"]), "is not of the expected form"),
    ("apt-specs-dict", _set(DIN + ("stages", "base"), {"tini": "0.19"}), "is not of type 'array'"),
    ("suite-upper", _set(DIN + ("suite",), "Bookworm"), "is not of the expected form"),
    ("inputs-extra", _set(DIN + ("keyring",), "x"), "unknown key ('keyring' was unexpected)"),
    ("python-entry-list", _set(("python", PY), []), "is not of type 'object'"),
    ("no-python-inputs", _drop(PIN), "'inputs' is a required property"),
    ("no-packages", _drop(("python", PY, "packages")), "'packages' is a required property"),
    ("no-python-platform", _drop(("python", PY, "python_platform")), "'python_platform' is a required property"),
    ("python-platform-space", _set(("python", PY, "python_platform"), "x86 64"), "is not of the expected form"),
    ("unresolved-and-packages", _set(("python", PY, "unresolved"), "index down"), "unknown key"),
    ("unresolved-empty", lambda d: {**d, "python": {**d["python"], PY: {
        "inputs": d["python"][PY]["inputs"], "unresolved": ""}}}, "'' breaks minLength 1"),
    ("unresolved-int", lambda d: {**d, "python": {**d["python"], PY: {
        "inputs": d["python"][PY]["inputs"], "unresolved": 5}}}, "5 is not of type 'string'"),
    ("unresolved-newline", lambda d: {**d, "python": {**d["python"], PY: {
        "inputs": d["python"][PY]["inputs"], "unresolved": "down\nRUN curl x | sh"}}},
     "holds U+000A (LINE FEED)"),
    ("unresolved-u2028", lambda d: {**d, "python": {**d["python"], PY: {
        "inputs": d["python"][PY]["inputs"], "unresolved": "down\u2028RUN x"}}},
     "holds U+2028 (LINE SEPARATOR)"),
    ("unresolved-huge", lambda d: {**d, "python": {**d["python"], PY: {
        "inputs": d["python"][PY]["inputs"], "unresolved": "x" * 100_000}}}, "breaks maxLength 1000"),
    ("py-name-upper", _rename(PKG, "Six"), "'Six' is not of the expected form"),
    ("py-name-underscore", _rename(PKG, "six_x"), "is not of the expected form"),
    ("py-name-double-dash", _rename(PKG, "six--x"), "is not a PEP 503 normalised name ('six-x')"),
    ("py-name-leading-dash", _rename(PKG, "-six"), "is not of the expected form"),
    ("py-name-empty", _rename(PKG, ""), "is not of the expected form"),
    ("py-version-suffix", _set(PKG + ("version",), "1.16.0x"), "'1.16.0x' is not a PEP 440 version"),
    ("py-version-double-dot", _set(PKG + ("version",), "1..16"), "is not a PEP 440 version"),
    ("py-version-v", _set(PKG + ("version",), "v1.16.0"), "is not of the expected form"),
    ("py-version-space", _set(PKG + ("version",), "1.16.0 "), "is not of the expected form"),
    ("py-version-shell", _set(PKG + ("version",), "1.16.0;id"), "is not of the expected form"),
    ("py-version-word", _set(PKG + ("version",), "latest"), "is not of the expected form"),
    ("py-version-int", _set(PKG + ("version",), 1), "1 is not of type 'string'"),
    # h22 review: a local version from PyPI, versions not as the resolver writes them
    ("py-version-local-on-pypi", _set(PKG, {"version": "1.16.0+local", "files": {"six-1.16.0+local-py3-none-any.whl": SHA}}),
     "'1.16.0+local' is a local version, which PyPI does not serve"),
    ("py-version-not-normal", _set(PKG, {"version": "01.16.00", "files": {"six-01.16.00-py3-none-any.whl": SHA}}),
     "'01.16.00' is not in PEP 440 normal form ('1.16.0')"),
    ("py-version-not-normal-rc", _set(PKG, {"version": "1.16.0-rc.1", "files": {"six-1.16.0rc1-py3-none-any.whl": SHA}}),
     "is not in PEP 440 normal form ('1.16.0rc1')"),
    ("py-version-upper", _set(PKG, {"version": "1.16.0RC1", "files": {"six-1.16.0rc1-py3-none-any.whl": SHA}}),
     "is not in PEP 440 normal form ('1.16.0rc1')"),
    ("py-version-epoch-zero", _set(PKG, {"version": "0!1.16.0", "files": {WHEEL: SHA}}),
     "is not in PEP 440 normal form ('1.16.0')"),
    ("py-no-files", _set(PKG + ("files",), {}), "breaks minProperties 1"),
    ("py-files-list", _set(PKG + ("files",), [SHA]), "is not of type 'object'"),
    ("py-file-exe", _set(PKG + ("files",), {"six-1.16.0.exe": SHA}), "is not of the expected form"),
    ("py-file-path", _set(PKG + ("files",), {"../six-1.16.0-py3-none-any.whl": SHA}), "is not of the expected form"),
    ("py-file-other-package", _set(PKG + ("files",), {"numpy-1.26.4-py3-none-any.whl": SHA}),
     "is a file of numpy 1.26.4, not of six 1.16.0"),
    ("py-file-other-version", _set(PKG + ("files",), {"six-1.15.0-py3-none-any.whl": SHA}),
     "is a file of six 1.15.0, not of six 1.16.0"),
    ("py-file-not-a-wheel", _set(PKG + ("files",), {"six.whl": SHA}), "is not a wheel or sdist file name"),
    ("py-file-sha-upper", _set(PKG + ("files",), {WHEEL: SHA.upper()}), "is not of the expected form"),
    ("py-file-sha-int", _set(PKG + ("files",), {WHEEL: 1}), "1 is not of type 'string'"),
    ("py-record-extra", _set(PKG + ("url",), "http://x"), "unknown key ('url' was unexpected)"),
    ("py-no-version", _drop(PKG + ("version",)), "'version' is a required property"),
    ("py-inputs-python-int", _set(PIN + ("python",), 3.11), "3.11 is not of type 'string'"),
    ("py-inputs-python-word", _set(PIN + ("python",), "python3"), "is not of the expected form"),
    ("py-inputs-no-deps-text", _set(PIN + ("no_deps",), "false"), "'false' is not of type 'boolean'"),
    ("py-inputs-after-int", _set(PIN + ("after",), 1), "1 is not allowed here"),
    ("py-inputs-index-ftp", _set(PIN + ("index_url",), "ftp://x"), "is not allowed here"),
    ("py-inputs-requirement-bad", _set(PIN + ("requirements",), ["six>>1"]), "is not of the expected form"),
    # h22 review: packages that contradict the entry's own inputs (a resealed lock)
    ("py-locked-version-breaks-requirement", _set(PIN + ("requirements",), ["six==1.15.0"]),
     "packages.six.version: '1.16.0' does not satisfy the entry's requirement 'six==1.15.0'"),
    ("py-locked-version-breaks-range", _set(PIN + ("requirements",), ["six<1.16"]),
     "'1.16.0' does not satisfy the entry's requirement 'six<1.16'"),
    ("py-locked-version-breaks-constraint", _set(PIN + ("constraints",), ["six!=1.16.0"]),
     "'1.16.0' does not satisfy the entry's constraint 'six!=1.16.0'"),
    ("py-required-not-locked", _set(PIN + ("requirements",), ["numpy==1.26.4"]),
     "inputs.requirements.0: 'numpy==1.26.4' is required but numpy is not locked"),
    ("py-required-another-locked", _set(("python", PY, "packages"),
                                        {"six-x": {"version": "1.16.0", "files": {"six_x-1.16.0-py3-none-any.whl": SHA}}}),
     "'six==1.16.0' is required but six is not locked"),
    ("py-inputs-requirements-text", _set(PIN + ("requirements",), "six==1.16.0"), "is not of type 'array'"),
    ("py-inputs-no-constraints", _drop(PIN + ("constraints",)), "'constraints' is a required property"),
    ("entry-key-huge", _rename(("python", PY), "x" * 5000), "python: key 'xxxxx"),
    ("entry-key-nul", _rename(("python", PY), "a\x00b"), "python: key 'a\\x00b' is not of the expected form"),
    ("repository-bidi", _set(("matrix", "repository"), "example\u202e/fw"), "holds U+202E"),
    ("source-surrogate", _set(("matrix", "source"), "x\ud800"), "holds U+D800"),
    ("deep-value", _set(("matrix", "source"), json.loads("[" * 12 + "]" * 12)), "is not of type 'string'"),
    ("many-packages", _set(("python", PY, "packages"), {
        f"pkg{i}": {"version": "1.0", "files": {f"pkg{i}-1.0.tar.gz": SHA}} for i in range(6000)}),
     "breaks maxProperties 5000"),
    ("big-list", _set(DIN + ("include",), ["curl"] * 2000), "breaks maxItems 1000"),
]

# (id, text of the lock given the sound one, fragment of the one refusal line)
TEXT_CASES: list[tuple[str, Any, str]] = [
    # The issue's reproduction: an internal RecursionError (exit 1) before.
    ("brackets-100000", lambda t: "[" * 100_000, "matrix.lock:1: nested more than 16 levels deep"),
    ("braces-100000", lambda t: "{" * 100_000, "nested more than 16 levels deep"),
    ("keys-50000", lambda t: '{"a":' * 50_000, "nested more than 16 levels deep"),
    ("deep-inside", lambda t: t.replace('"libc6": {', '"libc6": ' + "[" * 40 + "{", 1),
     "nested more than 16 levels deep"),
    ("brackets-in-strings-are-text", lambda t: '{"schema": "' + "[" * 100 + '"}',
     "not a stagecraft lock of schema"),
    ("empty", lambda t: "", "not valid JSON"),
    ("spaces", lambda t: "   \n", "not valid JSON"),
    ("null", lambda t: "null", "not a stagecraft lock of schema stagecraft-lock/1 (found 'NoneType')"),
    ("list", lambda t: "[]", "(found 'list')"),
    ("number", lambda t: "1", "(found 'int')"),
    ("string", lambda t: '"x"', "(found 'str')"),
    ("nan", lambda t: '{"schema": NaN}', "not valid JSON"),
    ("infinity", lambda t: t.replace('"source_date_epoch": 1783764997', '"source_date_epoch": Infinity', 1),
     "not valid JSON"),
    ("huge-int", lambda t: t.replace('"source_date_epoch": 1783764997', '"source_date_epoch": ' + "9" * 5000, 1),
     "not valid JSON"),
    ("duplicate-key", lambda t: t.replace('"libc6": {', '"libc6": {"version": "1-1", "sha256": "' + SHA + '"},\n"libc6": {', 1),
     "duplicate key 'libc6'"),
    ("truncated-half", lambda t: t[: len(t) // 2], "not valid JSON"),
    ("truncated-last-brace", lambda t: t.rstrip()[:-1], "not valid JSON"),
    ("trailing-comma", lambda t: t.replace('"python": {', '"python": {,', 1), "not valid JSON"),
    ("control-char", lambda t: t.replace("bookworm", "book\x01worm", 1), "not valid JSON"),
    ("other-schema", lambda t: t.replace("stagecraft-lock/1", "stagecraft-lock/2", 1), "not a stagecraft lock of schema"),
    ("edited", lambda t: t.replace("1.16.0", "1.16.1", 1), "edited by hand"),
    ("too-large", lambda t: " " * (9 * 1024 * 1024), "larger than 8192 KiB"),
    ("many-values", lambda t: "[" + "1," * 600_000 + "1]", "more than 500000 values"),
    ("escaped-line-separator", lambda t: lockfile.with_seal_renewed(
        t.replace('"source": "https://example.invalid/src"', '"source": "x\\u2028RUN id"', 1)),
     "holds U+2028 (LINE SEPARATOR)"),
    ("escaped-nul-in-version", lambda t: lockfile.with_seal_renewed(
        t.replace('"version": "1.16.0"', '"version": "1.16.0\\u0000"', 1)), "is not of the expected form"),
]


def _refusal(text: str) -> InputError:
    with pytest.raises(InputError) as info:
        lockfile.loads(text, "matrix.lock")
    return info.value


def _one_line(exc: InputError, fragment: str) -> str:
    assert len(exc.problems) == 1, [p.line() for p in exc.problems]
    line = exc.problems[0].line()
    assert re.match(r"matrix\.lock(:\d+)?: ", line), line
    assert fragment in line, f"{line!r} lacks {fragment!r}"
    assert "\n" not in line and len(line) < 2100, line
    return line


@pytest.mark.parametrize("case", CONTENT_CASES, ids=[c[0] for c in CONTENT_CASES])
def test_hostile_content(case, sound):
    name, mutate, fragment = case
    doc = mutate(copy.deepcopy(json.loads(sound)))
    text = seal(doc).decode()
    line = _one_line(_refusal(text), fragment)
    if isinstance(doc, dict) and name.startswith(("deb-", "py-", "release-", "epoch-", "inrelease-")):
        assert re.match(r"matrix\.lock:\d+: (debian|python) entry '", line), line


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_hostile_text(case, sound):
    name, make, fragment = case
    _one_line(_refusal(make(sound)), fragment)


def test_corpus_size():
    assert len(CONTENT_CASES) + len(TEXT_CASES) >= 140


def test_the_line_named_is_the_entry_s(sound):
    """In a lock written by `build.py lock` (one package per line) the line named is the
    package's own line."""
    doc = json.loads(sound)
    doc["python"][PY]["packages"]["six"]["version"] = "1.16.0x"
    text = lockfile.with_seal_renewed(json.dumps(doc))
    line = _one_line(_refusal(text), "is not a PEP 440 version")
    number = int(line.split(":")[1])
    assert '"six": {"version": "1.16.0x"' in text.splitlines()[number - 1], line


def test_a_quoted_file_name_is_read_as_its_index_serves_it(sound):
    """A wheel whose URL quotes its local version (PyTorch's index: ``%2B``) is a file of
    its own distribution; one of another version is not. (A local version comes from
    the entry's own index: without index_url it is refused, py-version-local-on-pypi.)"""
    doc = json.loads(sound)
    doc["python"][PY]["inputs"]["index_url"] = "https://download.pytorch.org/whl/cu128"
    rec = doc["python"][PY]["packages"]["six"]
    rec["version"] = "1.16.0+cu128"
    rec["files"] = {"six-1.16.0%2Bcu128-py3-none-any.whl": SHA}
    assert lockfile.loads(seal(doc).decode()).python[PY]["packages"]["six"] == rec
    rec["files"] = {"six-1.16.0%2Bcu126-py3-none-any.whl": SHA}
    _one_line(_refusal(seal(doc).decode()), "is a file of six 1.16.0+cu126, not of six 1.16.0+cu128")


def test_the_committed_lock_is_sound():
    text = (ROOT / "matrix.lock").read_text()
    assert lockfile.loads(text).python


# -- the reproductions, through the real command line ---------------------------------------

def _cli(project: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *argv], cwd=project,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": "tcp://127.0.0.1:9"})


def _no_release(text: str) -> str:
    doc = json.loads(text)
    del doc["debian"]["debian debian12 linux/amd64"]["release"]
    return lockfile.with_seal_renewed(json.dumps(doc))


@pytest.mark.parametrize("damage, fragment", [
    (lambda t: "[" * 100_000, "matrix.lock:1: nested more than 16 levels deep: not a lock"),
    (_no_release, "debian entry 'debian debian12 linux/amd64': 'release' is a required property"),
], ids=["brackets-100000", "no-release"])
@pytest.mark.parametrize("argv", [["lock", "--check"], ["render", "2.6.2-cpu", "--platform", "linux/amd64"]],
                         ids=["check", "render"])
def test_issue_reproductions_exit_2_with_one_line(real_project, damage, fragment, argv):
    lock = real_project / "matrix.lock"
    lock.write_text(damage(lock.read_text()))
    before = sorted(p.name for p in real_project.iterdir())
    proc = _cli(real_project, *argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: matrix.lock"), lines
    assert fragment in lines[0], lines
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in real_project.iterdir()) == before
