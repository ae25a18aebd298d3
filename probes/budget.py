"""Run a call under a wall-clock budget in a worker thread (for NVML, which can hang)."""
from __future__ import annotations

import threading

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")


class BudgetExceeded(Exception):
    """The call did not finish within its budget; it may still be running."""


def call_within(fn: Callable[[], T], budget_s: float, name: str = "probe") -> T:
    """Return ``fn()``, re-raise its exception, or raise BudgetExceeded after ``budget_s``
    seconds. The worker is a daemon thread: a hung call cannot keep the process alive, and
    ``os.execvp`` replaces the process along with it."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=work, name=f"stagecraft-{name}", daemon=True)
    t.start()
    t.join(max(budget_s, 0.0))
    if t.is_alive():
        raise BudgetExceeded(f"{name} did not answer within {budget_s:.1f} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
