"""The one retry mechanism: tenacity (https://tenacity.readthedocs.io), behind two calls.

``call(fn, policy, retry_if, on_retry)`` calls ``fn`` until it returns, retrying the
exceptions ``retry_if`` accepts with the policy's exponential backoff, and says each
retry through ``on_retry``; ``poll(fn, tries, interval_s)`` asks ``fn`` until it answers
something truthy. Publishing (transient registry errors), the builder (transient engine
errors), the image transfers (an image the store lists a moment after a pull) and
``stalesnapshot`` (one request more) use them; a test passes ``sleep`` to see the delays
without waiting them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity

T = TypeVar("T")

Sleep = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` in all (1 = no retry); the delay before retry n (1-based) is
    ``min(base_s * factor ** (n - 1), max_s)`` seconds (``base_s`` 0: at once)."""

    attempts: int = 4
    base_s: float = 1.0
    factor: float = 2.0
    max_s: float = 30.0

    def delays(self) -> list[float]:
        """Seconds slept before each retry, in order (``attempts - 1`` of them)."""
        return [min(self.base_s * self.factor ** i, self.max_s) for i in range(self.attempts - 1)]

    def wait(self) -> tenacity.wait.wait_base:
        """The policy as a tenacity wait: the delays of ``delays()``, one per retry."""
        return tenacity.wait_exponential(multiplier=self.base_s, exp_base=self.factor,
                                         max=self.max_s)


def call(fn: Callable[[], T], policy: RetryPolicy, retry_if: Callable[[BaseException], bool],
         on_retry: Callable[[BaseException, int, float], None] | None = None,
         sleep: Sleep = time.sleep) -> tuple[T, int]:
    """``(fn's result, attempts used)``. An exception ``retry_if`` accepts is retried
    after the policy's delay, ``on_retry(exception, attempt that failed, delay in s)``
    called first; any other exception, or an accepted one on the last attempt, is raised
    as ``fn`` raised it, and so is a ``KeyboardInterrupt`` or ``SystemExit`` whatever
    ``retry_if`` says. ``policy.attempts`` below 1 counts as 1."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            delay = state.next_action.sleep if state.next_action else 0.0
            on_retry(state.outcome.exception(), state.attempt_number, delay)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(policy.attempts, 1)), wait=policy.wait(),
        # Only errors: a KeyboardInterrupt or SystemExit (Ctrl-C, SIGTERM) always stops.
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, Exception) and retry_if(e)),
        before_sleep=before_sleep,
        sleep=sleep, reraise=True)
    result = retrying(fn)
    return result, int(retrying.statistics.get("attempt_number", 1))


def poll(fn: Callable[[], T], tries: int, interval_s: float,
         sleep: Sleep = time.sleep) -> T | None:
    """The first truthy answer of ``fn`` in ``tries`` asks ``interval_s`` seconds apart,
    or None when every answer was falsy. Exceptions of ``fn`` are raised at once."""

    def none(_state: tenacity.RetryCallState) -> Any:
        return None

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(tries, 1)), wait=tenacity.wait_fixed(interval_s),
        retry=tenacity.retry_if_result(lambda answer: not answer), sleep=sleep,
        retry_error_callback=none)
    return retrying(fn)
