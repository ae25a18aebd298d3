"""A Ctrl-C that a finalizer swallowed comes again (stagecraft.cli.redeliver_swallowed_interrupts).

Found by the fault suite (seed 20261343, trial 30): a SIGINT 3.3 s into a build met
Python inside a ``__del__``; CPython printed "Exception ignored in ... KeyboardInterrupt"
and the build went on to exit 0. The child below is a real interpreter with a real
finalizer that a real SIGINT meets (it sends the signal itself, then runs bytecode, so
the handler runs inside ``__del__``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, os, signal, sys, time
from stagecraft import cli
if sys.argv[1] == "hook":
    cli.redeliver_swallowed_interrupts()
    cli.redeliver_swallowed_interrupts()  # a second main() in one process: one hook
class Collected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000):
            pass
outcome = "went on"
try:
    obj = Collected()
    del obj
    end = time.monotonic() + 5
    while time.monotonic() < end:
        time.sleep(0.001)
except KeyboardInterrupt:
    outcome = "interrupted"
print(json.dumps(outcome))
"""


def _child(mode: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_without_the_hook_python_loses_the_ctrl_c():
    """The case itself, as CPython behaves: the interrupt is printed and lost."""
    outcome, err = _child("plain")
    assert outcome == "went on" and "Exception ignored in" in err and "KeyboardInterrupt" in err


def test_with_the_hook_the_ctrl_c_comes_again_and_nothing_is_printed():
    outcome, err = _child("hook")
    assert outcome == "interrupted"
    assert err == ""


def test_other_unraisable_exceptions_still_reach_the_previous_hook():
    code = ("from stagecraft import cli\n"
            "cli.redeliver_swallowed_interrupts()\n"
            "class C:\n    def __del__(self):\n        raise ValueError('from a finalizer')\n"
            "c = C(); del c\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "ValueError: from a finalizer" in done.stderr
