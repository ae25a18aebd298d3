"""Run a call under a wall-clock budget in a worker thread (NVML and vendor tools can hang;
every probe, the CPU's included, runs this way).

Built on the interpreter's own ``_thread`` (a lock and ``start_new_thread``) rather than
``threading``: on the entrypoint's start path the ``threading`` module cost 0.6 ms to
import and a ``threading.Thread`` 72 us to start and join against 55 us for a raw thread
(bench/startup.py, issue 22's regression check), for the same guarantee: a worker that
never returns cannot keep the process alive (the interpreter never waits for raw threads
at exit, and ``os.execvp`` replaces the process along with them).
"""
from __future__ import annotations

import _thread

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")


class BudgetExceeded(Exception):
    """The call did not finish within its budget; it may still be running."""


def call_within(fn: Callable[[], T], budget_s: float, name: str = "probe") -> T:
    """Return ``fn()``, re-raise its exception, or raise BudgetExceeded after ``budget_s``
    seconds (wall clock; 0, less or NaN: the call must already be done when checked,
    so in practice it is given up at once). ``name`` is the call's name in the error message.
    Never waits past the budget for a call that does not return; the abandoned worker
    keeps running until it returns or the process ends.

    ``fn`` must not be the first to import ``threading`` (nor pynvml or subprocess, which
    import it): before Python 3.13 the thread that imports it first becomes its main
    thread, and at exit the interpreter waits for that thread, so a hung worker held the
    process (review s30: the health check ran 30 s past a 0.5 s budget). Import them
    before the call, as probes.nvidia and entrypoint.health do. (probes.fsread.run_tool
    imports subprocess in a probe's worker; its tool is killed at the budget, so that
    worker returns.)"""
    box: dict[str, object] = {}
    done = _thread.allocate_lock()
    done.acquire()

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.release()

    _thread.start_new_thread(work, ())
    limit = min(budget_s, _thread.TIMEOUT_MAX) if budget_s > 0 else 0.0  # NaN: 0
    if not done.acquire(timeout=limit):
        raise BudgetExceeded(f"{name} did not answer within {budget_s:.1f} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
