"""`build.py catalog`: the site from fixture image facts (no Docker), its pages and links,
versions read from the image with a lying label flagged, and bad input refused with one
line, exit 2 and nothing written. The CLI runs in a subprocess, as a user runs it."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from stagecraft.catalog import site, versions, view
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix

FACTS = REPO / "tests" / "fixtures" / "catalog" / "facts.json"
GPU_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"


def catalog(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"  # a Docker call would find nothing
    return subprocess.run([sys.executable, str(REPO / "build.py"), "catalog", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=120, check=False)


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value and not value.startswith("data:"):
                self.links.append(value)


def links_of(page: Path) -> list[str]:
    p = Links()
    p.feed(page.read_text())
    return p.links


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "catalog"
    cp = catalog("-o", str(out), "--facts", str(FACTS))
    assert cp.returncode == 0, cp.stderr
    assert "11 tags, 2 built" in cp.stdout, cp.stdout
    return out


def test_every_page_is_written_and_every_link_resolves(made: Path) -> None:
    specs = expand(load_matrix(REPO / "matrix.yaml"))
    for rel in ("index.html", "select.html", "changes.html", "style.css", "select.js", "facts.json"):
        assert (made / rel).is_file(), rel
    assert sorted(p.name for p in (made / "tags").iterdir()) == sorted(f"{s.tag}.html" for s in specs)
    pages = list(made.rglob("*.html"))
    for page in pages:
        for link in links_of(page):
            target, _ = urldefrag(link)
            assert "://" not in target and not target.startswith("/"), f"{page}: not relative: {link}"
            assert (page.parent / target).resolve().is_file(), f"{page.relative_to(made)}: broken link {link}"


def test_overview_reads_without_colour(made: Path) -> None:
    html = (made / "index.html").read_text()
    for gen in ("Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"):
        assert f">{gen}</th>" in html, gen
    row = html.split(f'href="tags/{GPU_TAG}.html"')[1].split("</tr>")[0]
    # Paddle 2.6 GPU: SASS 6.1-8.6, no PTX: native on Ampere, falls back on Hopper.
    assert '<td class="c-native">SASS</td>' in row and '<td class="c-fallback">CPU</td>' in row, row
    assert "not built" in html.split('href="tags/3.2.2-cpu.html"')[1].split("</th>")[0]
    # Built for amd64 only here, made for arm64 too: its arm64 image's sets (the matrix's).
    cpu = html.split('href="tags/2.6.2-cpu.html"')[1].split("</tr>")[0]
    assert '<td class="c-native">cpu-armv8</td>' in cpu and '<td class="c-native">cpu-avx512</td>' in cpu, cpu
    assert '<td class="c-none">no arm64 image</td>' in row, row


def test_tag_page_shows_the_image_and_marks_a_tag_not_built(made: Path) -> None:
    gpu = (made / "tags" / f"{GPU_TAG}.html").read_text()
    for text in ("8.6.0.163", "11.8.89", "6.4 GB", "520.61.05", "450.80.02", "docker pull stagecraft/paddle:",
                 "--gpus all", "passed (41 passed, 2 skipped", "nvidia-cudnn-cu11", "Hopper"):
        assert text in gpu, text
    assert "MISMATCH" not in gpu
    absent = (made / "tags" / "3.2.2-cpu.html").read_text()
    assert "Not built." in absent and "matrix's intent only" in absent


def test_selector_embeds_the_table_and_no_rule(made: Path) -> None:
    html = (made / "select.html").read_text()
    table = json.loads(html.split('<script type="application/json" id="answers">')[1].split("</script>")[0])
    assert table["grid"][0] == "418.39" and len(table["answers"]) > 1000, len(table["answers"])
    js = (made / "select.js").read_text()
    for rule in ("sass", "ptx", "min_driver", "avx", "kernel"):
        assert rule not in js.lower(), f"select.js names {rule!r}: a rule of the chooser?"


def lying(facts: dict) -> dict:
    """The 2.6.2 CPU image's facts, with a label that says 2.6.2 over an installed 2.6.1."""
    f = copy.deepcopy(facts["tags"]["2.6.2-cpu"])
    for p in f["images"][0]["inventory"]["python"]:
        if p["name"] == "paddlepaddle":
            p["version"] = "2.6.1"
    return f


