"""An interrupted load's ``index.json`` (stagecraft.staleingest): containerd's words for
it found exactly, the tar that consumes it, and ``load_layout`` loading past it through a
stand-in docker CLI (the engine's side: tests/integration/test_faults.py)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from stagecraft import staleingest, stalesnapshot
from stagecraft.buildpath import Builder
from stagecraft.errors import BuildError
from stagecraft.layoutload import load_layout

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "oci" / "buildkit-provenance"
D = "sha256:" + "9343223a643cbab4e70d7a6ba5884abf77a587965680206c6aee8990de35ca55"
# Docker 26.1.5 (containerd 1.7.24), each after a tar-index.json ingest was left.
SAME_SIZE = f"content digest {D}: not found"
LONGER_FIRST = ('failed to ingest "./index.json": failed commit on ref "tar-index.json": commit failed: '
                'unexpected commit size 3000, expected 424: failed precondition')
LONGER_THEN = 'failed to ingest "./index.json": unable to resume write to tar-index.json: unable to discard to offset'


def test_the_refusals_are_found_and_only_for_the_index_sent():
    assert staleingest.met(SAME_SIZE, D)
    assert not staleingest.met(SAME_SIZE, "sha256:" + "0" * 64)  # a blob the engine lacks: not this
    assert not staleingest.met(SAME_SIZE, None)
    assert staleingest.met(LONGER_FIRST, None) and staleingest.met(LONGER_THEN, D)
    assert not staleingest.met('failed to ingest "blobs/sha256/ab": unexpected EOF', D)
    assert not staleingest.met("Error processing tar file(exit status 1): no space left on device", D)


def test_the_flush_tar_is_one_index_of_spaces():
    with tarfile.open(fileobj=io.BytesIO(staleingest.flush_tar())) as tar:
        [member] = tar.getmembers()
        assert member.name == "index.json" and member.size == staleingest.FLUSH_BYTES
        data = tar.extractfile(member).read()
    assert data == b" " * staleingest.FLUSH_BYTES


def test_the_digests_of_an_index_file_and_an_archives_index(tmp_path):
    index = b'{"schemaVersion": 2, "manifests": []}'
    (tmp_path / "index.json").write_bytes(index)
    want = "sha256:" + hashlib.sha256(index).hexdigest()
    assert staleingest.file_digest(tmp_path / "index.json") == want
    assert staleingest.file_digest(tmp_path / "missing.json") is None
    with tarfile.open(tmp_path / "saved.tar", "w") as tar:
        tar.add(tmp_path / "index.json", arcname="blobs/sha256/" + "a" * 64)
        tar.add(tmp_path / "index.json", arcname="./index.json")
    assert staleingest.archive_index_digest(tmp_path / "saved.tar") == want
    with tarfile.open(tmp_path / "none.tar", "w") as tar:
        tar.add(tmp_path / "index.json", arcname="manifest.json")
    assert staleingest.archive_index_digest(tmp_path / "none.tar") is None
    (tmp_path / "big.json").write_bytes(b" " * (staleingest.MAX_INDEX + 1))
    assert staleingest.file_digest(tmp_path / "big.json") is None
    (tmp_path / "junk.tar").write_bytes(b"not a tar" * 100)
    assert staleingest.archive_index_digest(tmp_path / "junk.tar") is None


@pytest.fixture
def layout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "layout"))


def _client(tmp_path: Path, words: list[str]) -> Builder:
    """A docker CLI stand-in for ``docker load``: each call's stream size goes to ``calls``;
    the n-th call says ``words[n]`` and exits 1 while there is one, with ``{index}`` replaced
    by the digest of the index.json in the stream; then it loads (exit 0)."""
    client = tmp_path / "docker"
    (tmp_path / "words.json").write_text(json.dumps(words))
    client.write_text(f"""#!/usr/bin/env python3
import hashlib, io, json, sys, tarfile
from pathlib import Path
calls = Path({str(tmp_path / "calls")!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
data = sys.stdin.buffer.read()
with open(calls, "a") as f:
    f.write(f"{{len(data)}}\\n")
index = ""
with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    for m in tar:
        if m.name.removeprefix("./") == "index.json":
            index = "sha256:" + hashlib.sha256(tar.extractfile(m).read()).hexdigest()
words = json.loads(Path({str(tmp_path / "words.json")!r}).read_text())
if n < len(words):
    print(words[n].replace("{{index}}", index))
    sys.exit(1)
print("Loaded image: rt:prov")
""")
    client.chmod(0o755)
    return Builder(str(client), ("build",), (), "stand-in")


def _calls(tmp_path: Path) -> list[int]:
    return [int(n) for n in (tmp_path / "calls").read_text().split()]


FLUSH = len(staleingest.flush_tar())
NOT_FOUND = "content digest {index}: not found"


@pytest.mark.parametrize("words", [NOT_FOUND, LONGER_FIRST, LONGER_THEN])
def test_a_load_that_met_an_interrupted_index_is_made_again_after_the_flush(layout, tmp_path, words):
    b = _client(tmp_path, [words, "unrecognized image format"])
    load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    first, flush, second = _calls(tmp_path)
    assert flush == FLUSH and first == second > 0  # the whole layout, both times
    log = (tmp_path / "load.log").read_text()
    assert f"# stagecraft: {staleingest.WHY}" in log and log.count(" load\n") == 2
    assert "unrecognized image format" in log  # the flush's own refusal, kept in the log


def test_another_blob_not_found_is_not_made_again(layout, tmp_path):
    b = _client(tmp_path, [f"content digest sha256:{'1' * 64}: not found"])
    with pytest.raises(BuildError, match=r"^loading the built image failed .*content digest sha256:1{64}: not found"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    assert len(_calls(tmp_path)) == 1


def test_refused_again_after_the_flush_the_load_fails(layout, tmp_path):
    b = _client(tmp_path, [LONGER_THEN, "unrecognized image format", LONGER_THEN])
    with pytest.raises(BuildError, match="unable to discard to offset"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    assert len(_calls(tmp_path)) == 3


def test_after_a_stop_no_flush_and_no_second_load(layout, tmp_path):
    b = _client(tmp_path, [NOT_FOUND])
    with pytest.raises(BuildError, match="not found"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref, stopped=lambda: True)
    assert len(_calls(tmp_path)) == 1


def test_a_stop_during_the_flush_ends_it_there(layout, tmp_path):
    stops = iter([False, True])
    b = _client(tmp_path, [NOT_FOUND, "unrecognized image format"])
    with pytest.raises(BuildError, match="not found"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref, stopped=lambda: next(stops))
    assert _calls(tmp_path)[1:] == [FLUSH]


def test_both_leftovers_met_in_one_load_each_cost_one_more(layout, tmp_path):
    stale = ("failed to unpack loaded image: failed to rename: rename /r/snapshots/new-1 /r/snapshots/9: "
             "file exists: unknown")
    b = _client(tmp_path, [stale, NOT_FOUND, "unrecognized image format"])
    load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    assert len(_calls(tmp_path)) == 4
    log = (tmp_path / "load.log").read_text()
    assert f"# stagecraft: {stalesnapshot.WHY}" in log and f"# stagecraft: {staleingest.WHY}" in log
