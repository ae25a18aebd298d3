"""The helper every signal-sending test starts its child with (issue 22, item 7): under
a parent that ignores SIGINT, as a shell's background job (`cmd &`, nohup) does, a Python
child gets no KeyboardInterrupt handler and a Ctrl-C test cannot pass; through
``harness.with_default_signals`` it does, with the same process id."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.integration.harness import with_default_signals

# A parent started as a background job is: SIGINT, SIGQUIT (and here SIGTERM too)
# ignored, and that kept across exec into the command.
IGNORING = [sys.executable, "-c",
            "import os, signal, sys\n"
            "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):\n"
            "    signal.signal(s, signal.SIG_IGN)\n"
            "os.execv(sys.argv[1], sys.argv[1:])\n"]
# The child: says its pid and how SIGINT, SIGTERM, SIGQUIT are handled, then waits;
# Ctrl-C is exit 130, as build.py's.
CHILD = [sys.executable, "-c",
         "import os, signal, sys, time\n"
         "names = {signal.SIG_IGN: 'ignored', signal.SIG_DFL: 'default',\n"
         "         signal.default_int_handler: 'KeyboardInterrupt'}\n"
         "try:\n"
         "    print(os.getpid(), *(names.get(signal.getsignal(s), '?') for s in\n"
         "          (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)), flush=True)\n"
         "    time.sleep(120)\n"
         "except KeyboardInterrupt:\n"
         "    sys.exit(130)\n"]


def _start(argv: list[str]) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().split()


def test_without_the_helper_sigint_is_lost_under_an_ignoring_parent():
    """The control, what the integration tests met: the child inherits SIGINT ignored,
    so Python installs no KeyboardInterrupt handler and the kernel drops the SIGINT the
    test sends; the child is still there for the SIGKILL sent after it."""
    proc, said = _start([*IGNORING, *CHILD])
    try:
        assert said[1:] == ["ignored", "ignored", "ignored"], said
        assert int(said[0]) == proc.pid, "exec keeps the pid"
        proc.send_signal(signal.SIGINT)
        proc.kill()
        assert proc.wait(timeout=60) == -signal.SIGKILL, "SIGINT reached a child that ignores it"
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_with_the_helper_sigint_is_ctrl_c_under_an_ignoring_parent():
    proc, said = _start([*IGNORING, *with_default_signals(CHILD)])
    try:
        assert said[1:] == ["KeyboardInterrupt", "default", "default"], said
        assert int(said[0]) == proc.pid, "the helper execs: the pid a test signals is the command's"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_with_the_helper_sigterm_is_default_again():
    # (SIGQUIT's default, said above, is not sent: it would dump a core in the cwd.)
    proc, said = _start([*IGNORING, *with_default_signals(CHILD)])
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM, said
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_the_helper_passes_arguments_and_exit_status_through():
    proc = subprocess.run(with_default_signals([sys.executable, "-c",
                                                "import sys; print(sys.argv[1:]); sys.exit(7)",
                                                "a b", "", "--x=1"]),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7 and proc.stdout.strip() == "['a b', '', '--x=1']", proc
