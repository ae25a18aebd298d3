"""A registry's faults on the wire: a TCP proxy in front of a real registry that answers
chosen requests with HTTP 500, holds them unanswered (a hung registry) or cuts them
mid-body (a connection reset during an upload), as the fault suite's control file says.

Run as ``python -m tests.faults.proxy LISTEN_HOST:PORT UPSTREAM_HOST:PORT CONTROL``. The
suite starts it inside the engine's network namespace (``nsenter --net``), so the engine
pushes through it to an address it treats as an insecure registry, and the host reaches
the same address. Each request is forwarded with ``Connection: close`` (one request per
connection), so the proxy sees every request line without parsing HTTP framing.

The control file (JSON, rewritten whole by the suite, read at each request) holds
``{"mode": "pass" | "hold" | "error" | "hang" | "cut", "match": REGEX, "times": N, "seconds":
S, "bytes": B}``: a request whose line matches ``match`` meets the fault, ``times`` times
at most (then it passes; the count is kept per control file content), ``hold`` keeps it
unforwarded until the control file changes (at most ``seconds``), then forwards it as
``pass`` does (the suite kills the registry meanwhile: the upload is certain to be under
way), ``hang`` holds it ``seconds`` then closes, ``cut`` forwards ``bytes`` of its body
and closes both sides. Every fault met is appended to ``CONTROL.log`` (one line each),
before it acts.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from pathlib import Path

HEAD_LIMIT = 64 * 1024  # bytes of a request head read before giving up on it
_met: dict[str, int] = {}
_lock = threading.Lock()


def _control(path: Path) -> tuple[dict, str]:
    try:
        raw = path.read_text()
        return json.loads(raw), raw
    except (OSError, ValueError):
        return {"mode": "pass"}, ""


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < HEAD_LIMIT:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    head, sep, rest = data.partition(b"\r\n\r\n")
    return head + sep, rest


def _close_header(head: bytes) -> bytes:
    lines = [ln for ln in head.split(b"\r\n") if ln and not ln.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def _pipe(src: socket.socket, dst: socket.socket, limit: int | None = None) -> None:
    sent = 0
    try:
        while limit is None or sent < limit:
            chunk = src.recv(65536 if limit is None else min(65536, limit - sent))
            if not chunk:
                break
            dst.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(conn: socket.socket, upstream: tuple[str, int], control: Path) -> None:
    with conn:
        first = conn.recv(1, socket.MSG_PEEK)
        if not first[:1].isalpha():  # a TLS ClientHello (an engine tries HTTPS first):
            with socket.create_connection(upstream, timeout=30) as up:  # the registry's own answer
                t = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
                t.start()
                _pipe(up, conn)
                t.join(5)
            return
        head, rest = _read_head(conn)
        if not head:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        ctl, raw = _control(control)
        mode = ctl.get("mode", "pass")
        if mode != "pass" and re.search(ctl.get("match", "/blobs/uploads/"), line):
            with _lock:
                n = _met.get(raw, 0)
                hit = n < int(ctl.get("times", 1 << 30))
                _met[raw] = n + hit
            if hit:
                with open(f"{control}.log", "a") as log:
                    log.write(f"{time.time():.3f} {mode} {line}\n")
                if mode == "hold":  # until the suite rewrites the control file, then on
                    until = time.monotonic() + float(ctl.get("seconds", 30))
                    while _control(control)[1] == raw and time.monotonic() < until:
                        time.sleep(0.01)
                elif mode == "error":
                    body = b'{"errors":[{"code":"UNKNOWN","message":"injected fault"}]}'
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
                    return
                elif mode == "hang":
                    time.sleep(float(ctl.get("seconds", 30)))
                    return
                elif mode == "cut":  # some of the body, at most 10 s of it, then both sides closed
                    with socket.create_connection(upstream, timeout=30) as up:
                        up.sendall(_close_header(head) + rest[: int(ctl.get("bytes", 0))])
                        left = int(ctl.get("bytes", 0)) - len(rest)
                        if left > 0 and b"content-length: 0" not in head.lower():
                            conn.settimeout(10)
                            _pipe(conn, up, left)
                    return
        with socket.create_connection(upstream, timeout=30) as up:
            up.settimeout(None)
            up.sendall(_close_header(head) + rest)
            t = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
            t.start()
            _pipe(up, conn)
            t.join(5)


def main(argv: list[str]) -> int:
    """Serve until killed. ``argv``: LISTEN_HOST:PORT UPSTREAM_HOST:PORT CONTROL."""
    listen, upstream, control = argv
    lh, lp = listen.rsplit(":", 1)
    uh, up = upstream.rsplit(":", 1)
    srv = socket.create_server((lh, int(lp)), reuse_port=False, backlog=64)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve, args=(conn, (uh, int(up)), Path(control)), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
