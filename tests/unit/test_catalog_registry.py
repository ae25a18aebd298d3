"""`build.py catalog --registry`: digests and compressed sizes of pushed images, read from
a stand-in registry (a real HTTP server on 127.0.0.1 serving the v2 manifest API with
canned OCI documents), merged into the tag pages; a registry that does not answer leaves
the sizes unknown and says so, without failing the catalog."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from stagecraft.catalog import registry

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def manifest(layers: list[int]) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 1000,
                                  "digest": "sha256:" + "c" * 64},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": n,
                                   "digest": "sha256:" + f"{i}" * 64} for i, n in enumerate(layers)]}).encode()


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def documents() -> dict[str, tuple[bytes, str]]:
    amd, arm, att = manifest([700_000_000, 5_000]), manifest([650_000_000]), manifest([1_000])
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": digest(amd), "size": len(amd),
         "platform": {"os": "linux", "architecture": "amd64"}},
        {"mediaType": OCI_MANIFEST, "digest": digest(arm), "size": len(arm),
         "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
        {"mediaType": OCI_MANIFEST, "digest": digest(att), "size": len(att),
         "platform": {"os": "unknown", "architecture": "unknown"}}]}).encode()
    docs = {"2.6.2-cpu": (index, OCI_INDEX)}
    for body in (amd, arm, att):
        docs[digest(body)] = (body, OCI_MANIFEST)
    return docs


@pytest.fixture()
def stand_in() -> Iterator[str]:
    docs = documents()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/v2/":
                self.send_response(200)
                self.end_headers()
                return
            prefix = "/v2/stagecraft/paddle/manifests/"
            ref = unquote(self.path[len(prefix):]) if self.path.startswith(prefix) else ""
            if ref not in docs:
                body = b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}'
                self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            body, kind = docs[ref]
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Docker-Content-Digest", digest(body))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_read_registry_sizes_each_platform_and_skips_attestations(stand_in: str) -> None:
    pushed, notes = registry.read_registry(stand_in, "stagecraft/paddle", ["2.6.2-cpu", "3.2.2-cpu"], timeout_s=10)
    assert "2.6.2-cpu" in pushed, notes
    got = {e["platform"]: e["compressed_size"] for e in pushed["2.6.2-cpu"]}
    assert got == {"linux/amd64": 700_006_000, "linux/arm64": 650_001_000}, pushed
    assert "3.2.2-cpu" not in pushed and len(notes) == 1 and "3.2.2-cpu: not read" in notes[0], notes


def test_merge_adds_to_the_same_platform_or_a_new_entry() -> None:
    facts = {"a": {"images": [{"platform": "linux/amd64", "inspect": {"Size": 5}}]}}
    pushed = {"a": [{"platform": "linux/amd64", "digest": "sha256:1", "compressed_size": 3},
                    {"platform": "linux/arm64", "digest": "sha256:2", "compressed_size": 4}],
              "b": [{"platform": "", "digest": "sha256:3", "compressed_size": 9}]}
    out = registry.merge(facts, pushed, "h:5000/r")
    a = out["a"]["images"]
    assert a[0]["compressed_size"] == 3 and a[0]["inspect"] == {"Size": 5} and a[0]["registry_digest"] == "h:5000/r@sha256:1"
    assert a[1] == {"platform": "linux/arm64", "compressed_size": 4, "registry_digest": "h:5000/r@sha256:2"}
    assert out["b"]["images"][0]["compressed_size"] == 9
    assert "compressed_size" not in facts["a"]["images"][0], "merge must not change its input"


def test_catalog_with_a_registry_shows_compressed_sizes_and_digests(stand_in: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    env.update({"DOCKER_HOST": "unix:///nonexistent/docker.sock", "DOCKER_CONFIG": str(tmp_path / "docker")})
    cp = subprocess.run([sys.executable, str(REPO / "build.py"), "catalog", "-o", str(tmp_path / "site"),
                         "--tag", "2.6.2-cpu", "--registry", stand_in], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=120, check=False)
    assert cp.returncode == 0, cp.stderr
    page = (tmp_path / "site" / "tags" / "2.6.2-cpu.html").read_text()
    assert "compressed (registry): 700.0 MB" in page and "compressed (registry): 650.0 MB" in page, page
    assert f"docker pull {stand_in}/stagecraft/paddle:2.6.2-cpu" in page
    assert f"{stand_in}/stagecraft/paddle@sha256:" in page


def test_a_registry_that_does_not_answer_leaves_sizes_unknown(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    env.update({"DOCKER_HOST": "unix:///nonexistent/docker.sock", "DOCKER_CONFIG": str(tmp_path / "docker")})
    cp = subprocess.run([sys.executable, str(REPO / "build.py"), "catalog", "-o", str(tmp_path / "site"),
                         "--tag", "2.6.2-cpu", "--registry", "127.0.0.1:9"], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=120, check=False)
    assert cp.returncode == 0, cp.stderr
    assert "note: 1 of 1 tags not read from 127.0.0.1:9/stagecraft/paddle" in cp.stderr, cp.stderr
    assert "Not built." in (tmp_path / "site" / "tags" / "2.6.2-cpu.html").read_text()
