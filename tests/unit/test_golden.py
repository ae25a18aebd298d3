"""Golden files: the rendered multi-stage Dockerfile of every tag of matrix.yaml.

A change to a template or the matrix shows up here as a diff to review. Regenerate with
`make golden` (STAGECRAFT_UPDATE_GOLDEN=1). Rendered with a fixed revision and time.
"""

from __future__ import annotations

import os

import pytest

from stagecraft.bases import base_image
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.plan import full_dockerfile
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = expand(MATRIX)
UPDATE = os.environ.get("STAGECRAFT_UPDATE_GOLDEN") == "1"


# One golden file per (tag, platform): TAG.Dockerfile for linux/amd64 (also the platform of
# a group that declares none), TAG@linux-arm64.Dockerfile for each other declared one.
CASES = [(s, p) for s in SPECS for p in (s.platforms or ("linux/amd64",))]


def golden_name(tag: str, platform: str) -> str:
    return f"{tag}.Dockerfile" if platform == "linux/amd64" else f"{tag}@{platform.replace('/', '-')}.Dockerfile"


def rendered(spec, platform: str = "linux/amd64") -> str:
    base = base_image(spec.base, "pull" if "pull" in spec.base else None, platform)
    return full_dockerfile(MATRIX, spec, base, "0" * 40, "1970-01-01T00:00:00Z")


@pytest.mark.parametrize(("spec", "platform"), CASES, ids=[f"{s.tag}@{p}" for s, p in CASES])
def test_rendered_dockerfile_matches_golden(spec, platform):
    path = GOLDEN / golden_name(spec.tag, platform)
    text = rendered(spec, platform)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file for {spec.tag}: run `make golden`"
    assert text == path.read_text(), f"{spec.tag}: rendering changed; review and run `make golden`"


def test_no_stale_golden_files():
    expected = {golden_name(s.tag, p) for s, p in CASES}
    present = {p.name for p in GOLDEN.glob("*.Dockerfile")}
    if UPDATE:  # `make golden` removes the files of tags that left the matrix
        for name in present - expected:
            (GOLDEN / name).unlink()
        present &= expected
    assert present <= expected, f"golden files for tags no longer in the matrix: {present - expected}"
