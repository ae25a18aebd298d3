"""`build.py catalog` reading built images from an engine: a stand-in Docker Engine API
(a real HTTP server on 127.0.0.1 answering the few endpoints the docker SDK calls: ping,
version, image inspect and history, container create, archive and remove), reached
through DOCKER_HOST as a real engine is. The image's packages come from the SBOM in the
state directory (as the test run writes it), its kernel sets from its image.json."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from stagecraft import sbom, testing

TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"
REF = f"stagecraft/paddle:{TAG}"
IMAGE_ID = "sha256:" + "d" * 64
LABELS = {"io.stagecraft.framework": "paddlepaddle-gpu", "io.stagecraft.framework.version": "2.6.0",
          "io.stagecraft.cuda": "11.8", "io.stagecraft.cudnn": "8.6.0", "io.stagecraft.python": "3.11"}
# What the build measured: SASS up to 8.6 plus 9.0 (unlike the matrix's list), PTX 9.0.
MANIFEST = {"schema": 1, "kernel_sets": [
    {"name": "cuda", "device": "nvidia", "requires": {"cuda": "11.8", "min_driver": "520.61.05",
                                                      "min_driver_compat": "450.80.02",
                                                      "sass": ["6.1", "8.6", "9.0"], "ptx": ["9.0"]}},
    {"name": "cpu-avx2", "device": "cpu", "requires": {"cpu_flags": ["avx2", "fma"]}}]}


def archive(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture()
def engine() -> Iterator[tuple[str, list[str]]]:
    """(DOCKER_HOST of the stand-in, the requests it saw)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, code: int, body: bytes | dict | list, kind: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def route(self) -> None:
            path = unquote(urlparse(self.path).path)
            path = "/" + path.split("/", 2)[2] if path.startswith("/v1.") else path
            seen.append(f"{self.command} {path}")
            if path == "/_ping":
                return self.reply(200, b"OK", "text/plain")
            if path == "/version":
                return self.reply(200, {"ApiVersion": "1.43", "Version": "24.0.9"})
            if path == f"/images/{REF}/json":
                return self.reply(200, {"Id": IMAGE_ID, "RepoDigests": [], "Size": 6_420_000_000, "Os": "linux",
                                        "Architecture": "amd64", "Config": {"Labels": LABELS},
                                        "RootFS": {"Layers": ["sha256:" + "1" * 64]}})
            if path == f"/images/{REF}/history":
                return self.reply(200, [{"CreatedBy": "RUN pip install paddlepaddle-gpu", "Size": 5_000_000_000},
                                        {"CreatedBy": "LABEL x=y", "Size": 0}])
            if path.startswith("/images/"):
                return self.reply(404, {"message": f"No such image: {path.split('/')[2]}"})
            if path == "/containers/create":
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                return self.reply(201, {"Id": "c0ffee", "Warnings": []})
            if path == "/containers/c0ffee/json":
                return self.reply(200, {"Id": "c0ffee", "Name": "/x", "Config": {}, "State": {}})
            if path == "/containers/c0ffee/archive":
                return self.reply(200, archive("image.json", json.dumps(MANIFEST).encode()), "application/x-tar")
            if path == "/containers/c0ffee":
                return self.reply(204, b"")
            return self.reply(500, {"message": f"the stand-in does not answer {self.command} {path}"})

        do_GET = do_POST = do_DELETE = do_HEAD = route  # noqa: N815 - http.server's names

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_catalog_reads_a_built_image_from_the_engine(engine: tuple[str, list[str]], tmp_path: Path) -> None:
    host, seen = engine
    state = tmp_path / "state"
    inv = {"python_prefix": "/opt/venv", "debian": [{"name": "python3", "version": "3.11.2-1+b1", "arch": "amd64",
                                                     "licenses": []}],
           "python": [{"name": "paddlepaddle-gpu", "version": "2.6.0", "license_expression": "", "license": "",
                       "classifiers": []},
                      {"name": "nvidia-cuda-runtime-cu11", "version": "11.8.89", "license_expression": "",
                       "license": "", "classifiers": []},
                      {"name": "nvidia-cudnn-cu11", "version": "8.5.0.96", "license_expression": "",
                       "license": "", "classifiers": []}]}
    bom = testing.sbom_path(state, IMAGE_ID)
    bom.parent.mkdir(parents=True)
    bom.write_text(sbom.make_bom(inv, None, REF, IMAGE_ID, "2026-11-30T12:00:00Z", "debian-12"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STAGECRAFT_", "DOCKER_"))}
    env["DOCKER_HOST"] = host
    cp = subprocess.run([sys.executable, str(REPO / "build.py"), "catalog", "-o", str(tmp_path / "site"),
                         "--state-dir", str(state), "--json"], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=120, check=False)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["built"] == [TAG], cp.stdout
    page = (tmp_path / "site" / "tags" / f"{TAG}.html").read_text()
    # Versions from the SBOM's packages: cuDNN 8.5 under a label that says 8.6.0.
    assert "label io.stagecraft.cudnn=8.6.0 disagrees with the installed 8.5.0.96" in page
    # Kernels as the image measured them (9.0 native), not the matrix's (no 9.0).
    assert "the image (/etc/stagecraft/image.json" in page and "SASS: 6.1, 8.6, 9.0" in page, page
    assert "6.4 GB" in page and "none (not tested)" in page
    assert "Not built." in (tmp_path / "site" / "tags" / "2.6.2-cpu.html").read_text()
    assert "POST /containers/create" in seen and "DELETE /containers/c0ffee" in seen, seen
    assert not any(s.endswith("/start") for s in seen), "no container is started for image.json"
