"""The catalog's parts: package changes ordered as each package manager orders versions,
an SBOM read back into packages, the JSON the selector embeds, the hardware tables."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from stagecraft import sbom
from stagecraft.catalog import diff, hardware, make, read, site


def test_versions_compare_as_their_package_manager_orders_them() -> None:
    assert diff.newer("pip", "1.26.4", "1.26.10") is True  # not string order
    assert diff.newer("pip", "2.6.0rc1", "2.6.0") is True
    assert diff.newer("dpkg", "0.19.0-1", "1:0.19.0-1") is True  # the epoch wins
    assert diff.newer("dpkg", "1.0~rc1-1", "1.0-1") is True  # a tilde sorts first
    assert diff.newer("dpkg", "12.2.0-14", "12.2.0-14") is None
    assert diff.newer("pip", "not a version", "1.0") is None


def test_compare_sorts_each_change() -> None:
    old = {"python": [{"name": "NumPy", "version": "1.26.4"}, {"name": "six", "version": "1.16.0"}],
           "debian": [{"name": "tini", "version": "0.19.0-1"}]}
    new = {"python": [{"name": "numpy", "version": "2.0.0"}, {"name": "wheel", "version": "0.45.1"}],
           "debian": [{"name": "tini", "version": "0.18.0-1"}]}
    c = diff.compare(old, new)
    assert c["added"] == [("pip", "wheel", "0.45.1")] and c["removed"] == [("pip", "six", "1.16.0")]
    assert c["upgraded"] == [("pip", "numpy", "1.26.4", "2.0.0")]
    assert c["downgraded"] == [("dpkg", "tini", "0.19.0-1", "0.18.0-1")] and c["same"] == 0
    one = diff.change("a", {"images": [{"inspect": {"Size": 10}, "inventory": old}]}, "b", None)
    assert one["size_delta"] is None and not one["readable"]


def test_an_sbom_reads_back_into_its_packages() -> None:
    inv = {"python_prefix": "/opt/venv",
           "debian": [{"name": "tini", "version": "0.19.0-1", "arch": "amd64", "licenses": ["Expat"]}],
           "python": [{"name": "paddlepaddle", "version": "2.6.2", "license_expression": "Apache-2.0",
                       "license": "", "classifiers": []}]}
    doc = json.loads(sbom.make_bom(inv, None, "stagecraft/paddle:2.6.2-cpu", "sha256:" + "a" * 64,
                                   "2026-11-30T12:00:00Z", "debian-12"))
    back = read.inventory_from_sbom(doc)
    assert back["debian"] == [{"name": "tini", "version": "0.19.0-1"}]
    assert back["python"] == [{"name": "paddlepaddle", "version": "2.6.2"}]


def test_embedded_json_cannot_end_its_script_element() -> None:
    text = site.embedded_json({"why": "</script><script>alert(1)</script><!--"})
    assert "<" not in text and json.loads(text)["why"].startswith("</script>")


def test_sizes_read_as_people_read_them() -> None:
    assert site._size(6_420_000_000) == "6.4 GB" and site._size(512) == "512 B" and site._size(None) == "unknown"
    assert site._delta(-12_000_000) == "-12.0 MB" and site._delta(None) == "unknown"


def test_hardware_tables() -> None:
    assert [hardware.generation(cc) for cc in ("3.7", "6.1", "8.9", "9.0", "10.0", "12.0", "2.0")] == [
        "Kepler", "Pascal", "Ada Lovelace", "Hopper", "Blackwell", "Blackwell", ""]
    grid = hardware.driver_grid()
    assert grid == sorted(grid, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert {"450.80.02", "520.61.05", "525.60.13", "570.26"} <= set(grid)  # compatibility.yaml's floors
    assert hardware.floor_driver("470.82.01", grid) == "470.42.01" and hardware.floor_driver("300", grid) is None
    assert all(cc in {c for _, ccs in hardware.GENERATIONS for c in ccs} for _, cc in hardware.GPU_MODELS)
    # Every kernel set's CPU flags are told apart by the CPU choices of matrix.yaml's sets.
    assert hardware.unmodelled_flags([{"device": "cpu", "requires": {"cpu_flags": ["avx2", "neon"]}}]) == []
    assert hardware.unmodelled_flags([{"device": "cpu", "requires": {"cpu_flags": ["avx512_vnni"]}}]) == ["avx512_vnni"]


def test_facts_files_of_one_tag_per_platform_are_put_together(tmp_path: Path) -> None:
    amd = {"platform": "linux/amd64", "inspect": {"Size": 1}}
    arm = {"platform": "linux/arm64", "inspect": {"Size": 2}}
    newer_amd = {"platform": "linux/amd64", "inspect": {"Size": 3}}
    files = []
    for n, images in enumerate(([amd], [arm, newer_amd], [])):
        path = tmp_path / f"facts{n}.json"
        path.write_text(json.dumps({"schema": 1, "tags": {"t": {"ref": "r:t", "images": images}}}))
        files.append(read.load_facts(path, ["t"]))
    assert files[2] == {}, "a tag without images is not built"
    assert read.merge_facts(files)["t"]["images"] == [newer_amd, arm]


def test_the_selector_says_what_its_cpu_choices_do_not_tell_apart() -> None:
    plain = {"linux/amd64": [{"tag": "a", "kernel_sets": [{"device": "cpu", "requires": {"cpu_flags": ["avx2"]}}]}]}
    vnni = {"linux/amd64": [{"tag": "b", "kernel_sets": [{"device": "cpu", "requires": {"cpu_flags": ["avx512_vnni"]}}]}]}
    assert make.notes(plain) == []
    assert "avx512_vnni" in make.notes(vnni)[0]


def test_ci_makes_the_catalog_publishes_it_on_a_release_and_keeps_the_screenshots() -> None:
    import yaml

    wf = REPO / ".github" / "workflows"
    images = yaml.safe_load((wf / "images.yml").read_text())["jobs"]
    cell = " ".join(s.get("run", "") for s in images["image"]["steps"])
    assert 'build.py catalog --tag "${{ matrix.tag }}"' in cell
    job = images["catalog"]
    assert "image" in job["needs"] and any("build.py catalog -o site" in s.get("run", "") for s in job["steps"])
    assert images["pages"]["needs"] == "catalog" and "refs/tags/v" in images["pages"]["if"]
    ci = yaml.safe_load((wf / "ci.yml").read_text())["jobs"]["test"]["steps"]
    shots = (REPO / "tests" / "integration" / "test_catalog_browser.py").read_text()
    kept = [s["with"]["path"] for s in ci if "upload-artifact" in s.get("uses", "")]
    assert kept == [".stagecraft/catalog-shots/"] and '".stagecraft" / "catalog-shots"' in shots, kept
