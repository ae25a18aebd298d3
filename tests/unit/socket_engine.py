"""A stand-in Docker engine at the lowest level: an HTTP server on a Unix socket, its
answers those of a ``BaseHTTPRequestHandler`` a test writes as Docker answers, selected
for the test's process by ``DOCKER_HOST``."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], where: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Serve ``handler`` on ``where/engine.sock`` with ``DOCKER_HOST`` set to it; yields the
    socket's path. The server stops when the block ends."""
    sock = where / "engine.sock"
    server = socketserver.ThreadingUnixStreamServer(str(sock), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    try:
        yield sock
    finally:
        server.shutdown()
        server.server_close()


class Docker26(BaseHTTPRequestHandler):
    """A stand-in's common part: Docker 26.1.5's answers to ``_ping`` and ``version``
    (``answer_get`` for the rest of GET, a 404 where it returns False), and ``send`` of a
    JSON body on a connection closed after it (said in the header too: the SDK pools
    connections and would reuse one this closed)."""

    protocol_version = "HTTP/1.1"

    def send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", "1.45")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_GET(self) -> None:
        if self.path.endswith("/_ping"):
            self.send(200, b"OK")
        elif self.path.endswith("/version"):
            self.send(200, json.dumps({"ApiVersion": "1.45", "Version": "26.1.5", "Os": "linux"}).encode())
        elif not self.answer_get():
            self.send(404, json.dumps({"message": "No such image"}).encode())

    def answer_get(self) -> bool:
        """Answer a GET the common part does not; False: none (a 404 follows)."""
        return False

    def log_message(self, *args) -> None:
        pass
