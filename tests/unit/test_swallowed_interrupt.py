"""A Ctrl-C or SIGTERM that a finalizer swallowed comes again (stagecraft/interrupts.py).

Found by the fault suite (seed 20261343, trial 30): a SIGINT 3.3 s into a build met
Python inside a ``__del__``; CPython printed "Exception ignored in ... KeyboardInterrupt"
and the build went on to exit 0. The child below is a real interpreter with a real
finalizer that a real signal meets (it sends the signal itself, then runs bytecode, so
the handler runs inside ``__del__``), with SIGTERM handled as build.py handles it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stagecraft import cli, interrupts

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import contextlib, json, os, signal, sys, time
from stagecraft import interrupts
signal.signal(signal.SIGTERM, interrupts.terminate)
sig = getattr(signal, sys.argv[2])
class Collected:
    def __del__(self):
        os.kill(os.getpid(), sig)
        for _ in range(10000):
            pass
outcome = "went on"
try:
    with interrupts.redelivered_interrupts() if sys.argv[1] == "hook" else contextlib.nullcontext():
        obj = Collected()
        del obj
        end = time.monotonic() + 5
        while time.monotonic() < end:
            time.sleep(0.001)
except KeyboardInterrupt as exc:
    outcome = type(exc).__name__
print(json.dumps(outcome))
"""


def _child(mode: str, sig: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, sig], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_without_the_hook_python_loses_the_signal(sig):
    """The case itself, as CPython behaves: the interrupt is printed and lost."""
    outcome, err = _child("plain", sig)
    assert outcome == "went on" and "Exception ignored in" in err
    assert ("KeyboardInterrupt" if sig == "SIGINT" else "Terminated") in err


@pytest.mark.parametrize(("sig", "raised"), [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_with_the_hook_the_signal_comes_again_as_itself_and_nothing_is_printed(sig, raised):
    outcome, err = _child("hook", sig)
    assert outcome == raised
    assert err == ""


def test_a_sigterm_comes_again_even_where_sigint_is_ignored():
    """A background start (``build.py ... &`` from a script) ignores SIGINT: a SIGTERM
    sent again as SIGINT would be lost there."""
    done = subprocess.run([sys.executable, "-c", CHILD, "hook", "SIGTERM"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert json.loads(done.stdout) == "Terminated" and done.stderr == ""


def test_other_unraisable_exceptions_reach_the_previous_hook_and_it_is_put_back():
    seen = []
    before = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with interrupts.redelivered_interrupts():
            assert sys.unraisablehook is not seen.append

            class C:
                def __del__(self):
                    raise ValueError("from a finalizer")

            c = C()
            del c
        assert sys.unraisablehook == seen.append
    finally:
        sys.unraisablehook = before
    assert [type(u.exc_value) for u in seen] == [ValueError]


def test_main_puts_the_hook_back(tmp_path, capsys):
    before = sys.unraisablehook
    assert cli.main(["--matrix", str(ROOT / "matrix.yaml"), "--list"]) == 0
    assert sys.unraisablehook is before
