"""What `build.py prune` removes and keeps, decided without an engine."""

from __future__ import annotations

import os

from stagecraft import cache
from stagecraft.prune import OwnedImage, local_cache_prune, owned, plan_prune, referenced
from tests.conftest import ROOT
from tests.unit.test_plan import _plan  # a plan of the real matrix


def _img(ref: str, created: str, others: tuple[str, ...] = ()) -> OwnedImage:
    return OwnedImage(ref, "sha256:" + ref.rsplit(":", 1)[1], created, 1000, others)


def test_only_stagecraft_repositories_are_owned():
    assert owned("stagecraft-stage/runtime:abc") and owned("stagecraft-base/debian:bookworm-amd64-1")
    for ref in ("stagecraft/paddle:2.6.2-cpu", "stagecraft-stagex/runtime:1", "example/stagecraft-stage:1",
                "127.0.0.1:5000/stagecraft-stage/runtime:1"):
        assert not owned(ref), ref


def test_plan_prune_keeps_the_plan_tagged_images_and_the_newest_previous_keys():
    images = [
        _img("stagecraft-stage/runtime:current", "2026-12-03"),
        _img("stagecraft-stage/runtime:old1", "2026-12-02"),
        _img("stagecraft-stage/runtime:old2", "2026-12-01"),
        _img("stagecraft-stage/runtime:old3", "2026-11-30", ("stagecraft/paddle:2.6.2-cpu",)),
        _img("stagecraft-stage/base:old", "2026-11-01"),
    ]
    plan_refs = {"stagecraft-stage/runtime:current"}
    got = {d.image.ref: (d.remove, d.why) for d in plan_prune(images, plan_refs)}
    assert got["stagecraft-stage/runtime:current"] == (False, "in the plan")
    assert got["stagecraft-stage/runtime:old3"] == (False, "stagecraft/paddle:2.6.2-cpu points at it")
    assert [r for r, (rm, _) in got.items() if rm] == [
        "stagecraft-stage/base:old", "stagecraft-stage/runtime:old1", "stagecraft-stage/runtime:old2"]
    kept = {d.image.ref for d in plan_prune(images, plan_refs, keep=1) if not d.remove}
    assert "stagecraft-stage/runtime:old1" in kept and "stagecraft-stage/runtime:old2" not in kept
    assert "stagecraft-stage/base:old" in kept  # the most recent previous key of its stage


def test_referenced_names_every_stage_and_base_of_the_plan(tmp_path):
    _, _, plan = _plan(ROOT / "matrix.yaml")
    refs = referenced(plan)
    assert {b.ref for b in plan.bases} <= refs
    assert all(n.image_ref in refs for n in plan.nodes.values())


def test_local_cache_prune(tmp_path):
    _, _, plan = _plan(ROOT / "matrix.yaml")
    spec = cache.CacheSpec("local", str(tmp_path / "cache"))
    root = tmp_path / "cache"
    root.mkdir()
    node = next(n for n in plan.nodes.values() if n.stage == "runtime")
    current = root / f"runtime-{node.key[:24]}"
    previous = root / f"runtime-{'1' * 24}"
    older = root / f"runtime-{'2' * 24}"
    oldest = root / f"runtime-{'3' * 24}"
    for age, d in enumerate((current, previous, older, oldest)):
        (d / "blobs").mkdir(parents=True)
        (d / "blobs" / "x").write_bytes(b"x" * 10)
        os.utime(d, (1e9 - age * 100, 1e9 - age * 100))
    # the stage's line links to the previous key (a build that has not exported yet)
    (root / cache.line_name("runtime", node.line)).symlink_to(previous.name)
    base = root / (cache.CacheSpec("local", str(root)).base_location(plan.bases[0]).rsplit("/", 1)[1])
    base.write_bytes(b"tar")
    stale_base = root / "base-image-000000000000000000000000.tar"
    stale_base.write_bytes(b"tar")
    (root / "notes.txt").write_text("not ours")
    got = {e.path.name: (e.remove, e.why) for e in local_cache_prune(spec, plan)}
    assert got[current.name] == (False, "in the plan")
    assert got[previous.name] == (False, "the previous key of a stage's line")
    assert got[base.name] == (False, "in the plan")
    assert got[older.name][0] and got[oldest.name][0] and got[stale_base.name][0]
    assert "notes.txt" not in got and cache.line_name("runtime", node.line) not in got
    keep1 = {e.path.name: e.remove for e in local_cache_prune(spec, plan, keep=1)}
    assert keep1[older.name] is False and keep1[oldest.name] is True
