"""Verify a pushed OCI image index by digest, with skopeo (Debian's ``skopeo``: the
registry client of containers/image, run by ``registry``, stagecraft's one path to
registries) rather than growing our own registry client.

``verify_index(ref, digest, platforms)`` fetches the index *by digest*, checks that its
bytes hash to that digest, that it holds exactly the expected platforms (attestation
manifests aside), and, for every platform, that the manifest it names hashes to the digest
the index gives and that its image config is for that platform. ``parse_index`` is the
pure part. Media types and fields: OCI image-index spec
(https://github.com/opencontainers/image-spec/blob/main/image-index.md) and Docker's
manifest list v2.2; attestation manifests as BuildKit writes them (platform
``unknown/unknown``, annotation ``vnd.docker.reference.type: attestation-manifest``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .registry import Registry, RegistryError, run_skopeo

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")


class IndexMismatch(Exception):
    """The index or one of its manifests is not what was pushed (message says which)."""


@dataclass(frozen=True)
class PlatformManifest:
    """One platform of an index: ``platform`` (``linux/arm64``), manifest ``digest``,
    its ``size`` in bytes (the manifest document, as the index records it)."""

    platform: str
    digest: str
    size: int


def sha256(body: bytes) -> str:
    """``sha256:<hex>`` of ``body``."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def parse_index(body: bytes) -> tuple[str, list[PlatformManifest]]:
    """``(media type, platforms)`` of an index document; attestation manifests are left
    out. Raises ``IndexMismatch`` when ``body`` is not an image index."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise IndexMismatch(f"not JSON: {exc}") from None
    media = doc.get("mediaType", "")
    if media not in INDEX_TYPES or not isinstance(doc.get("manifests"), list):
        raise IndexMismatch(f"not an image index (mediaType {media or 'missing'})")
    out = []
    for m in doc["manifests"]:
        p = m.get("platform") or {}
        annotations = m.get("annotations") or {}
        if annotations.get("vnd.docker.reference.type") == "attestation-manifest" or \
                p.get("os") == "unknown":
            continue
        name = f"{p.get('os', '')}/{p.get('architecture', '')}"
        if p.get("variant") and not (name == "linux/arm64" and p["variant"] == "v8"):
            name += f"/{p['variant']}"
        out.append(PlatformManifest(name, str(m.get("digest", "")), int(m.get("size", 0))))
    return media, out


Runner = Callable[[list[str]], bytes]


def skopeo_runner(client: Registry | None = None, tls_verify: bool = True) -> Runner:
    """A function running ``skopeo inspect ARGS`` (``registry.run_skopeo``) and returning
    its stdout: through ``client`` (its TLS setting and credentials) when given, else
    with ``tls_verify`` and the credentials skopeo finds itself. Raises
    ``IndexMismatch`` with skopeo's own message when it fails or is missing."""

    def run(args: list[str]) -> bytes:
        try:
            if client is not None:
                return client.inspect(args)
            return run_skopeo(["inspect", *args], tls_verify)
        except RegistryError as exc:
            if "not installed" in exc.detail:
                raise IndexMismatch(exc.detail) from None
            raise IndexMismatch(f"skopeo inspect {args[-1]}: {exc.detail}") from None

    return run


def verify_index(repo_ref: str, digest: str, platforms: Sequence[str],
                 run: Runner) -> list[PlatformManifest]:
    """Check the index ``repo_ref@digest`` (``host:port/repo``) in the registry; returns
    its platforms. Raises ``IndexMismatch`` naming the first disagreement."""
    body = run(["--raw", f"docker://{repo_ref}@{digest}"])
    if sha256(body) != digest:
        raise IndexMismatch(f"{repo_ref}@{digest}: the registry serves bytes of {sha256(body)}")
    _, found = parse_index(body)
    have = sorted(p.platform for p in found)
    if have != sorted(platforms):
        raise IndexMismatch(f"{repo_ref}@{digest} holds {', '.join(have) or 'no platform'}, "
                          f"not {', '.join(sorted(platforms))}")
    for pm in found:
        mbody = run(["--raw", f"docker://{repo_ref}@{pm.digest}"])
        if sha256(mbody) != pm.digest:
            raise IndexMismatch(f"{pm.platform} manifest {pm.digest}: the registry serves bytes "
                              f"of {sha256(mbody)}")
        config = json.loads(run(["--config", f"docker://{repo_ref}@{pm.digest}"]))
        arch = f"{config.get('os', '')}/{config.get('architecture', '')}"
        if arch != pm.platform:
            raise IndexMismatch(f"{pm.platform} manifest {pm.digest} has a {arch} image config")
    return found
