"""Shared test helpers: the project root, and a scratch project whose matrix a test
writes while templates, suites and copied paths are the real ones (symlinked)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import settings

# Budgets of the property-based tests (tests/unit/test_fuzz.py and others): `ci` by
# default (the fuzzer's share of `make test` is about half a minute); `long` for
# `make fuzz` (--hypothesis-profile=long; FUZZ_EXAMPLES examples per test). The deadline
# catches a hang, not slowness: one example of these tests takes milliseconds.
settings.register_profile("ci", max_examples=250, deadline=timedelta(seconds=30))
settings.register_profile("long", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30000")),
                          deadline=timedelta(seconds=30))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

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
