"""A stand-in Docker engine at the lowest level: an HTTP server on a Unix socket, its
answers those of a ``BaseHTTPRequestHandler`` a test writes as Docker answers, selected
for the test's process by ``DOCKER_HOST``."""

from __future__ import annotations

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
