"""Unit-test settings. (tests/conftest.py is loaded by `build.py test` too, so what only
the unit tests need lives here.)"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import settings

from tests.nvml_standin import standin

# Budgets of the property-based tests (tests/unit/test_fuzz.py and others): `ci` by
# default (the fuzzer's share of `make test` is about half a minute); `long` for
# `make fuzz` (--hypothesis-profile=long; FUZZ_EXAMPLES examples per test). The deadline
# catches a hang, not slowness: one example of these tests takes milliseconds.
settings.register_profile("ci", max_examples=250, deadline=timedelta(seconds=30))
settings.register_profile("long", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30000")),
                          deadline=timedelta(seconds=30))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in libnvidia-ml.so.1 (tests/nvml_standin), built once per run; the tests
    that need it skip, saying why, where no C compiler is found. (test_probe_units.py
    keeps its own: it preloads the library into this process.)"""
    try:
        return standin.build(tmp_path_factory.mktemp("nvml"))
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def real_project(tmp_path: Path) -> Path:
    """A copy of this project's real matrix, lock, templates and copied trees under
    ``tmp_path`` (its root), for tests that run the real CLI on a mutated matrix or lock."""
    root = Path(__file__).resolve().parents[2]
    for name in ("templates", "entrypoint", "probes", "tests/image"):
        shutil.copytree(root / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("matrix.yaml", "matrix.lock"):
        shutil.copy(root / name, tmp_path / name)
    return tmp_path
