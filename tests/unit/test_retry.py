"""The one retry mechanism (stagecraft/retry.py, tenacity) and the policies its three
users give it: publishing, the builder's engine errors, the engine's poll after a pull.
No test sleeps: each passes ``sleep`` and reads the delays it was asked for."""

from __future__ import annotations

import pytest

from stagecraft import retry
from stagecraft.errors import BuildError
from stagecraft.retry import RetryPolicy
from stagecraft.stagebuild import (
    ENGINE_RETRY,
    TRANSIENT_TRIES,
    CacheCostBuild,
    transient_engine_error,
)


class Flaky:
    """Raises ``errors`` in order, then returns ``"done"``; counts its calls."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def _retry_value_errors(exc: BaseException) -> bool:
    return isinstance(exc, ValueError)


def test_retries_follow_the_policy_delays_and_say_each_one():
    slept, said = [], []
    fn = Flaky(ValueError("a"), ValueError("b"), ValueError("c"))
    policy = RetryPolicy(attempts=5, base_s=1, factor=2, max_s=3)
    result, attempts = retry.call(fn, policy, _retry_value_errors,
                                  lambda e, n, d: said.append((str(e), n, d)), slept.append)
    assert (result, attempts, fn.calls) == ("done", 4, 4)
    assert slept == [1, 2, 3] == policy.delays()[:3]
    assert said == [("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]


def test_an_error_not_to_retry_is_raised_at_once():
    slept = []
    fn = Flaky(KeyError("no"), ValueError("later"))
    with pytest.raises(KeyError):
        retry.call(fn, RetryPolicy(attempts=4), _retry_value_errors, None, slept.append)
    assert fn.calls == 1 and slept == []


def test_the_last_error_is_raised_as_it_was_when_attempts_run_out():
    slept = []
    fn = Flaky(*(ValueError(str(i)) for i in range(5)))
    with pytest.raises(ValueError, match="^2$"):
        retry.call(fn, RetryPolicy(attempts=3, base_s=0.5), _retry_value_errors, None,
                   slept.append)
    assert fn.calls == 3 and slept == [0.5, 1.0]


@pytest.mark.parametrize("attempts", [1, 0, -2])
def test_one_attempt_or_fewer_means_no_retry(attempts):
    fn = Flaky(ValueError("x"))
    with pytest.raises(ValueError):
        retry.call(fn, RetryPolicy(attempts=attempts), _retry_value_errors, None,
                   lambda s: pytest.fail("slept"))
    assert fn.calls == 1


def test_keyboard_interrupt_is_never_retried():
    fn = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        retry.call(fn, RetryPolicy(attempts=4), lambda e: True, None, lambda s: None)
    assert fn.calls == 1


def test_delays_grow_and_cap_as_before():
    assert RetryPolicy(attempts=5, base_s=1, factor=2, max_s=5).delays() == [1, 2, 4, 5]
    assert RetryPolicy(attempts=1).delays() == []
    assert ENGINE_RETRY.delays() == [0, 0] and ENGINE_RETRY.attempts == TRANSIENT_TRIES


# The poll.

def test_poll_returns_the_first_truthy_answer():
    answers, slept = iter([None, "", "sha256:abc", "later"]), []
    assert retry.poll(lambda: next(answers), tries=10, interval_s=0.5,
                      sleep=slept.append) == "sha256:abc"
    assert slept == [0.5, 0.5]


def test_poll_gives_none_after_its_tries_without_sleeping_after_the_last():
    calls, slept = [], []
    assert retry.poll(lambda: calls.append(1), tries=4, interval_s=0.25,
                      sleep=slept.append) is None
    assert len(calls) == 4 and slept == [0.25] * 3


def test_poll_raises_an_error_of_the_question_at_once():
    calls = []

    def ask():
        calls.append(1)
        raise OSError("engine gone")

    with pytest.raises(OSError, match="engine gone"):
        retry.poll(ask, tries=5, interval_s=1, sleep=lambda s: pytest.fail("slept"))
    assert len(calls) == 1


# The builder's policy: which engine errors are built again.

GRPC_EOF = "rpc error: code = Unavailable desc = error reading from server: EOF"


@pytest.mark.parametrize("exc, again", [
    (BuildError(f"stage x failed: {GRPC_EOF}"), True),
    (BuildError("rpc error: code = Internal desc = transport: received unexpected EOF"), True),
    (BuildError("RUN pip install: exit code 1"), False),
    (CacheCostBuild(f"stage x failed: {GRPC_EOF}", "cache export: 500"), False),
    (RuntimeError(GRPC_EOF), False),
])
def test_which_build_errors_are_transient(exc, again):
    assert transient_engine_error(exc) is again


def test_a_transient_engine_error_is_built_again_up_to_three_times_at_once():
    slept, said = [], []
    fn = Flaky(BuildError(GRPC_EOF), BuildError(GRPC_EOF), BuildError(GRPC_EOF))
    with pytest.raises(BuildError, match="Unavailable"):
        retry.call(fn, ENGINE_RETRY, transient_engine_error, lambda e, n, d: said.append(n),
                   slept.append)
    assert fn.calls == TRANSIENT_TRIES and slept == [0, 0] and said == [1, 2]
    fn = Flaky(BuildError(GRPC_EOF), CacheCostBuild("failed", "cache import: 404"))
    with pytest.raises(CacheCostBuild):
        retry.call(fn, ENGINE_RETRY, transient_engine_error, None, slept.append)
    assert fn.calls == 2
