"""A pull whose stream ended in the snapshotter's words for a directory the engine's
crash left (stagecraft/stalesnapshot.py) is made once more (``imagetransfer.pull_by_digest``:
the base cache's pull). The engine is a stand-in at the lowest level: an HTTP server on
a Unix socket answering as Docker 26 does, whose first pull stream ends in an error
event with the words Docker 26.1.5 gave for ``docker load``, the second in success."""

from __future__ import annotations

import json

import pytest

from stagecraft import imagetransfer
from stagecraft.engine import Engine
from stagecraft.errors import BuildError
from tests.unit.socket_engine import Docker26, serving

DIGEST = "sha256:" + "cd" * 32
IMAGE = "sha256:" + "ef" * 32
STALE = ("failed to prepare extraction snapshot \"extract-1 sha256:ab\": failed to rename: rename "
         "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/new-2832745750 "
         "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/998: file exists: unknown")


class _Engine(Docker26):
    errors: list[str] = []  # the error of each pull stream, in order ("": the pull completes)
    pulls: list[str] = []

    def answer_get(self) -> bool:
        if "/images/" in self.path and self.path.endswith("/json") and len(self.pulls) > len(self.errors):
            self.send(200, json.dumps({"Id": IMAGE}).encode())  # there once a pull completed
            return True
        return False

    def do_POST(self) -> None:
        if "/images/create" not in self.path:
            return self.send(404, b"{}")
        n = len(self.pulls)
        self.pulls.append(self.path)
        events = [{"status": "Pulling from six", "id": DIGEST[7:19]}]
        error = self.errors[n] if n < len(self.errors) else ""
        events.append({"errorDetail": {"message": error}, "error": error} if error else
                      {"status": f"Digest: {DIGEST}"})
        self.send_response(200)  # chunked, one event a chunk, as the engine streams it
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", "1.45")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for e in events:
            data = json.dumps(e).encode() + b"\r\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


@pytest.fixture
def engine(tmp_path, monkeypatch):
    _Engine.pulls = []
    with serving(_Engine, tmp_path, monkeypatch):
        yield _Engine


def test_a_pull_that_met_a_crashs_directory_is_made_once_more(engine):
    engine.errors = [STALE]
    assert imagetransfer.pull_by_digest(Engine(), "registry.test/six", DIGEST) == IMAGE
    assert len(engine.pulls) == 2


def test_refused_twice_the_pull_fails_with_the_engines_words(engine):
    engine.errors = [STALE, STALE]
    with pytest.raises(BuildError, match=r"^cannot pull registry\.test/six@sha256:cd.*file exists"):
        imagetransfer.pull_by_digest(Engine(), "registry.test/six", DIGEST)
    assert len(engine.pulls) == 2


def test_another_stream_error_is_not_made_again(engine):
    engine.errors = ["manifest unknown"]
    with pytest.raises(BuildError, match=r"^cannot pull registry\.test/six@sha256:(cd)+: manifest unknown$"):
        imagetransfer.pull_by_digest(Engine(), "registry.test/six", DIGEST)
    assert len(engine.pulls) == 1


def test_a_base_pull_by_reference_is_made_once_more(engine):
    """``imagetransfer.pull_ref`` (a base by its pinned reference): the SDK's ``images.pull`` reads
    past an error in the stream (review: no second pull, and the message was the lookup's
    404), so the stream is read here too."""
    engine.errors = [STALE]
    assert imagetransfer.pull_ref(Engine(), f"registry.test/six@{DIGEST}") == IMAGE
    assert len(engine.pulls) == 2


def test_a_base_pull_refused_twice_says_the_engines_words_and_what_to_do(engine):
    engine.errors = [STALE, STALE]
    with pytest.raises(BuildError, match=r"^cannot pull registry\.test/six@sha256:(cd)+: .*file exists: unknown; "
                       r"on a host without registry access use --base-source bootstrap$"):
        imagetransfer.pull_ref(Engine(), f"registry.test/six@{DIGEST}")
    assert len(engine.pulls) == 2
