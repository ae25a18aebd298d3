"""Index verification: the pure parse of a real OCI image index (pushed by Docker 26 with
the containerd image store and read back with skopeo: tests/fixtures/oci), and the checks
verify_index makes, with documents served by digest as skopeo would serve them."""

from __future__ import annotations

import json

import pytest

from stagecraft.indexcheck import IndexMismatch, parse_index, sha256, verify_index
from tests.conftest import ROOT

INDEX = (ROOT / "tests" / "fixtures" / "oci" / "index-amd64-arm64.json").read_bytes()


def test_parse_leaves_out_attestation_manifests():
    media, found = parse_index(INDEX)
    assert media == "application/vnd.oci.image.index.v1+json"
    assert [p.platform for p in found] == ["linux/amd64", "linux/arm64"]
    assert all(p.digest.startswith("sha256:") and p.size > 0 for p in found)


def test_a_manifest_is_not_an_index():
    with pytest.raises(IndexMismatch, match="not an image index"):
        parse_index(json.dumps({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                "layers": []}).encode())


def _registry(index: bytes, configs: dict[str, str], tamper: str = ""):
    """Documents by digest: the index, and for each platform a manifest whose digest the
    index names (stand-in bytes: only their hash is checked) and its config."""
    _, found = parse_index(index)
    docs = {sha256(index): index}
    manifests = {p.digest: p for p in found}

    def run(args: list[str]) -> bytes:
        digest = args[-1].rsplit("@", 1)[1]
        if digest in docs:
            return docs[digest]
        pm = manifests[digest]
        if args[0] == "--config":
            return json.dumps({"os": "linux", "architecture": configs[pm.platform]}).encode()
        raise IndexMismatch("stand-in has no manifest bytes")

    return docs, run


def test_wrong_platform_set_is_refused():
    _, run = _registry(INDEX, {})
    with pytest.raises(IndexMismatch, match="holds linux/amd64, linux/arm64, not linux/amd64$"):
        verify_index("127.0.0.1:5000/x", sha256(INDEX), ["linux/amd64"], run)


def test_bytes_that_do_not_hash_to_the_digest_are_refused():
    _, run = _registry(INDEX, {})
    wrong = "sha256:" + "0" * 64

    def served(args: list[str]) -> bytes:
        return INDEX

    with pytest.raises(IndexMismatch, match="serves bytes of"):
        verify_index("127.0.0.1:5000/x", wrong, ["linux/amd64", "linux/arm64"], served)
