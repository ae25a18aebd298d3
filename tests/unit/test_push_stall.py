"""A push whose registry holds a request unanswered: the daemon sends no progress and
waits without a limit, so the push stream's read timeout stops it (publish.PUSH_STALL_S)
as a transient failure, retried, then said (found by the fault suite: a push hung for
15 minutes). The engine is a stand-in at its API socket: a unix-socket HTTP server that
answers the push with one progress event and then goes silent, as dockerd does."""

from __future__ import annotations

import socket
import threading
import time

import docker
import pytest

from stagecraft.publish import EngineDaemon
from stagecraft.pushsteps import PublishError, push_once


def _silent_engine(path: str, stop: threading.Event) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)

    def serve() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        event = b'{"status":"The push refers to repository [r/x]"}\r\n'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n"
                     + f"{len(event):x}\r\n".encode() + event + b"\r\n")
        stop.wait(30)  # the registry holds the upload: nothing more
        conn.close()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_a_push_without_progress_is_stopped_as_transient(tmp_path):
    path = str(tmp_path / "docker.sock")
    stop = threading.Event()
    _silent_engine(path, stop)
    api = docker.APIClient(base_url=f"unix://{path}", version="1.41", timeout=600)
    engine = type("E", (), {"client": type("C", (), {"api": api})()})()
    daemon = EngineDaemon(engine, stall_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(PublishError) as err:
        push_once(daemon, "r/x", "1.0", lambda s: None)
    stop.set()
    assert time.monotonic() - t0 < 10
    assert err.value.kind == "transient"
    assert "no progress for 0.5 s (the registry holds a request unanswered?)" in str(err.value)
    assert api.timeout == 600  # the client's own timeout is back
