"""Unit-test settings. (tests/conftest.py is loaded by `build.py test` too, so what only
the unit tests need lives here.)"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import settings

# Budgets of the property-based tests (tests/unit/test_fuzz.py and others): `ci` by
# default (the fuzzer's share of `make test` is about half a minute); `long` for
# `make fuzz` (--hypothesis-profile=long; FUZZ_EXAMPLES examples per test). The deadline
# catches a hang, not slowness: one example of these tests takes milliseconds.
settings.register_profile("ci", max_examples=250, deadline=timedelta(seconds=30))
settings.register_profile("long", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30000")),
                          deadline=timedelta(seconds=30))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
