"""The image's CycloneDX SBOM (written by `build.py test` from the image itself, see
stagecraft/sbom.py) lists exactly what is installed: compared here with dpkg-query and
pip, two other readers of the same databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def bom(spec):
    if not spec.get("sbom"):
        pytest.skip("no SBOM path in the spec (run through `build.py test`)")
    return json.loads(Path(spec["sbom"]).read_text())


def _by(bom, manager):
    return {c["name"]: c for c in bom["components"]
            if {"name": "stagecraft:package-manager", "value": manager} in c.get("properties", [])}


def test_sbom_describes_this_image(bom, spec):
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    root = bom["metadata"]["component"]
    assert root["type"] == "container"
    assert root["hashes"] == [{"alg": "SHA-256", "content": spec["image_id"].split(":")[-1]}]


def test_sbom_lists_exactly_the_installed_debian_packages(bom, host):
    out = host.run("dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n'")
    assert out.rc == 0, out.stderr
    installed = {(p, v) for s, p, v in (ln.split() for ln in out.stdout.splitlines()) if s == "ii"}
    listed = {(c["name"], c["version"]) for c in _by(bom, "dpkg").values()}
    assert listed == installed, (sorted(listed - installed), sorted(installed - listed))


def test_sbom_lists_exactly_the_installed_python_distributions(bom, host):
    python = "/opt/venv/bin/python" if host.file("/opt/venv/bin/python").exists else "python3"
    out = host.run(f"{python} -m pip list --format json --disable-pip-version-check")
    assert out.rc == 0, out.stderr
    installed = {(d["name"].lower().replace("_", "-"), d["version"]) for d in json.loads(out.stdout)}
    listed = {(c["name"].lower().replace("_", "-"), c["version"]) for c in _by(bom, "pip").values()}
    assert listed == installed, (sorted(listed - installed), sorted(installed - listed))


def test_sbom_carries_the_locked_hashes(bom, spec):
    if not spec.get("locked"):
        pytest.skip("the matrix has no lock: no hashes to carry")
    fw = spec["framework"]
    comp = next(c for c in _by(bom, "pip").values()
                if c["name"].lower() == fw["package"].lower())
    assert comp["version"] == fw["version"]
    assert comp.get("hashes"), f"{fw['package']} has no SHA-256 in the SBOM (is matrix.lock there?)"
    libc = _by(bom, "dpkg")["libc6"]
    assert libc.get("hashes") and len(libc["hashes"][0]["content"]) == 64


def test_sbom_states_licenses_where_the_metadata_does(bom):
    with_license = [c for c in bom["components"] if c.get("licenses")]
    assert len(with_license) >= len(bom["components"]) // 2
