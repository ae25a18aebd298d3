"""Shared test helpers: the project root, and a scratch project whose matrix a test
writes while templates, suites and copied paths are the real ones (symlinked)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path):
    """Returns ``write(matrix_text) -> Path``: a matrix.yaml in a scratch project dir
    that links the real templates/, tests/, entrypoint/ and probes/."""
    import shutil

    shutil.copytree(ROOT / "templates", tmp_path / "templates")  # tests may add templates
    for name in ("tests", "entrypoint", "probes"):
        (tmp_path / name).symlink_to(ROOT / name)

    def write(text: str) -> Path:
        path = tmp_path / "matrix.yaml"
        path.write_text(text)
        return path

    return write
