"""Unit-test settings. (tests/conftest.py is loaded by `build.py test` too, so what only
the unit tests need lives here.)"""

from __future__ import annotations

import os
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
