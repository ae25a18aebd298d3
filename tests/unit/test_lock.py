"""matrix.lock, offline: what the matrix asks to lock, the file's format and seal, and
`lock --check` / bad input through the CLI. The committed matrix.lock is checked against
matrix.yaml here, so a matrix change without a new lock fails the unit tests (CI).
Resolving against the mirror and PyPI is in tests/integration/test_lock.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from stagecraft import lockfile
from stagecraft.cli import main
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(ROOT / "matrix.yaml")


@pytest.fixture(scope="module")
def committed_text() -> str:
    return (ROOT / "matrix.lock").read_text()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's matrix, templates, copied paths and lock."""
    for name in ("templates", "entrypoint", "probes", "tests/image"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("matrix.yaml", "matrix.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_wanted_covers_every_base_stage_and_requirement_set(matrix):
    want = lockfile.wanted(matrix, expand(matrix))
    assert set(want["debian"]) == {"debian debian12 linux/amd64", "debian debian12 linux/arm64",
                                   "debian debian13 linux/amd64"}
    assert want["debian"]["debian debian12 linux/amd64"]["stages"]["base"] == sorted(
        f"{p}={s['version']}" for p, s in matrix.components["base"]["debian12"]["apt"].items())
    py = want["python"]
    rt = py["runtime paddle-2.6.2-cpu on debian12 linux/amd64"]
    assert rt["requirements"] == ["paddlepaddle==2.6.2", *matrix.entrypoint["requirements"]]
    assert "numpy==1.26.4" in rt["constraints"] and rt["python"] == "3.11"
    assert py["cuda cuda11.8-cudnn8.6 on debian12 linux/amd64"]["no_deps"] is False  # installed with deps
    assert "nvidia-nccl-cu11==2.15.5" in py["runtime paddle-2.6.0-gpu on debian12 linux/amd64"]["constraints"]
    assert py["build-tool cuobjdump on debian12 linux/amd64"]["requirements"] == [matrix.build_tools["cuobjdump"]]
    assert "nvidia-nccl-cu11==2.15.5" in py["accel nccl2.15-cu11 on debian12 linux/amd64"]["requirements"]
    jup = py["jupyter lab4+paddle-2.6.2-cpu on debian12 linux/amd64"]
    assert jup["after"] == "runtime paddle-2.6.2-cpu on debian12 linux/amd64"
    assert py["runtime paddle-3.3.1-cpu on debian13 linux/amd64"]["python"] == "3.13"


def test_committed_lock_is_in_step_with_the_matrix(matrix, committed_text):
    lock = lockfile.loads(committed_text)
    assert lockfile.check(lock, matrix, lockfile.wanted(matrix, expand(matrix))) == []
    # Every resolved distribution names its files with SHA-256; every Debian package too.
    for key, e in lock.python.items():
        assert "unresolved" in e or e["packages"], key
    numpy = lock.python["runtime paddle-2.6.2-cpu on debian12 linux/amd64"]["packages"]["numpy"]
    assert numpy["version"] == "1.26.4"
    assert all(f.startswith("numpy-1.26.4-cp311-") for f in numpy["files"])
    deb = lock.debian["debian debian12 linux/amd64"]
    assert "libc6" in deb["base"] and "dpkg" in deb["base"]  # the essential set is locked
    assert deb["stages"]["base"]["tini"]["version"].startswith("0.19")
    assert len(deb["release"]["inrelease_sha256"]) == 64


def test_dumps_is_deterministic_and_one_package_per_line(committed_text):
    lock = lockfile.loads(committed_text)
    assert lockfile.dumps(lock) == committed_text
    assert lockfile.dumps(lockfile.loads(lockfile.dumps(lock))) == committed_text
    line = next(ln for ln in committed_text.splitlines() if ln.strip().startswith('"libc6"'))
    assert '"version"' in line and '"sha256"' in line


def test_truncated_lock_is_refused(committed_text):
    with pytest.raises(InputError, match=r"matrix.lock:\d+: not valid JSON"):
        lockfile.loads(committed_text[: len(committed_text) // 2])


def test_hand_edited_lock_is_refused(committed_text):
    edited = committed_text.replace('"version": "1.26.4"', '"version": "1.26.5"', 1)
    assert edited != committed_text
    with pytest.raises(InputError, match="edited by hand"):
        lockfile.loads(edited)


def test_renewed_seal_makes_an_edit_loadable(committed_text):
    # A hash changed (as tests/integration/test_locked_build.py does). Not a version:
    # since the h22 review a locked version must satisfy its entry's own pins.
    sha = re.search(r'"sha256": "([0-9a-f]{64})"', committed_text).group(1)
    edited = lockfile.with_seal_renewed(committed_text.replace(sha, "0" * 64, 1))
    assert edited != committed_text
    assert lockfile.loads(edited).python  # what the build-side hash test relies on
    pinned = lockfile.with_seal_renewed(committed_text.replace("1.26.4", "1.26.5", 1))
    with pytest.raises(InputError, match="does not satisfy the entry's constraint 'numpy==1.26.5'"):
        lockfile.loads(pinned)


def test_other_schema_is_refused():
    with pytest.raises(InputError, match="not a stagecraft lock"):
        lockfile.loads(json.dumps({"schema": "poetry"}))


def test_lock_for_another_matrix(matrix, committed_text):
    lock = lockfile.loads(committed_text)
    lock.matrix = {"repository": "other/images", "source": "x"}
    problems = lockfile.check(lock, matrix, lockfile.wanted(matrix, expand(matrix)))
    assert len(problems) == 1 and "made for another matrix ('other/images'" in problems[0].line()


def test_changes_lists_old_and_new(committed_text):
    old = lockfile.loads(committed_text)
    new = lockfile.loads(committed_text)
    e = new.debian["debian debian12 linux/amd64"]
    e["base"]["libc6"] = {**e["base"]["libc6"], "version": "2.36-9+deb12u99"}
    assert lockfile.changes(old, new) == [
        f"libc6: {old.debian['debian debian12 linux/amd64']['base']['libc6']['version']} -> "
        "2.36-9+deb12u99 [debian12 linux/amd64]"]


# -- through the CLI ----------------------------------------------------------------------

def test_check_passes_on_the_committed_lock(project, capsys):
    assert main(["--matrix", str(project / "matrix.yaml"), "lock", "--check"]) == 0
    assert "in step" in capsys.readouterr().out


def test_check_names_what_differs(project, capsys):
    m = project / "matrix.yaml"
    m.write_text(m.read_text().replace("- numpy==1.26.4", "- numpy==1.26.3", 1))
    assert main(["--matrix", str(m), "lock", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(ln.startswith("error: matrix.lock: ") for ln in err)
    assert any("runtime paddle-2.6.2-cpu on debian12 linux/amd64: locked from other inputs "
               "(constraints: -numpy==1.26.4, +numpy==1.26.3)" in ln for ln in err)


def test_check_names_a_new_apt_package(project, capsys):
    m = project / "matrix.yaml"
    m.write_text(m.read_text().replace(
        '        tini: {version: "0.19.*", why: "PID 1: reaps zombies, forwards signals"}\n',
        '        tini: {version: "0.19.*", why: "PID 1: reaps zombies, forwards signals"}\n'
        '        curl: {version: "7.88.*", why: "test"}\n', 1))
    assert main(["--matrix", str(m), "lock", "--check"]) == 2
    assert "debian debian12 linux/amd64: locked from other inputs (stages: base: +curl=7.88.*)" \
        in capsys.readouterr().err


@pytest.mark.parametrize("damage, message", [
    (lambda t: t[:4000], "matrix.lock:"),
    (lambda t: t.replace("20230311", "20230312", 1), "edited by hand"),
    (lambda t: "", "not valid JSON"),
])
def test_damaged_lock_is_one_line_exit_2(project, capsys, damage, message):
    lock = project / "matrix.lock"
    lock.write_text(damage(lock.read_text()))
    before = lock.read_bytes()
    for argv in (["lock", "--check"], ["lock"], ["lock", "--upgrade", "tini"]):
        assert main(["--matrix", str(project / "matrix.yaml"), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert lock.read_bytes() == before  # nothing lost


def test_lock_of_another_matrix_via_cli(project, capsys):
    m = project / "matrix.yaml"
    m.write_text(m.read_text().replace("repository: stagecraft/paddle", "repository: team/other", 1))
    for argv in (["lock", "--check"], ["lock"]):
        assert main(["--matrix", str(m), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "made for another matrix" in err[0]


def test_upgrade_of_an_unknown_package(project, capsys):
    assert main(["--matrix", str(project / "matrix.yaml"), "lock", "--upgrade", "nosuchpkg"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --upgrade nosuchpkg: no package of that name in matrix.lock; name a "
                   "locked Debian package or Python distribution"]


def test_check_without_a_lock(project, capsys):
    (project / "matrix.lock").unlink()
    assert main(["--matrix", str(project / "matrix.yaml"), "lock", "--check"]) == 2
    assert "no lock file" in capsys.readouterr().err


# -- stand-ins (matrix.yaml apt_stand_ins) --------------------------------------------------

def test_stand_ins_are_inputs_of_every_entry_of_their_base(matrix):
    want = lockfile.wanted(matrix, expand(matrix))
    for key, inputs in want["debian"].items():
        base = key.split()[1]
        names = sorted(matrix.components["base"][base].get("apt_stand_ins", {}))
        assert names == ["libglx-mesa0"], key  # both bases stand in for Mesa's GLX vendor
        assert inputs["stand_ins"] == names, key


def test_without_stand_ins_the_inputs_have_no_such_key(project):
    m = project / "matrix.yaml"
    text = m.read_text()
    start = text.index("      # Packages the base stage marks as provided")
    end = text.index("      apt_stand_ins: *glx-stand-in\n")
    text = text[:start] + text[text.index("\n", text.index("libglx-mesa0: {why:", start)) + 1:end] \
        + text[end + len("      apt_stand_ins: *glx-stand-in\n"):]
    m.write_text(text)
    mx = load_matrix(m)
    want = lockfile.wanted(mx, expand(mx))
    assert all("stand_ins" not in inputs for inputs in want["debian"].values())


def test_template_and_resolver_stand_in_for_the_same_packages(matrix):
    """The base stage installs the package whose stanza the resolver marks installed."""
    from stagecraft.render import render_stages
    from stagecraft.resolve import stand_in_stanza

    spec = next(s for s in expand(matrix) if s.tag == "2.6.2-cpu")
    text = next(rs.text for rs in render_stages(matrix, spec, "linux/amd64") if rs.name == "base")
    stanza = stand_in_stanza(sorted(spec.base["apt_stand_ins"]))
    for field in ("Package", "Version", "Architecture", "Provides"):
        assert f"'{field}: {stanza[field]}'" in text, field
    # Before the base's own apt install, so the resolver's order (stand-in, then the
    # base stage's packages) is the build's.
    assert text.index("dpkg -i /tmp/stagecraft-stand-ins.deb") < text.index("RUN apt-get update")


def test_check_names_a_removed_stand_in(project, capsys):
    m = project / "matrix.yaml"
    m.write_text(m.read_text().replace("      apt_stand_ins: *glx-stand-in\n", "", 1))
    assert main(["--matrix", str(m), "lock", "--check"]) == 2
    assert "debian debian13 linux/amd64: locked from other inputs (stand_ins: ['libglx-mesa0'] -> None)" \
        in capsys.readouterr().err


def test_stand_in_without_why_is_one_line_exit_2(project, capsys):
    m = project / "matrix.yaml"
    text = m.read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("libglx-mesa0: {why:"))
    m.write_text(text.replace(line, "        libglx-mesa0: {}", 1))
    before = (project / "matrix.lock").read_bytes()
    assert main(["--matrix", str(m), "lock", "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # One line per base using the anchored entry (Debian 13 reuses Debian 12's), each
    # with the file and line of the entry.
    assert len(err) == 2, err
    for ln, base in zip(err, ("debian12", "debian13"), strict=True):
        assert ln.startswith(f"error: {m}:1"), ln
        assert f"components.base.{base}.apt_stand_ins.libglx-mesa0: 'why' is a required property" in ln
    assert (project / "matrix.lock").read_bytes() == before