def test_a_label_that_disagrees_with_the_contents_is_flagged(tmp_path: Path) -> None:
    facts = json.loads(FACTS.read_text())
    facts["tags"]["2.6.2-cpu"] = lying(facts)
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    cp = catalog("-o", str(tmp_path / "out"), "--facts", str(tmp_path / "facts.json"), "--tag", "2.6.2-cpu")
    assert cp.returncode == 0, cp.stderr
    page = (tmp_path / "out" / "tags" / "2.6.2-cpu.html").read_text()
    row = page.split("<th scope=\"row\">framework</th>")[1].split("</tr>")[0]
    assert "<td>2.6.1</td>" in row, row
    assert "MISMATCH" in row and "io.stagecraft.framework.version=2.6.2 disagrees with the installed 2.6.1" in row, row
    assert "label mismatch" in (tmp_path / "out" / "index.html").read_text()


def test_version_rows_flag_labels_matrix_and_missing_packages() -> None:
    inv = {"debian": [{"name": "python3", "version": "3.11.2-1+b1"}],
           "python": [{"name": "nvidia-cudnn-cu12", "version": "9.1.0.70"}, {"name": "torch", "version": "2.10.0+cu128"}]}
    labels = {"io.stagecraft.framework": "torch", "io.stagecraft.framework.version": "2.10.0",
              "io.stagecraft.cudnn": "9.10.2", "io.stagecraft.cuda": "12.8", "io.stagecraft.python": "3.11"}
    rows = {r["component"]: r for r in versions.version_rows(inv, labels, {"framework": "2.10.0", "cuDNN": "9.10.2",
                                                                          "CUDA": "12.8", "Python": "3.11"})}
    assert rows["framework"]["found"] == "2.10.0+cu128" and not rows["framework"]["flags"], rows["framework"]
    assert rows["Python"]["found"] == "3.11" and not rows["Python"]["flags"]
    assert rows["cuDNN"]["source"] == "nvidia-cudnn-cu12 (pip)" and rows["Python"]["source"] == "python3 (dpkg)"
    assert rows["cuDNN"]["flags"][0] == "label io.stagecraft.cudnn=9.10.2 disagrees with the installed 9.1.0.70"
    assert rows["CUDA"]["found"] is None and rows["CUDA"]["flags"] == ["stated (12.8) but not installed"]
    # Not read (no inventory): nothing can be flagged.
    assert not any(r["flags"] for r in versions.version_rows(None, labels, {"CUDA": "12.8"}))


def test_a_tag_name_that_claims_another_cuda_is_flagged() -> None:
    rows = [{"component": "CUDA", "found": "12.1.105"}]
    assert versions.tag_claims("2.1-gpu-cuda11.8", rows) == ["the tag names cuda11.8, the image holds CUDA 12.1.105"]
    assert versions.tag_claims("2.1-gpu-cuda12.1", rows) == []


def test_rerun_replaces_its_catalog_and_compares_with_the_previous(tmp_path: Path) -> None:
    out, old = tmp_path / "out", tmp_path / "old"
    assert catalog("-o", str(old), "--facts", str(FACTS)).returncode == 0
    facts = json.loads(FACTS.read_text())
    newer = facts["tags"]["2.6.2-cpu"]
    newer["images"][0]["inspect"]["Size"] += 12_000_000
    py = newer["images"][0]["inventory"]["python"]
    py[:] = [p for p in py if p["name"] != "protobuf"] + [{"name": "opt-einsum", "version": "3.3.0"}]
    next(p for p in py if p["name"] == "numpy")["version"] = "1.26.3"
    next(p for p in newer["images"][0]["inventory"]["debian"] if p["name"] == "tini")["version"] = "1:0.19.0-1"
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    assert catalog("-o", str(out), "--facts", str(FACTS)).returncode == 0
    cp = catalog("-o", str(out), "--facts", str(tmp_path / "facts.json"), "--previous", str(old),
                 "--compare", f"2.6.2-cpu:{GPU_TAG}")
    assert cp.returncode == 0, cp.stderr
    html = (out / "changes.html").read_text()
    first = html.split("<section")[1]
    assert "2.6.2-cpu (earlier build) → 2.6.2-cpu (this build)" in first
    assert "1 added, 1 removed, 1 upgraded,\n1 downgraded" in first, first
    assert "(+12.0 MB)" in first
    assert f"{GPU_TAG} (earlier build) → {GPU_TAG} (this build)" in html.split("<section")[2]
    assert "0 added, 0 removed, 0 upgraded" in html.split("<section")[2]
    assert f"2.6.2-cpu → {GPU_TAG}" in html.split("<section")[3]
    assert not list(tmp_path.glob(".out.*")), "no temporary directory left beside the catalog"


