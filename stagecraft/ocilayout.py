"""One image out of an OCI image layout that BuildKit wrote (``--output
type=oci,tar=false``; https://github.com/opencontainers/image-spec/blob/main/image-layout.md).

With attestations, BuildKit's layout names an image index holding the image manifest and
an attestation manifest (platform ``unknown/unknown``, annotations
``vnd.docker.reference.type: attestation-manifest`` and ``vnd.docker.reference.digest``:
the image manifest it is about), whose layers are in-toto statements
(``application/vnd.in-toto+json``; BuildKit's docs/attestations/attestation-storage.md).
``single_image`` reads those statements and points the layout's ``index.json`` at the
image manifest itself, keeping the name annotations, so that ``docker load`` makes that
manifest the image: its digest does not depend on the build's time, as the provenance's
does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
ATTESTATION = "attestation-manifest"
IN_TOTO = "application/vnd.in-toto+json"
# A statement is a small JSON document (BuildKit's provenance is a few KB); anything
# larger is not read.
MAX_STATEMENT = 16 * 1024 * 1024


def _blob(layout: Path, digest: str, limit: int = MAX_STATEMENT) -> bytes:
    algo, _, hexdigest = digest.partition(":")
    if algo != "sha256" or len(hexdigest) != 64 or not all(c in "0123456789abcdef" for c in hexdigest):
        raise ValueError(f"not a sha256 digest: {digest[:80]!r}")
    path = layout / "blobs" / "sha256" / hexdigest
    if path.stat().st_size > limit:
        raise ValueError(f"blob {digest[:19]} is larger than {limit} bytes")
    return path.read_bytes()


def _image_in(layout: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None,
                                      list[dict[str, Any]]]:
    """(index.json, its one descriptor, the image's descriptor inside it when that is an
    index, else None, the attestation descriptors). Raises as ``single_image``."""
    index = json.loads((layout / "index.json").read_text())
    tops = index.get("manifests") or []
    if len(tops) != 1:
        raise ValueError(f"index.json names {len(tops)} manifests, not one")
    top = tops[0]
    if top.get("mediaType") not in INDEX_TYPES:
        return index, top, None, []
    inner = json.loads(_blob(layout, top["digest"]))
    images, attestations = [], []
    for m in inner.get("manifests") or []:
        kind = (m.get("annotations") or {}).get("vnd.docker.reference.type")
        (attestations if kind == ATTESTATION else images).append(m)
    if len(images) != 1:
        raise ValueError(f"the index holds {len(images)} images, not one")
    return index, top, dict(images[0]), attestations


def image_manifest(layout: Path) -> str:
    """The digest of the layout's one image manifest; the layout is only read. Raises as
    ``single_image``."""
    _, top, image, _ = _image_in(layout)
    return (image or top)["digest"]


def single_image(layout: Path) -> tuple[str, list[dict[str, Any]]]:
    """Point ``layout/index.json`` at its one image manifest; returns ``(manifest digest,
    the in-toto statements attached to it)``. A layout whose index.json already names a
    manifest is left as it is (no statements). Raises ``ValueError`` (or ``OSError``,
    ``KeyError``) when the layout does not hold exactly one image."""
    index, top, image, attestations = _image_in(layout)
    if image is None:
        return top["digest"], []
    statements = []
    for att in attestations:
        if (att.get("annotations") or {}).get("vnd.docker.reference.digest") != image["digest"]:
            continue
        manifest = json.loads(_blob(layout, att["digest"]))
        for layer in manifest.get("layers") or []:
            if layer.get("mediaType") == IN_TOTO:
                statements.append(json.loads(_blob(layout, layer["digest"])))
    image["annotations"] = {**(image.get("annotations") or {}), **(top.get("annotations") or {})}
    index["manifests"] = [image]
    (layout / "index.json").write_text(json.dumps(index))
    return image["digest"], statements
