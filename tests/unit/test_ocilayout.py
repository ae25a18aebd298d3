"""One image out of BuildKit's OCI layout (stagecraft.ocilayout), on the layout BuildKit
0.13 wrote for a build with provenance (tests/fixtures/oci/buildkit-provenance)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from stagecraft import stalesnapshot
from stagecraft.buildpath import Builder
from stagecraft.errors import BuildError
from stagecraft.layoutload import load_layout
from stagecraft.ocilayout import single_image

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "oci" / "buildkit-provenance"
IMAGE = "sha256:caab4bf0ba7409f78da428128ec76f9b57f3cbb895e4c791820ba8ded87a0558"


@pytest.fixture
def layout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "layout"))


def test_the_index_gives_way_to_its_image_and_the_provenance_is_read(layout):
    digest, statements = single_image(layout)
    assert digest == IMAGE
    [statement] = statements
    assert statement["predicateType"] == "https://slsa.dev/provenance/v0.2"
    assert statement["subject"][0]["digest"]["sha256"] == IMAGE.split(":")[1]
    [entry] = json.loads((layout / "index.json").read_text())["manifests"]
    assert entry["digest"] == IMAGE
    assert entry["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    # docker load names the image from these
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "docker.io/library/rt:prov"
    # A second look finds the image itself: nothing more to do, nothing attached.
    assert single_image(layout) == (IMAGE, [])


def test_a_layout_of_two_images_is_refused(layout):
    index = json.loads((layout / "index.json").read_text())
    index["manifests"] *= 2
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="names 2 manifests, not one"):
        single_image(layout)


def test_a_digest_that_is_not_a_blob_name_is_refused(layout):
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../etc/passwd"
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="not a sha256 digest"):
        single_image(layout)


def _stand_in_client(tmp_path: Path, words: str, rc: int) -> Builder:
    """A docker CLI stand-in for ``docker load``: reads the stream, says ``words``, exits ``rc``."""
    client = tmp_path / "docker"
    client.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{words}'\nexit {rc}\n")
    client.chmod(0o755)
    return Builder(str(client), ("build",), (), "stand-in")


@pytest.mark.parametrize("answers", [True, False])
def test_an_engine_gone_mid_load_is_named(layout, tmp_path, answers):
    """The engine killed while ``docker load`` streams the layout (fault suite, engine
    kind): the client's "error during connect" is the engine's going, and the message
    names the engine, not the load."""
    b = _stand_in_client(tmp_path, 'error during connect: Post "http://%2Fvar%2Frun%2Fdocker.sock/v1.47/'
                         'images/load?quiet=1": EOF', 1)
    with pytest.raises(BuildError, match=r"^the Docker engine stopped answering while the built image "
                       r"was loaded \(docker load said: error during connect"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: None, lambda: answers)


def test_a_load_refused_by_an_engine_that_answers_says_what_it_said(layout, tmp_path):
    b = _stand_in_client(tmp_path, "Error processing tar file(exit status 1): no space left on device", 1)
    with pytest.raises(BuildError, match=r"^loading the built image failed \(docker load exit 1, tar exit "
                       r"0: Error processing tar file.*no space left on device\)"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: None, lambda: True)


def test_a_silent_failed_load_on_a_gone_engine_says_nothing_was_said(layout, tmp_path):
    b = _stand_in_client(tmp_path, "", 1)
    with pytest.raises(BuildError, match=r"docker load said nothing\)"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: None, lambda: False)


def test_a_failed_tar_is_named_with_its_own_words(layout, tmp_path, monkeypatch):
    """tar of the layout fails (a read error) while docker load, fed a short stream,
    exits 0: the message is tar's, never docker load's success line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tar").write_text("#!/bin/sh\necho 'tar: ./blobs/sha256/x: Read error' >&2\nexit 2\n")
    (bin_dir / "tar").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    b = _stand_in_client(tmp_path, "Loaded image ID: sha256:caab4bf0", 0)
    with pytest.raises(BuildError, match=r"^reading the build's OCI layout failed \(tar exit 2: "
                       r"tar: ./blobs/sha256/x: Read error; docker load exit 0\)"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: None, lambda: True)
    assert "Read error" in (tmp_path / "load.log").read_text()


def _client_failing_first(tmp_path: Path, words: list[str]) -> Builder:
    """A ``docker load`` stand-in whose Nth call reads the stream, says ``words[N]`` and
    exits 1 (while there is one), then says it loaded the image and exits 0; each
    call's stream size goes to ``calls``."""
    client = tmp_path / "docker"
    (tmp_path / "words.json").write_text(json.dumps(words))
    client.write_text(f"""#!/usr/bin/env python3
import json, sys
from pathlib import Path
calls = Path({str(tmp_path / "calls")!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
size = len(sys.stdin.buffer.read())
with open(calls, "a") as f:
    f.write(f"{{size}}\\n")
words = json.loads(Path({str(tmp_path / "words.json")!r}).read_text())
if n < len(words):
    print(words[n])
    sys.exit(1)
print("Loaded image: rt:prov")
""")
    client.chmod(0o755)
    return Builder(str(client), ("build",), (), "stand-in")


STALE = ('failed to unpack loaded image: failed to prepare extraction snapshot "extract-822519334-eu-R '
         'sha256:6bf04b4ca5e70a575cd1fd380d26772778072538c389ae7a082a6211cec3ebe1": failed to rename: rename '
         '/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/new-2832745750 '
         '/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/998: file exists: unknown')


def test_a_load_that_met_a_crashs_snapshot_directory_is_made_once_more(layout, tmp_path):
    """Docker 26.1.5 (containerd 1.7.24) refused the first load after a directory was
    left at the next snapshot's id (stalesnapshot), then loaded: so does this."""
    b = _client_failing_first(tmp_path, [STALE])
    assert load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref) == IMAGE
    sizes = (tmp_path / "calls").read_text().split()
    assert len(sizes) == 2 and sizes[0] == sizes[1] != "0"  # the whole layout, both times
    log = (tmp_path / "load.log").read_text()
    assert log.count(" load\n") == 2 and STALE in log
    assert f"# stagecraft: {stalesnapshot.WHY}" in log


def test_refused_twice_the_load_fails_with_the_engines_words(layout, tmp_path):
    b = _client_failing_first(tmp_path, [STALE, STALE])
    with pytest.raises(BuildError, match=r"^loading the built image failed \(docker load exit 1, tar exit 0: "
                       r"failed to unpack.*file exists: unknown\)"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    assert len((tmp_path / "calls").read_text().split()) == 2


def test_a_load_that_failed_otherwise_is_not_made_again(layout, tmp_path):
    b = _client_failing_first(tmp_path, ["Error processing tar file(exit status 1): no space left on device"])
    with pytest.raises(BuildError, match="no space left on device"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref)
    assert len((tmp_path / "calls").read_text().split()) == 1


def test_after_a_stop_no_second_load(layout, tmp_path):
    """Ctrl-C or SIGTERM came while the first load ran (review): the load that met the
    directory is not made again, and the failure is the first load's."""
    b = _client_failing_first(tmp_path, [STALE])
    with pytest.raises(BuildError, match="file exists"):
        load_layout(b, layout, tmp_path / "load.log", None, lambda ref: ref, stopped=lambda: True)
    assert len((tmp_path / "calls").read_text().split()) == 1
