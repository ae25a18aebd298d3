"""The fault suite reads a run's stderr as it comes (``Rig.start``/``Rig.finish``): each
line with the second it came, so a trial records what the run had said last before its
fault struck (``Run.said_before``); the run's end waits for orphans that hold its pipes,
up to its timeout, then kills its process group."""

from __future__ import annotations

import sys
import textwrap
import time

from tests.faults.rig import Rig
from tests.integration import engines


def _rig(tmp_path) -> Rig:
    rig = Rig(tmp_path / "work")
    rig.engine = engines.TestEngine("stand-in")
    rig.signing = ({"cosign": "cosign", "oras": "oras"}, tmp_path / "cosign.key")
    rig.project_dir.mkdir(parents=True)
    return rig


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_each_line_keeps_the_second_it_came(tmp_path):
    rig = _rig(tmp_path)
    proc, run, t0 = rig.start(_python("""
        import sys, time
        print("[1/2] base@0123456789ab for a", file=sys.stderr, flush=True)
        print("the report", flush=True)
        time.sleep(0.6)
        print("  runtime@0123456789ab #5 RUN pip install", file=sys.stderr, flush=True)
        sys.exit(3)
    """))
    done = rig.finish(proc, run, t0, timeout=60)
    assert done.rc == 3 and not done.timed_out and done.out == "the report\n"
    assert [ln for _, ln in done.lines] == ["[1/2] base@0123456789ab for a",
                                            "  runtime@0123456789ab #5 RUN pip install"]
    first, second = (t for t, _ in done.lines)
    assert second - first >= 0.5
    assert done.said_before(first + 0.25) == "[1/2] base@0123456789ab for a"
    assert done.said_before(second) == "runtime@0123456789ab #5 RUN pip install"
    assert done.said_before(first - 0.01) == ""
    assert done.err.splitlines() == [ln for _, ln in done.lines]
    assert done.last_line() == "runtime@0123456789ab #5 RUN pip install"


def test_an_orphan_holding_the_pipes_is_waited_for_then_killed_at_the_timeout(tmp_path):
    rig = _rig(tmp_path)
    # build.py SIGKILLed alone leaves its children: here the process ends at once and its
    # child, holding stderr, says one more line a second later.
    orphan = _python("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(1); print('late', file=sys.stderr)"])
        print("early", file=sys.stderr, flush=True)
    """)
    proc, run, t0 = rig.start(orphan)
    done = rig.finish(proc, run, t0, timeout=60)
    assert done.rc == 0 and not done.timed_out and [ln for _, ln in done.lines] == ["early", "late"]

    hung = _python("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("early", file=sys.stderr, flush=True)
    """)
    t = time.monotonic()
    proc, run, t0 = rig.start(hung)
    done = rig.finish(proc, run, t0, timeout=1.5)
    assert done.timed_out and done.err == "early\n" and time.monotonic() - t < 30



def test_bytes_that_are_not_utf8_neither_stop_the_reading_nor_the_run(tmp_path):
    """A child that inherits stderr (tar, docker) may write any bytes; a strict decoder
    in the reader would die on them and leave the pipe full: the run blocked until its
    timeout, its lines lost."""
    rig = _rig(tmp_path)
    proc, run, t0 = rig.start(_python("""
        import sys
        sys.stderr.write("first\\n"); sys.stderr.flush()
        sys.stderr.buffer.write(b"tar: \\xff\\xfe bad name\\n" + b"x" * 240_000 + b"\\nlast\\n")
        sys.stderr.flush()
    """))
    done = rig.finish(proc, run, t0, timeout=60)
    assert done.rc == 0 and not done.timed_out
    said = [ln for _, ln in done.lines]
    assert said[0] == "first" and said[1] == "tar: \ufffd\ufffd bad name" and said[-1] == "last"


def test_a_failed_stage_log_is_read_before_the_state_directory_goes(tmp_path):
    from tests.faults.trials import log_tails

    log = tmp_path / "runtime-f24f72c1c9d6.log"
    log.write_bytes(b"x" * 5000 + b"\nfind: '/tmp/gone': No such file or directory\n")
    err = (f"  runtime@f24f72c1c9d6 FAILED: build failed (exit 1): ... exit code: 1; log: {log}\n"
           f"FAILED: runtime@f24f72c1c9d6 (log: {log})\nlog: {tmp_path}/none.log\n")
    tails = log_tails(err, limit=100)
    assert tails.count(f"--- {log} (its end)") == 1 and tails.count("No such file or directory") == 2
    body = tails.split("(its end)\n", 1)[1].split(f"--- {tmp_path}/none.log")[0]
    assert len(body.rstrip("\n")) <= 100 and body.rstrip().endswith("No such file or directory")


def test_a_log_path_that_is_not_a_file_is_named_not_opened(tmp_path):
    import os

    from tests.faults.trials import log_tails

    fifo = tmp_path / "stage.log"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    assert log_tails(f"FAILED (log: {fifo})") == f"--- {fifo}: not a regular file: {fifo}"


def test_two_runs_at_once_must_both_succeed():
    """No fault meets the concurrent kind's runs: one that failed is a violation (seed
    20261393, trial 24: "already exists" on a stage both exported), whatever it said."""
    from tests.faults.rig import Run
    from tests.faults.trials import check_message

    ok = Run(argv=["python3", "build.py", "build"], rc=0, err="RUN steps: 2 ran, 0 from cache\n")
    failed = Run(argv=["python3", "build.py", "build"], rc=1,
                 err='failed: 1.16.0-cpu: build failed (exit 1): ERROR: failed to solve: image "x": already exists\n')
    assert check_message("concurrent", [ok, ok]) == []
    assert check_message("concurrent", [failed, ok]) == [
        'one of two runs at once failed (exit 1): failed: 1.16.0-cpu: build failed (exit 1): ERROR: failed to '
        'solve: image "x": already exists']
    assert check_message("disk", [failed]) != []  # other kinds: the last line must name the fault


def test_a_sigint_before_the_interpreters_handler_is_no_silent_exit():
    """Seed 20261402, trial 54: SIGINT 0.06 s after the start, before CPython set its
    handler; the default action ended the process (exit -2), nothing on stderr. Only then:
    a run that died of SIGINT it was not sent, or that printed something, is checked."""
    from tests.faults.rig import Run
    from tests.faults.trials import check_message, interpreter_start

    early = Run(argv=["python3", "build.py", "build"], rc=-2, err="", signalled="INT")
    assert interpreter_start(early) and check_message("signal", [early]) == []
    unsent = Run(argv=["python3", "build.py", "build"], rc=-2, err="", signalled="engine")
    assert not interpreter_start(unsent) and check_message("engine", [unsent]) == ["exit -2 with nothing on stderr"]
    said = Run(argv=["python3", "build.py", "build"], rc=-2, err="planning 1 tag\n", signalled="INT")
    assert not interpreter_start(said) and check_message("signal", [said]) != []