@pytest.mark.parametrize(("setup", "args", "says"), [
    ("file", (), "exists and is not a directory"),
    ("foreign", (), "a directory with files that no earlier catalog wrote"),
    ("noparent", (), "its parent directory does not exist"),
    ("link", (), "is a symbolic link"),
    ("none", ("--compare", "2.6.2-cpu"), "not OLD:NEW with two tags of the matrix"),
    ("none", ("--compare", "2.6.2-cpu:nope"), "not OLD:NEW with two tags of the matrix"),
    ("none", ("--facts", "/nonexistent/facts.json"), "cannot read it as JSON"),
    ("none", ("--facts", "MATRIX"), "cannot read it as JSON"),
    ("none", ("--previous", "/nonexistent"), "holds no facts.json"),
    ("none", ("--tag", "no-such-tag"), "no-such-tag"),
    ("none", ("--output", ""), "--output"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path, setup: str, args: tuple[str, ...],
                                                          says: str) -> None:
    out = tmp_path / "out"
    if setup == "file":
        out.write_text("keep me\n")
    elif setup == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("keep me\n")
    elif setup == "link":
        (tmp_path / "real").mkdir()
        out.symlink_to(tmp_path / "real")
    elif setup == "noparent":
        out = tmp_path / "missing" / "out"
    args = tuple(str(REPO / "matrix.yaml") if a == "MATRIX" else a for a in args)
    before = sorted((p.relative_to(tmp_path), p.read_bytes() if p.is_file() else b"", p.is_symlink())
                    for p in tmp_path.rglob("*"))
    cp = catalog("-o", str(out), "--facts", str(FACTS), *args) if "--facts" not in args else catalog("-o", str(out), *args)
    assert cp.returncode == 2, (cp.returncode, cp.stderr)
    assert len(cp.stderr.strip().splitlines()) == 1 and says in cp.stderr, cp.stderr
    assert "Traceback" not in cp.stderr and cp.stdout == ""
    after = sorted((p.relative_to(tmp_path), p.read_bytes() if p.is_file() else b"", p.is_symlink())
                   for p in tmp_path.rglob("*"))
    assert after == before, "bad input changed the file system"


def test_write_replaces_only_a_catalog(tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.write(out, {"index.html": "one"}, {"schema": 1, "tags": {}})
    site.write(out, {"index.html": "two"}, {"schema": 1, "tags": {}})
    assert (out / "index.html").read_text() == "two" and (out / site.MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_gpu_facts_name_generations_and_drivers() -> None:
    g = view.gpu_facts([{"name": "cuda", "device": "nvidia", "requires": {
        "cuda": "12.8", "min_driver": "570.26", "min_driver_compat": "525.60.13",
        "sass": ["7.0", "8.0", "9.0"], "ptx": ["9.0"]}}])
    path = {c["cc"]: c["path"] for c in g["cover"]}
    assert path["6.1"] is None and path["8.6"] == "sass" and path["9.0"] == "sass" and path["12.0"] == "ptx"
    assert g["ptx_needs_full_driver"] and g["min_driver"] == "570.26"
    assert view.gpu_facts([{"name": "cpu", "device": "cpu"}]) is None
