"""One image out of BuildKit's OCI layout (stagecraft.ocilayout), on the layout BuildKit
0.13 wrote for a build with provenance (tests/fixtures/oci/buildkit-provenance)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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
