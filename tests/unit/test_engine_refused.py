"""An engine that answers with an error is said as such, its cause kept (stagecraft/cli.py).

Found by the fault suite (seed 20261347, trial 109): the engine's data root filled during
a run, the engine refused to create the suite's container with HTTP 500, and the run's
last line said "the Docker engine stopped answering", cut before "no space left on
device". The engine here is a stand-in at the lowest level: an HTTP server on a Unix
socket that answers /_ping and /version as Docker 26 does and every other request with
HTTP 500 and the engine's words."""

from __future__ import annotations

import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FULL = ("failed to create prepare snapshot dir: failed to create temp dir: mkdir "
        "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/"
        "new-4207342: no space left on device")


class _Engine(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.endswith("/_ping"):
            code, body, kind = 200, b"OK", "text/plain"
        elif self.path.endswith("/version"):
            code, kind = 200, "application/json"
            body = json.dumps({"ApiVersion": "1.45", "Version": "26.1.5", "MinAPIVersion": "1.24",
                               "Os": "linux", "Arch": "amd64", "Components": []}).encode()
        else:
            code, body, kind = 500, json.dumps({"message": FULL}).encode(), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Api-Version", "1.45")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = do_DELETE = _answer

    def log_message(self, *args) -> None:
        pass


def test_a_refusing_engine_is_named_with_its_cause_and_what_to_do(tmp_path):
    sock = tmp_path / "engine.sock"
    server = socketserver.ThreadingUnixStreamServer(str(sock), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "build.py"), "build", "--tag", "2.6.2-cpu", "--platform", "linux/amd64",
             "--state-dir", str(tmp_path / "state")],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "DOCKER_HOST": f"unix://{sock}", "TMPDIR": str(tmp_path)},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    finally:
        server.shutdown()
        server.server_close()
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1, done.stderr[-2000:]
    assert last.startswith("failed: the Docker engine refused a request (500: ")
    assert "no space left on device)" in last and "stopped answering" not in last
    assert last.endswith("no tag was moved; free space on the engine's data root (`docker system df`) "
                         "and run the same command")
