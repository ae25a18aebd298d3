"""`build.py prune` for real, on an engine that holds only this test's images: this
checkout's runner engine (tests/integration/engines.py), reset first. The engines other
runs share are never pruned (their images are not this test's).

The `six` project is built (its caches from the runners' registry), then a template is
edited and it is built again: the previous runtime and label keys are what the plan no
longer references. One of them also carries a name of the user's: it stays.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.integration import engines
from tests.integration.harness import six_project

pytestmark = [pytest.mark.modern]

REPO = "stagecraft-it/six-prune"
CACHE = "type=registry,ref=127.0.0.1:5000/stagecraft-it/six-cache"
FOREIGN = "example/keep-me:old-runtime"


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("six-prune")
    matrix = six_project(root, REPO)
    local = root / "local-cache"
    runner = engines.fresh_runner()

    def build() -> dict:
        proc = runner.cli("--matrix", str(matrix), "--all", "--json", "--cache-from", CACHE,
                          "--cache-to", f"type=local,dir={local}", cwd=root, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    first = build()
    template = root / "templates" / "runtime.Dockerfile.j2"
    template.write_text(template.read_text().replace(
        "\nUSER 1000\n", f"\nRUN echo {uuid.uuid4().hex} > /etc/stagecraft/edited\nUSER 1000\n", 1))
    second = build()
    old = {s["stage"] + ":" + s["key"][:24] for s in first["stages"]} - {
        s["stage"] + ":" + s["key"][:24] for s in second["stages"]}
    old_refs = sorted(f"stagecraft-stage/{k}" for k in old)
    assert len(old_refs) == 4, old_refs  # two runtime keys and two label keys
    client = runner.client()
    protected = next(r for r in old_refs if "/runtime:" in r)
    client.images.get(protected).tag(*FOREIGN.rsplit(":", 1))

    def prune(*args: str) -> dict:
        proc = runner.cli("--matrix", str(matrix), "prune", "--json", *args, cwd=root, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        out["stderr"] = proc.stderr
        return out

    def names() -> dict[str, str]:
        return {t: i.id for i in client.images.list() for t in i.tags}

    return {"runner": runner, "matrix": matrix, "root": root, "local": local, "old": old_refs,
            "protected": protected, "prune": prune, "names": names, "second": second}


def test_dry_run_lists_what_would_go_and_removes_nothing(setup):
    before = setup["names"]()
    out = setup["prune"]()
    going = {i["ref"] for i in out["would_remove"]}
    assert going == set(setup["old"]) - {setup["protected"]}, going
    assert all(i["size"] > 0 for i in out["would_remove"]), out["would_remove"]
    kept = {k["ref"]: k["why"] for k in out["kept"]}
    assert kept[setup["protected"]] == f"{FOREIGN} points at it"
    assert out["size_kind"] == "compressed"
    assert "dry run: pass --yes to remove them" in out["stderr"]
    assert setup["names"]() == before, "a dry run removed something"
    keep1 = setup["prune"]("--keep", "1")
    assert len(keep1["would_remove"]) == len(going) - 2, keep1  # the newest previous runtime and label


def test_prune_removes_only_what_no_target_references(setup):
    before = setup["names"]()
    out = setup["prune"]("--yes", "--cache", f"type=local,dir={setup['local']}")
    removed = {i["ref"] for i in out["removed"]}
    assert removed == set(setup["old"]) - {setup["protected"]}
    after = setup["names"]()
    assert not removed & set(after), "a name prune listed is still there"
    assert set(before) - set(after) == removed, "prune removed a name it did not list"
    assert after[FOREIGN] == before[FOREIGN] and setup["protected"] in after
    # Everything the plan references is still there: the next build builds nothing.
    runner, matrix = setup["runner"], setup["matrix"]
    plan = runner.cli("--matrix", str(matrix), "plan", "--all", "--json", cwd=setup["root"])
    assert all(s["built"] for s in json.loads(plan.stdout)["stages"]), plan.stdout
    for img in setup["second"]["images"]:
        for name in (img["tag"], *img["aliases"]):
            assert after[f"{REPO}:{name}"] == img["image_id"], name
    # The local cache: the old keys' scopes went, the plan's, the lines and the base stayed.
    local: Path = setup["local"]
    gone = {Path(c["path"]).name for c in out["cache"] if c["remove"]}
    assert {n.split(":")[1] for n in setup["old"] if "/runtime:" in n} <= {g.split("-")[-1] for g in gone}
    assert all(not (local / g).exists() for g in gone)
    for s in setup["second"]["stages"]:
        if s["stage"] == "runtime":
            assert (local / f"runtime-{s['key'][:24]}").is_dir()
    assert all(p.resolve().is_dir() for p in local.iterdir() if p.is_symlink())
    assert any(local.glob("base-*.tar"))
    again = setup["prune"]()
    assert again["would_remove"] == [], again["would_remove"]
