"""Build caches that cross CI runners, for real, on the modern engine.

A runner is the modern engine ``stagecraft-runner`` reset to a fresh state (no images, no
build cache: ``scripts/modern-engine.sh reset``); what runners share is the registry in
its network namespace (127.0.0.1:5000, storage kept across resets) or a directory on the
host. The project is the small `six` matrix (a real Debian base, real apt and pip).

- registry: runner A builds with ``--cache-to``; a fresh runner B with ``--cache-from``
  runs no RUN step, and builds on A's base (pulled by digest), so B's images have A's
  layers;
- local: the same through a directory (the base saved and loaded);
- a template edited: a fresh runner rebuilds that stage, taking its unchanged steps from
  the stage's line and running only the new one;
- a cache registry that does not answer: warnings, the image is built and tagged, and
  the summary says the cache was not written;
- Docker 20.10 (the host engine here) refuses cache options with exit 2.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.integration import engines
from tests.unit.minimal_matrix import MINIMAL

pytestmark = [pytest.mark.modern]

CACHE = "127.0.0.1:5000/stagecraft-it/six-cache"
REPO = "stagecraft-it/six-cache"


def _build(engine: engines.TestEngine, matrix: Path, *args: str) -> dict:
    # Each runner its own state directory: its stage logs are kept for the messages below.
    state = matrix.parent / f"state-{uuid.uuid4().hex[:8]}"
    proc = engine.cli("--matrix", str(matrix), "--all", "--json", "--state-dir", str(state),
                      *args, cwd=matrix.parent, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    report["stderr"] = proc.stderr
    return report


def _ran(report: dict, stage: str | None = None) -> int:
    return sum(s["run_executed"] for s in report["stages"]
               if s["status"] == "built" and stage in (None, s["stage"]))


def _ran_steps(report: dict) -> str:
    """The stages that ran RUN steps, with their stage logs (what BuildKit printed)."""
    out = []
    for s in report["stages"]:
        if s["status"] == "built" and s["run_executed"]:
            log = Path(s["log"])
            text = log.read_text(errors="replace") if log.is_file() else "(no log)"
            out.append(f"{s['stage']}: {s['run_executed']} ran\n{text[-6000:]}")
    return "\n".join(out)


def _layers(engine: engines.TestEngine, ref: str) -> list[str]:
    return engine.client().api.inspect_image(ref)["RootFS"]["Layers"]


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("six-cache")
    import shutil

    from tests.integration.harness import ROOT

    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("templates", "entrypoint", "probes"):  # copied paths: real files
        shutil.copytree(ROOT / name, root / name, ignore=caches)
    (root / "tests").symlink_to(ROOT / "tests")
    path = root / "matrix.yaml"
    path.write_text(MINIMAL.replace("repository: example/fw", f"repository: {REPO}"))
    return path


@pytest.fixture(scope="module")
def runs(six, tmp_path_factory) -> dict:
    """The runners, in order: A (registry to and from), B (registry from), L1 (registry
    from, local to), L2 (local from), E (a template edited; registry to and from)."""
    out: dict = {}
    local = tmp_path_factory.mktemp("local-cache") / "cache"
    a = engines.fresh_runner()
    out["A"] = _build(a, six, "--cache-to", f"type=registry,ref={CACHE}",
                      "--cache-from", f"type=registry,ref={CACHE}")
    out["A_layers"] = _layers(a, f"{REPO}:1.16.0-cpu")
    b = engines.fresh_runner()
    assert b.client().images.list() == [], "the runner is not fresh"
    out["B"] = _build(b, six, "--cache-from", f"type=registry,ref={CACHE}")
    out["B_layers"] = _layers(b, f"{REPO}:1.16.0-cpu")
    out["L1"] = _build(engines.fresh_runner(), six, "--cache-from", f"type=registry,ref={CACHE}",
                       "--cache-to", f"type=local,dir={local}")
    out["L2"] = _build(engines.fresh_runner(), six, "--cache-from", f"type=local,dir={local}")
    out["local"] = local
    # A template edited: one new step, unique per run so its key is new every time.
    template = six.parent / "templates" / "runtime.Dockerfile.j2"
    text = template.read_text()
    assert "\nUSER 1000\n" in text
    template.write_text(text.replace("\nUSER 1000\n", f"\nRUN echo {uuid.uuid4().hex} > /etc/stagecraft/edited\nUSER 1000\n", 1))
    e = engines.fresh_runner()
    out["E"] = _build(e, six, "--cache-to", f"type=registry,ref={CACHE}",
                      "--cache-from", f"type=registry,ref={CACHE}")
    out["E_layers"] = _layers(e, f"{REPO}:1.16.0-cpu")
    return out


def test_registry_cache_crosses_runners(runs):
    a, b = runs["A"], runs["B"]
    assert all(s["cache"] == "written" for s in a["stages"] if s["status"] == "built" and s["stage"] != "label"), a["stages"]
    assert "build cache: " in a["stderr"] and "NOT written" not in a["stderr"], a["stderr"][-2000:]
    assert {s["status"] for s in b["stages"]} == {"built"}, "runner B was not fresh"
    assert _ran(b) == 0, f"runner B ran RUN steps: {_ran_steps(b)}"
    assert sum(s["run_cached"] for s in b["stages"]) >= 4
    assert "RUN steps: 0 ran" in b["stderr"], b["stderr"][-2000:]


def test_the_base_is_shared_by_digest(runs):
    b = runs["B"]["stderr"]
    assert re.search(rf"base deb12: pulled {re.escape(CACHE)}@sha256:[0-9a-f]{{64}}", b), b[:2000]
    assert "debootstrap" not in b, "runner B made its own base"
    assert runs["A_layers"] == runs["B_layers"], "B's image is not built on A's layers"


def test_local_cache_crosses_runners(runs):
    local: Path = runs["local"]
    l1, l2 = runs["L1"], runs["L2"]
    assert any(local.glob("base-*.tar")), list(local.iterdir())
    lines = [p for p in local.iterdir() if p.name.startswith("runtime-line-")]
    assert len(lines) == 2 and all(p.is_symlink() and p.resolve().is_dir() for p in lines), lines
    assert all(s["cache"] == "written" for s in l1["stages"] if s["status"] == "built" and s["stage"] != "label")
    assert re.search(r"base deb12: loaded \S+/base-image-\w+\.tar", l2["stderr"]), l2["stderr"][:2000]
    assert _ran(l2) == 0, _ran_steps(l2)


def test_changed_stage_reuses_its_unchanged_steps(runs):
    e = runs["E"]
    runtime = [s for s in e["stages"] if s["stage"] == "runtime"]
    assert len(runtime) == 2
    for s in runtime:  # only the new step ran; the pip install and the rest came from the line
        assert (s["run_executed"], s["status"]) == (1, "built"), s
        assert s["run_cached"] >= 2, s
    assert _ran(e, "base") == 0
    # The same layers as before the edit, byte for byte (a step run again would make new
    # ones: its files' times differ), then the new step's, then WORKDIR's (after the edit).
    before, after = runs["B_layers"], runs["E_layers"]
    assert after[:len(before) - 1] == before[:-1] and len(after) == len(before) + 1, (before, after)


def test_unreachable_cache_registry_is_a_warning(six, engine_modern):
    """Nothing listens on 127.0.0.1:5999 in the engine's namespace: the build goes on,
    the image is tagged, and the summary says the cache was neither read nor written."""
    text = six.read_text().replace(
        'build: {python: ["3.11"]}',
        f'build: {{python: ["3.11"]}}\n      constraints: ["six==1.16.0", "setuptools<{1000 + uuid.uuid4().int % 10**9}"]')
    matrix = six.parent / "unreachable.yaml"
    matrix.write_text(text)
    nowhere = "type=registry,ref=127.0.0.1:5999/nowhere"
    proc = engine_modern.cli("--matrix", str(matrix), "--tag", "1.16.0-cpu", "--json",
                             "--cache-to", nowhere, "--cache-from", nowhere, cwd=six.parent, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    runtime = next(s for s in report["stages"] if s["stage"] == "runtime")
    assert runtime["status"] == "built" and runtime["cache"].startswith("not written:"), runtime
    assert "dial tcp 127.0.0.1:5999" in runtime["cache"], runtime
    # The export was tried once more (from the engine's cache) before giving up; what ran
    # is the first build's (the new constraint's pip install), not the retry's nothing.
    assert re.search(r"runtime@\w+ cache export failed \(.*\); exporting it again", proc.stderr), proc.stderr[-2000:]
    assert runtime["run_executed"] >= 1, runtime
    assert Path(runtime["log"]).with_name(Path(runtime["log"]).stem + ".export-again.log").is_file()
    assert any("cache not read from 127.0.0.1:5999/nowhere" in w for w in report["warnings"]), report["warnings"]
    assert "NOT written (the images are built and tagged all the same)" in proc.stderr, proc.stderr[-2000:]
    assert engine_modern.client().images.get(f"{REPO}:1.16.0-cpu").id == report["images"][0]["image_id"]


def test_the_host_engine_refuses_cache_options(six, client):
    """Docker 20.10 (this project's host engine, classic builder) cannot export or
    import: exit 2, one line naming the engine and what to do, nothing built."""
    host = engines.get("host")
    info = client.version()
    if not info["Version"].startswith("20.10"):
        pytest.skip(f"the host engine is Docker {info['Version']}, not 20.10")
    before = {i.id for i in client.images.list(all=True)}
    for option in ("--cache-to", "--cache-from"):
        proc = host.cli("--matrix", str(six), "--all", option, f"type=registry,ref={CACHE}",
                        cwd=six.parent, timeout=300)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: {option} type=registry") and "Docker 20.10" in line, line
        assert f"or leave out {option}" in line, line
    assert {i.id for i in client.images.list(all=True)} == before, "a refused run built something"


@pytest.fixture(scope="module")
def engine_modern() -> engines.TestEngine:
    try:
        return engines.get("modern")
    except RuntimeError as exc:
        pytest.fail(str(exc))
