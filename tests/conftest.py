"""Shared test helpers: the project root, and a scratch project whose matrix a test
writes while templates, suites and copied paths are the real ones (copied or linked)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path):
    """Returns ``write(matrix_text) -> Path``: a matrix.yaml in a scratch project dir
    with copies of the real templates/ (tests may add templates), entrypoint/ and probes/
    (copied paths must be real files, no links out of the project) and a link to the
    real tests/."""
    import shutil

    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("templates", "entrypoint", "probes"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=caches)
    (tmp_path / "tests").symlink_to(ROOT / "tests")

    def write(text: str) -> Path:
        path = tmp_path / "matrix.yaml"
        path.write_text(text)
        return path

    return write
