"""Failure messages and the index preflight, without Docker."""

from __future__ import annotations

import http.server
import threading

from stagecraft.engine import failure_reason
from stagecraft.preflight import index_reachable

PIP_FAILURE = """\
#5 [2/6] RUN --mount=type=secret,id=pip-ca,required=false pip install ...
#5 3.11 Collecting six==0.0.404
#5 18.39 ERROR: Could not find a version that satisfies the requirement six==0.0.404 (from versions: 1.16.0)
#5 18.39 ERROR: No matching distribution found for six==0.0.404
#5 ERROR: executor failed running [/bin/bash -o pipefail -c pip install ...]: exit code: 1
------
executor failed running [/bin/bash -o pipefail -c pip install ...]: exit code: 1""".splitlines()


def test_failure_reason_prefers_the_steps_own_error():
    assert failure_reason(PIP_FAILURE) == "ERROR: No matching distribution found for six==0.0.404"


def test_failure_reason_falls_back_to_buildkit():
    lines = ["#3 [internal] load metadata", "#3 ERROR: pull access denied for nope/nope"]
    assert failure_reason(lines) == "#3 ERROR: pull access denied for nope/nope"
    assert failure_reason([]) == "no output"


def test_index_preflight():
    assert index_reachable("http://127.0.0.1:9/simple/", None, timeout_s=2) != ""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            self.send_response(404)  # any answer counts as reachable
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert index_reachable(f"http://127.0.0.1:{server.server_port}/simple/", None) == ""
    finally:
        server.shutdown()
