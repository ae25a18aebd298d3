"""``imagetransfer.load_image`` (the base cache's archive) past an interrupted load's
``index.json`` (stagecraft/staleingest.py): the engine is a stand-in at the lowest level,
an HTTP server on a Unix socket answering ``POST /images/load`` as Docker 26.1.5 did after
a ``tar-index.json`` ingest was left (HTTP 500 with containerd's words), then loading."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from stagecraft import imagetransfer, staleingest
from stagecraft.engine import Engine
from stagecraft.errors import BuildError
from tests.unit.socket_engine import Docker26, serving

INDEX = b'{"schemaVersion":2,"manifests":[]}'
INDEX_DIGEST = "sha256:" + hashlib.sha256(INDEX).hexdigest()


class _Engine(Docker26):
    errors: list[str] = []  # the answer to each load, in order ("": it loads)
    loads: list[int] = []  # the bytes of each load's body

    def answer_get(self) -> bool:
        if self.path.endswith("/images/six:base/json"):  # the SDK looks up what it loaded
            self.send(200, json.dumps({"Id": "sha256:" + "ef" * 32}).encode())
            return True
        return False

    def do_POST(self) -> None:
        if "/images/load" not in self.path:
            return self.send(404, b"{}")
        body = self.rfile.read(int(self.headers["Content-Length"]))
        n = len(self.loads)
        self.loads.append(len(body))
        error = self.errors[n] if n < len(self.errors) else ""
        if error:
            return self.send(500, json.dumps({"message": error}).encode())
        self.send(200, json.dumps({"stream": "Loaded image: six:base\n"}).encode())


@pytest.fixture
def engine(tmp_path, monkeypatch):
    _Engine.loads = []
    with serving(_Engine, tmp_path, monkeypatch):
        yield _Engine


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "saved.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", INDEX)):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


FLUSH = len(staleingest.flush_tar())


@pytest.mark.parametrize("words", [
    f"content digest {INDEX_DIGEST}: not found",
    'failed to ingest "./index.json": unable to resume write to tar-index.json: unable to discard to offset'])
def test_a_load_that_met_an_interrupted_index_is_made_again_after_the_flush(engine, archive, words):
    engine.errors = [words, "unrecognized image format"]
    imagetransfer.load_image(Engine(), archive)
    size = archive.stat().st_size
    assert engine.loads == [size, FLUSH, size]


def test_another_blob_not_found_fails_at_once(engine, archive):
    engine.errors = [f"content digest sha256:{'1' * 64}: not found"]
    with pytest.raises(BuildError, match=r"^cannot load .*saved\.tar: .*sha256:1{64}: not found"):
        imagetransfer.load_image(Engine(), archive)
    assert len(engine.loads) == 1


def test_refused_again_after_the_flush_says_the_engines_words(engine, archive):
    words = f"content digest {INDEX_DIGEST}: not found"
    engine.errors = [words, "unrecognized image format", words]
    with pytest.raises(BuildError, match=r"^cannot load .*saved\.tar: .*: not found"):
        imagetransfer.load_image(Engine(), archive)
    assert len(engine.loads) == 3


def test_each_leftover_costs_one_load_more_at_most(engine, archive):
    """A helper's review: the snapshot directory met again after the flush is not a third
    try (the load path does the same, ``layoutload``)."""
    stale = ("failed to unpack loaded image: failed to rename: rename /r/snapshots/new-1 /r/snapshots/9: "
             "file exists: unknown")
    engine.errors = [stale, f"content digest {INDEX_DIGEST}: not found", "unrecognized image format", stale]
    with pytest.raises(BuildError, match="file exists"):
        imagetransfer.load_image(Engine(), archive)
    size = archive.stat().st_size
    assert engine.loads == [size, size, FLUSH, size]


def test_an_archive_that_cannot_be_read_is_a_build_error(engine, tmp_path):
    with pytest.raises(BuildError, match=r"^cannot load .*: Is a directory$"):
        imagetransfer.load_image(Engine(), tmp_path)
    assert engine.loads == []
