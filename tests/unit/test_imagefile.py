"""image.json's build-time twin (entrypoint/imagefile.py): used only when it holds the
very bytes of image.json, and every other case falls back to json with the same checks."""

from __future__ import annotations

import json
import marshal
import os
import shutil
from pathlib import Path

import pytest

from entrypoint import imagefile
from entrypoint.main import MAX_IMAGE_JSON, load_image
from tests.fixtures.compose import IMAGES


@pytest.fixture
def image(tmp_path) -> Path:
    return Path(shutil.copy(IMAGES / "gpu-cuda11.8.json", tmp_path / "image.json"))


def _load(path: Path) -> dict | None:
    return load_image({"STAGECRAFT_IMAGE_JSON": str(path)}, "/")


def test_the_twin_gives_what_json_gives(image):
    want = _load(image)
    twin = Path(imagefile.write_twin(str(image)))
    assert twin == image.with_name("image.json.marshal") and oct(twin.stat().st_mode & 0o777) == "0o644"
    assert imagefile.from_twin(str(image), image.read_bytes(), MAX_IMAGE_JSON) == want
    assert _load(image) == want


def test_the_twin_is_what_load_reads_when_its_bytes_match(image):
    """A twin whose bytes match wins (it is read, not json): shown with a twin whose
    parse differs from the file's, which only a test would make."""
    raw = image.read_bytes()
    doc = json.loads(raw)
    doc["kernel_sets"] = doc["kernel_sets"][:1]
    Path(imagefile.twin_path(str(image))).write_bytes(marshal.dumps((raw, doc)))
    assert _load(image)["kernel_sets"] == doc["kernel_sets"]


@pytest.mark.parametrize("twin", [
    b"",  # empty
    b"\x00garbage",  # not marshal
    marshal.dumps(("not bytes", {})),
    marshal.dumps((b"other bytes", {"kernel_sets": []})),  # image.json edited after the build
    marshal.dumps([b"x", {}]),  # a list, not the pair
])
def test_a_twin_that_does_not_match_falls_back_to_json(image, twin):
    want = _load(image)
    Path(imagefile.twin_path(str(image))).write_bytes(twin)
    assert _load(image) == want


def test_a_twin_of_a_broken_shape_is_still_checked(image):
    """The twin skips the parse, not the checks: a twin of a kernel_sets that is not a
    list is refused as the same JSON would be."""
    raw = image.read_bytes()
    Path(imagefile.twin_path(str(image))).write_bytes(marshal.dumps((raw, {"kernel_sets": "x"})))
    with pytest.raises(ValueError, match="kernel_sets list"):
        _load(image)


def test_an_oversized_or_special_twin_is_not_read(image, tmp_path):
    want = _load(image)
    twin = Path(imagefile.twin_path(str(image)))
    twin.write_bytes(b"\x00" * (4 * MAX_IMAGE_JSON + 10))
    assert _load(image) == want
    twin.unlink()
    os.mkfifo(twin)  # a FIFO holds no start
    assert _load(image) == want


def test_write_twin_refuses_a_broken_image_json(tmp_path):
    bad = tmp_path / "image.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        imagefile.write_twin(str(bad))
    bad.write_text("{")
    with pytest.raises(ValueError):
        imagefile.write_twin(str(bad))
    assert not Path(imagefile.twin_path(str(bad))).exists()


@pytest.mark.parametrize("data", [
    "shared",  # one list reached twice: marshal can share, json cannot
    {"kernel_sets": [], "components": {1: "x"}},  # a key json never makes
    {"kernel_sets": [], "components": (1, 2)},  # a tuple
    {"kernel_sets": [], "components": b"bytes"},
    "deep",
])
def test_a_twin_that_json_could_not_have_made_falls_back(image, data):
    raw = image.read_bytes()
    want = _load(image)
    if data == "shared":
        node: list = ["x"]
        for _ in range(40):
            node = [node, node]  # 2**40 paths: the report writer would never end
        data = {**json.loads(raw), "components": node}
    elif data == "deep":
        deep: dict = {}
        node2 = deep
        for _ in range(imagefile.MAX_DEPTH + 1):
            node2["c"] = {}
            node2 = node2["c"]
        data = {**json.loads(raw), "components": deep}
    Path(imagefile.twin_path(str(image))).write_bytes(marshal.dumps((raw, data)))
    assert _load(image) == want
