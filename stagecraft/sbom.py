"""A CycloneDX SBOM of an image, read from the image itself.

``inventory(engine, ref)`` runs one short container of the image that reads what is
installed: every Debian package in dpkg's status database (name, version, architecture,
and the licenses its machine-readable ``/usr/share/doc/<package>/copyright`` states) and
every distribution of the image's Python environment (``/opt/venv`` when there is one,
through ``importlib.metadata``: name, version, License-Expression or License or the
license classifiers). ``make_bom(...)`` turns that into a CycloneDX 1.6 JSON document
(cyclonedx-python-lib) with package URLs (``pkg:deb/debian/...``, ``pkg:pypi/...``) and
the SHA-256 matrix.lock records for each package at its installed version.

The document is deterministic for one image: its serial number is derived from the
image id and its timestamp is the image's creation time.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import BuildError

if TYPE_CHECKING:
    from .engine import Engine
    from .lockfile import Lock

# Run inside the image (its Python, no site customisation): prints the inventory as JSON.
INVENTORY_SCRIPT = r"""
import email.utils, json, os, re, sys
from importlib import metadata
deb = []
para = {}
def flush():
    if para.get("Status", "").endswith(" installed"):
        lic = set()
        path = "/usr/share/doc/%s/copyright" % para["Package"]
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            text = ""
        if text.startswith("Format:") and "copyright-format" in text.splitlines()[0]:
            for m in re.finditer(r"^License: *([^\n]+)$", text, re.M):
                lic.add(m.group(1).strip())
        deb.append({"name": para["Package"], "version": para["Version"],
                    "arch": para.get("Architecture", ""), "licenses": sorted(lic)})
    para.clear()
key = None
with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
    for line in f:
        line = line.rstrip("\n")
        if not line:
            flush(); key = None
        elif line[0] in " \t":
            continue
        elif ":" in line:
            key, _, value = line.partition(":")
            para[key] = value.strip()
flush()
py = []
for d in metadata.distributions():
    m = d.metadata
    lic = [c.split(" :: ")[-1] for c in (m.get_all("Classifier") or []) if c.startswith("License ::")]
    py.append({"name": m["Name"], "version": d.version,
               "license_expression": m.get("License-Expression") or "",
               "license": (m.get("License") or "").strip()[:200] if "\n" not in (m.get("License") or "").strip() else "",
               "classifiers": sorted(set(lic))})
print(json.dumps({"python_prefix": sys.prefix, "debian": sorted(deb, key=lambda p: p["name"]),
                  "python": sorted(py, key=lambda p: p["name"].lower())}))
"""

_LAUNCH = ('if [ -x /opt/venv/bin/python ]; then exec /opt/venv/bin/python -I -c "$0"; '
           'else exec python3 -I -c "$0"; fi')


def inventory(engine: Engine, ref: str, name: str = "") -> dict[str, Any]:
    """What image ``ref`` has installed: ``{"python_prefix", "debian": [{"name",
    "version", "arch", "licenses"}], "python": [{"name", "version", "license_expression",
    "license", "classifiers"}]}``. Runs one container (``containers.run_once``: removed
    however the run ends); ``name`` (a tag) names the image in messages. Raises
    ``BuildError`` where it fails or prints no JSON."""
    from . import containers

    out = containers.run_once(engine.client, ref, ["/bin/sh", "-c", _LAUNCH, INVENTORY_SCRIPT],
                              "inventory", name=name, network_disabled=True, user="0",
                              environment={"STAGECRAFT_QUIET": "1"})
    try:
        return json.loads(out.decode())
    except ValueError as exc:
        raise BuildError(f"the inventory of {name or ref} is not JSON ({exc}): its image's "
                         "Python printed something else at start; check its sitecustomize") from None


def _lock_hashes(lock: Lock | None) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], list[str]]]:
    from .lockkeys import normalize

    deb: dict[tuple[str, str], str] = {}
    py: dict[tuple[str, str], list[str]] = {}
    if lock is None:
        return deb, py
    for e in lock.debian.values():
        for pkg, rec in [*e["base"].items(), *(p for s in e["stages"].values() for p in s.items())]:
            deb[(pkg, rec["version"])] = rec["sha256"]
    for e in lock.python.values():
        for name, rec in e.get("packages", {}).items():
            py.setdefault((normalize(name), rec["version"]), []).extend(rec["files"].values())
    return deb, py


def make_bom(inv: dict[str, Any], lock: Lock | None, ref: str, image_id: str,
             created: str, distro: str) -> str:
    """The CycloneDX 1.6 JSON document of an image whose inventory is ``inv``.

    ``ref`` names the image (``repo:tag``), ``image_id`` its config digest (the serial
    number derives from it), ``created`` its creation time (RFC 3339, the document's
    timestamp), ``distro`` the purl ``distro`` qualifier (``debian-12``). Hashes come from
    ``lock`` where it has the installed version.
    """
    from cyclonedx.factory.license import LicenseFactory
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    from .lockkeys import normalize

    deb_hashes, py_hashes = _lock_hashes(lock)
    lf = LicenseFactory()
    bom = Bom()
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, f"stagecraft:{image_id}")
    bom.metadata.timestamp = datetime.fromisoformat(created.replace("Z", "+00:00"))
    repo, _, tag = ref.rpartition(":")
    bom.metadata.component = Component(
        type=ComponentType.CONTAINER, name=repo, version=tag, bom_ref=f"image:{image_id}",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=image_id.split(":")[-1])])
    for p in inv["debian"]:
        purl = PackageURL("deb", "debian", p["name"], p["version"],
                          qualifiers={"arch": p["arch"], "distro": distro})
        sha = deb_hashes.get((p["name"], p["version"]))
        bom.components.add(Component(
            type=ComponentType.LIBRARY, name=p["name"], version=p["version"], purl=purl,
            bom_ref=purl.to_string(),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha)] if sha else [],
            licenses=[lf.make_with_name(x) for x in p["licenses"]],
            properties=[Property(name="stagecraft:package-manager", value="dpkg")]))
    for p in inv["python"]:
        purl = PackageURL("pypi", None, normalize(p["name"]), p["version"])
        shas = sorted(set(py_hashes.get((normalize(p["name"]), p["version"]), [])))
        stated = p["license_expression"] or p["license"]
        licenses = [lf.make_from_string(stated)] if stated else [
            lf.make_with_name(c) for c in p["classifiers"]]
        bom.components.add(Component(
            type=ComponentType.LIBRARY, name=p["name"], version=p["version"], purl=purl,
            bom_ref=purl.to_string(),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h) for h in shas],
            licenses=licenses,
            properties=[Property(name="stagecraft:package-manager", value="pip"),
                        Property(name="stagecraft:python-prefix", value=inv["python_prefix"])]))
    # The image holds every package: the root component depends on each of them.
    bom.register_dependency(bom.metadata.component, list(bom.components))
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    return text if text.endswith("\n") else text + "\n"
