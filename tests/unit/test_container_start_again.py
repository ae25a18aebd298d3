"""``containers.start`` past runc's failure to start a container's first process: the
engine is a stand-in at the lowest level, an HTTP server on a Unix socket answering
``POST /containers/<id>/start`` as Docker does when runc's handshake with the process it
starts fails (HTTP 500 with the runtime's words; the fault suite, issue 24, seed
20261404), then starting it."""

from __future__ import annotations

import json
import struct

import docker
import pytest

from stagecraft import containers, suitecases
from stagecraft.errors import BuildError
from stagecraft.retry import RetryPolicy
from tests.unit.socket_engine import Docker26, serving

CID = "c0ffee" * 10 + "abcd"
# What Docker 26.1.5 (runc 1.1.15) answered the fault suite, its words after "wai" as
# runc 1.1 writes them; runc 1.2 and later word the same failure otherwise.
HANDSHAKE = ("failed to create task for container: failed to create shim task: OCI runtime create "
             "failed: runc create failed: unable to start container process: waiting for init "
             "preliminary setup: read init-p: connection reset by peer: unknown")
# The image lacks the command: the image's failure, never started again.
NO_COMMAND = ("failed to create task for container: failed to create shim task: OCI runtime create "
              "failed: runc create failed: unable to start container process: exec: \"sleep\": "
              "executable file not found in $PATH: unknown")
HANDSHAKE_12 = ("failed to create task for container: failed to create shim task: OCI runtime create "
                "failed: runc create failed: unable to start container process: can't get final "
                "child's PID from pipe: EOF: unknown")
NOW = RetryPolicy(attempts=3, base_s=0)


class _Engine(Docker26):
    errors: list[str] = []  # the answer to each start, in order ("": it starts)
    starts = 0
    removed = 0

    def answer_get(self) -> bool:
        if self.path.endswith(f"/containers/{CID}/json"):
            self.send(200, json.dumps({"Id": CID, "Name": "/box", "State": {"Status": "created"},
                                       "Config": {"Tty": False}}).encode())
        elif "/containers/json" in self.path:  # the sweep's listing: nothing left
            self.send(200, b"[]")
        elif f"/containers/{CID}/logs" in self.path:  # one stdout frame (non-tty stream)
            out = b"inventory\n" if "stdout=1" in self.path else b""
            self.send(200, struct.pack(">BxxxL", 1, len(out)) + out if out else b"")
        else:
            return False
        return True

    def do_DELETE(self) -> None:
        type(self).removed += 1
        self.send(204, b"")

    def do_POST(self) -> None:
        if self.path.split("?")[0].endswith("/containers/create"):
            self.rfile.read(int(self.headers["Content-Length"]))
            return self.send(201, json.dumps({"Id": CID, "Warnings": []}).encode())
        if self.path.endswith(f"/containers/{CID}/wait"):
            return self.send(200, json.dumps({"StatusCode": 0}).encode())
        if not self.path.endswith(f"/containers/{CID}/start"):
            return self.send(404, json.dumps({"message": "no such route"}).encode())
        n = type(self).starts
        type(self).starts += 1
        error = self.errors[n] if n < len(self.errors) else ""
        if error:
            return self.send(500, json.dumps({"message": error}).encode())
        self.send_response(204)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True


@pytest.fixture
def client(tmp_path, monkeypatch):
    _Engine.starts = _Engine.removed = 0
    with serving(_Engine, tmp_path, monkeypatch):
        client = docker.from_env()
        try:
            yield client
        finally:
            client.close()


@pytest.fixture
def box(client):
    return client.containers.get(CID)


# Create refusals of the image's own making: a directory where the engine mounts a file.
RESOLV_DIR = ("failed to create task for container: failed to create shim task: OCI runtime create "
              "failed: runc create failed: unable to start container process: error during container "
              "init: error mounting \"/var/lib/docker/containers/abc/resolv.conf\" to rootfs at "
              "\"/etc/resolv.conf\": not a directory: unknown")


def test_runcs_handshake_words_are_the_engines_not_the_images():
    assert suitecases.runtime_refused(HANDSHAKE)
    assert not suitecases.runtime_refused(NO_COMMAND)
    assert not suitecases.runtime_refused(RESOLV_DIR)
    assert not suitecases.runtime_refused("Conflict. The container name is already in use")


@pytest.mark.parametrize("words", [HANDSHAKE, HANDSHAKE_12])
def test_a_start_runc_could_not_make_is_made_again(box, words):
    _Engine.errors = [words, words]
    containers.start(box, NOW)
    assert _Engine.starts == 3


def test_three_refusals_raise_the_engines_answer(box):
    _Engine.errors = [HANDSHAKE] * 3
    with pytest.raises(docker.errors.APIError, match="waiting for init preliminary setup"):
        containers.start(box, NOW)
    assert _Engine.starts == 3


@pytest.mark.parametrize("words", [NO_COMMAND, RESOLV_DIR, "driver failed programming external connectivity"])
def test_another_refusal_is_raised_at_once(box, words):
    _Engine.errors = [words, ""]
    with pytest.raises(docker.errors.APIError):
        containers.start(box, NOW)
    assert _Engine.starts == 1


def test_the_default_policy_waits_between_tries():
    assert containers.START_AGAIN.attempts == 3
    assert containers.START_AGAIN.delays() == [1.0, 2.0]


def test_run_once_starts_its_container_through_start(client):
    """The inventory's and freeze's short runs get the same retry."""
    _Engine.errors = [HANDSHAKE]
    out = containers.run_once(client, "six:runtime", ["true"], "inventory")
    assert (out, _Engine.starts, _Engine.removed) == (b"inventory\n", 2, 1)


def test_run_once_says_the_engines_words_when_it_cannot_start(client, monkeypatch):
    monkeypatch.setattr(containers, "START_AGAIN", NOW)
    _Engine.errors = [HANDSHAKE] * 3
    with pytest.raises(BuildError, match=r"^the inventory container of six:runtime could not start: .*"
                                         r"waiting for init preliminary setup"):
        containers.run_once(client, "six:runtime", ["true"], "inventory")
    assert (_Engine.starts, _Engine.removed) == (3, 1)
