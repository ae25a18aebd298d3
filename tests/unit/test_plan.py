"""Expansion, rendering and content keys, on the real matrix and a scratch one. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from stagecraft.bases import base_image
from stagecraft.errors import InputError
from stagecraft.expand import expand, resolve
from stagecraft.matrix import load_matrix
from stagecraft.plan import hash_files, make_plan
from stagecraft.render import render_stages
from tests.conftest import ROOT
from tests.unit.minimal_matrix import MINIMAL

REV, CREATED = "0" * 40, "1970-01-01T00:00:00Z"


def _plan(path: Path, source: str | None = None):
    matrix = load_matrix(path)
    specs = expand(matrix)
    bases = {s.base["name"]: base_image(s.base, source) for s in specs}
    return matrix, specs, make_plan(matrix, specs, bases, REV, CREATED)


def _keys_by_stage(plan) -> dict[tuple[str, str], str]:
    return {(tag, node.stage): key for key, node in plan.nodes.items() for tag in node.tags}


def test_real_matrix_has_the_promised_tags():
    specs = expand(load_matrix(ROOT / "matrix.yaml"))
    names = {n for s in specs for n in s.names}
    assert {"2.6.2-cpu", "2.6.2", "3.3.1-cpu-debian12", "3.3.1-cpu-debian13", "3.3.1-cpu"} <= names
    deb13 = resolve(specs, "3.3.1-cpu-debian13")
    assert deb13.base["python"] == "3.13"


@pytest.mark.parametrize("query,tag", [("2.6.2", "2.6.2-cpu"), ("2.6.2-cpu-j", "2.6.2-cpu-jupyter"),
                                       ("3.3.1-cpu", "3.3.1-cpu-debian12"),
                                       ("3.3.1-cpu-debian13", "3.3.1-cpu-debian13")])
def test_resolve_aliases_and_prefixes(query, tag):
    specs = expand(load_matrix(ROOT / "matrix.yaml"))
    assert resolve(specs, query).tag == tag


def test_resolve_ambiguous_prefix_lists_matches():
    specs = expand(load_matrix(ROOT / "matrix.yaml"))
    with pytest.raises(InputError, match="ambiguous: matches 3.3.1-cpu-debian12, 3.3.1-cpu-debian12-paddleocr, 3.3.1-cpu-debian13"):
        resolve(specs, "3.3.1-cpu-deb")


def test_exclude_and_include(project):
    text = MINIMAL.replace('    tag: "{{', "    exclude: [{framework: six-2}]\n    tag: \"{{")
    specs = expand(load_matrix(project(text)))
    assert [s.tag for s in specs] == ["1.16.0-cpu"]
    text = text.replace("    exclude: [{framework: six-2}]\n",
                        "    exclude: [{framework: six-2}]\n    include: [{base: deb12, framework: six-2}]\n")
    assert [s.tag for s in expand(load_matrix(project(text)))] == ["1.16.0-cpu", "1.17.0-cpu"]


def test_rendering_is_deterministic():
    matrix = load_matrix(ROOT / "matrix.yaml")
    for spec in expand(matrix):
        a = [s.text for s in render_stages(matrix, spec)]
        b = [s.text for s in render_stages(load_matrix(ROOT / "matrix.yaml"), spec)]
        assert a == b, spec.tag


def test_shared_stages_have_one_key():
    _, specs, plan = _plan(ROOT / "matrix.yaml")
    keys = _keys_by_stage(plan)
    # Both Debian 12 images share the base stage; Debian 13 has its own.
    assert keys[("2.6.2-cpu", "base")] == keys[("3.3.1-cpu-debian12", "base")]
    assert keys[("3.3.1-cpu-debian12", "base")] != keys[("3.3.1-cpu-debian13", "base")]
    node = plan.nodes[keys[("2.6.2-cpu", "base")]]
    assert {"2.6.2-cpu", "3.3.1-cpu-debian12", "2.6.0-gpu-cuda11.8-cudnn8.6"} <= set(node.tags)
    assert "3.3.1-cpu-debian13" not in node.tags
    # One CUDA 11.8 + cuDNN 8.6 stage (and one NCCL stage) serves every 2.6.x GPU tag.
    for stage in ("cuda", "accel"):
        assert keys[("2.6.0-gpu-cuda11.8-cudnn8.6", stage)] == keys[("2.6.2-gpu-cuda11.8-cudnn8.6", stage)]
        assert keys[("2.6.0-gpu-cuda11.8-cudnn8.6", stage)] != keys[("3.2.0-gpu-cuda12.6-cudnn9.5", stage)]
    assert keys[("2.6.0-gpu-cuda11.8-cudnn8.6", "runtime")] != keys[("2.6.2-gpu-cuda11.8-cudnn8.6", "runtime")]
    # Every image ends in its own label node.
    assert len({img.final_key for img in plan.images}) == len(specs)


def test_key_changes_when_and_only_when_an_input_changes(project, tmp_path):
    path = project(MINIMAL)
    _, _, before = _plan(path)
    k0 = _keys_by_stage(before)

    # Same inputs: same keys.
    assert _keys_by_stage(_plan(path)[2]) == k0

    # A runtime template edit: runtime and label change, base does not.
    tpl = tmp_path / "templates" / "runtime.Dockerfile.j2"
    tpl.write_text(tpl.read_text() + "# an edit\n")
    k1 = _keys_by_stage(_plan(path)[2])
    assert k1[("1.16.0-cpu", "base")] == k0[("1.16.0-cpu", "base")]
    assert k1[("1.16.0-cpu", "runtime")] != k0[("1.16.0-cpu", "runtime")]
    assert k1[("1.16.0-cpu", "label")] != k0[("1.16.0-cpu", "label")]

    # A comment in the matrix changes no key.
    k2 = _keys_by_stage(_plan(project(MINIMAL.replace('}}-cpu"', '}}-cpu"\n    # x')))[2])
    assert k2[("1.16.0-cpu", "runtime")] == k1[("1.16.0-cpu", "runtime")]

    # A base package change: everything above the base changes (parent key).
    k3 = _keys_by_stage(_plan(project(MINIMAL.replace('"0.19.*"', '"0.19.0*"')))[2])
    assert all(k3[("1.16.0-cpu", s)] != k1[("1.16.0-cpu", s)] for s in ("base", "runtime", "label"))

    # The other framework's runtime is untouched by a change to six-1's pin.
    k4 = _keys_by_stage(_plan(project(MINIMAL.replace('"1.16.0"', '"1.16.1"')))[2])
    assert k4[("1.17.0-cpu", "runtime")] == k1[("1.17.0-cpu", "runtime")]


def test_copied_file_bytes_and_modes_are_in_the_key(tmp_path):
    import shutil

    for name in ("templates", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    for name in ("entrypoint", "probes"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "matrix.yaml"
    path.write_text(MINIMAL)
    k0 = _keys_by_stage(_plan(path)[2])
    probe = tmp_path / "probes" / "__init__.py"
    probe.write_text(probe.read_text() + "\n# edit\n")
    k1 = _keys_by_stage(_plan(path)[2])
    assert k1[("1.16.0-cpu", "runtime")] != k0[("1.16.0-cpu", "runtime")]
    assert k1[("1.16.0-cpu", "base")] == k0[("1.16.0-cpu", "base")]
    (tmp_path / "probes" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "probes" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert _keys_by_stage(_plan(path)[2]) == k1, "bytecode caches must not change keys"
    probe.chmod(0o755)
    assert _keys_by_stage(_plan(path)[2])[("1.16.0-cpu", "runtime")] != k1[("1.16.0-cpu", "runtime")]


def test_base_source_changes_the_base_identity():
    matrix = load_matrix(ROOT / "matrix.yaml")
    spec = expand(matrix)[0]
    boot, pull = base_image(spec.base, "bootstrap"), base_image(spec.base, "pull")
    assert boot.ref.startswith("stagecraft-base/debian:bookworm-")
    assert "@sha256:" in pull.ref and boot.identity != pull.identity


def test_a_symlink_in_a_copied_path_is_refused(tmp_path):
    import shutil

    for name in ("templates", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    for name in ("entrypoint", "probes"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "probes" / "host-secret").symlink_to("/etc/hostname")
    path = tmp_path / "matrix.yaml"
    path.write_text(MINIMAL)
    # Refused when the matrix loads (with the matrix line), and again when the plan hashes
    # the files (the tree may change in between).
    with pytest.raises(InputError, match=r"matrix.yaml:\d+: stage 'runtime': copied path "
                       r"probes/host-secret is a symbolic link \(to /etc/hostname\)"):
        _plan(path)
    with pytest.raises(InputError, match="probes/host-secret: a copied path holds a symbolic link"):
        hash_files(tmp_path, ("probes",))
