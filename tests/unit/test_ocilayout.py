"""One image out of BuildKit's OCI layout (stagecraft.ocilayout), on the layout BuildKit
0.13 wrote for a build with provenance (tests/fixtures/oci/buildkit-provenance)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

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
