"""probes.budget.call_within: the value, the error, or BudgetExceeded at the budget, for a
call that returns, raises, or never returns (a worker blocked on a lock no one frees,
as a hung NVML call or vendor library is)."""
from __future__ import annotations

import _thread
import math
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.budget import BudgetExceeded, call_within


def test_value_and_error_come_back() -> None:
    assert call_within(lambda: 42, 5.0) == 42
    with pytest.raises(ZeroDivisionError):
        call_within(lambda: 1 // 0, 5.0)
    with pytest.raises(KeyboardInterrupt):  # even what is not an Exception reaches the caller
        call_within(lambda: (_ for _ in ()).throw(KeyboardInterrupt), 5.0)


@pytest.mark.parametrize("budget", [0.2, 0.0, -1.0, math.nan])
def test_a_call_that_never_returns_is_given_up_at_the_budget(budget: float) -> None:
    held = _thread.allocate_lock()
    held.acquire()  # never released while the test waits: the worker hangs
    t0 = time.monotonic()
    with pytest.raises(BudgetExceeded, match="NVML did not answer"):
        call_within(held.acquire, budget, "NVML")
    waited = time.monotonic() - t0
    held.release()  # lets the abandoned worker end
    limit = budget if budget > 0 else 0.0  # 0, negative and NaN: given up at once
    assert limit <= waited < limit + 2.0


def test_a_huge_budget_is_clamped_not_an_error() -> None:
    assert call_within(lambda: "ok", 1e300) == "ok"
