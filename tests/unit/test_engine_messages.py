"""Failure messages and the index preflight, without Docker."""

from __future__ import annotations

import http.server
import re
import threading
from pathlib import Path

from stagecraft.buildlog import failure_reason
from stagecraft.preflight import index_reachable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

PIP_FAILURE = """\
#5 [2/6] RUN --mount=type=secret,id=pip-ca,required=false pip install ...
#5 3.11 Collecting six==0.0.404
#5 18.39 ERROR: Could not find a version that satisfies the requirement six==0.0.404 (from versions: 1.16.0)
#5 18.39 ERROR: No matching distribution found for six==0.0.404
#5 ERROR: executor failed running [/bin/bash -o pipefail -c pip install ...]: exit code: 1
------
executor failed running [/bin/bash -o pipefail -c pip install ...]: exit code: 1""".splitlines()


def test_failure_reason_prefers_the_steps_own_error():
    assert failure_reason(PIP_FAILURE) == "ERROR: No matching distribution found for six==0.0.404"


def test_a_full_disk_is_the_reason_whatever_the_step_said_first():
    """A full engine disk during the runtime stage's bytecode compilation (seen by the
    fault suite): compileall's "*** Error compiling" came first, errno 28 after it."""
    lines = ["#9 [runtime 7/8] RUN python -m compileall -q /opt/venv",
             "#9 0.81 *** Error compiling '/opt/venv/lib/python3.11/site-packages/stagecraft_device.py'...",
             "#9 0.81 OSError: [Errno 28] No space left on device: '/opt/venv/lib/python3.11/__pycache__'",
             "#9 ERROR: process did not complete successfully: exit code: 1"]
    reason = failure_reason(lines)
    assert reason.startswith("no space left on device during the build (the engine's storage, most often) (")
    assert "[Errno 28]" in reason and reason.endswith("and run again")


def test_failure_reason_falls_back_to_buildkit():
    lines = ["#3 [internal] load metadata", "#3 ERROR: pull access denied for nope/nope"]
    assert failure_reason(lines) == "#3 ERROR: pull access denied for nope/nope"
    assert failure_reason([]) == "no output"


def test_index_preflight():
    assert index_reachable("http://127.0.0.1:9/simple/", None, timeout_s=2) != ""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            self.send_response(404)  # any answer counts as reachable
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert index_reachable(f"http://127.0.0.1:{server.server_port}/simple/", None) == ""
    finally:
        server.shutdown()


# pip 23's report of a file that is not the locked one (pip install --require-hashes).
PIP_HASH_FAILURE = """\
#6 [2/4] RUN --mount=type=secret,id=pip-ca,required=false ...
#6 4.20 Collecting paddlepaddle==2.6.2
#6 9.80 ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
#6 9.80     paddlepaddle==2.6.2 from https://files.pythonhosted.org/packages/54/07/paddlepaddle-2.6.2-cp311-cp311-manylinux1_x86_64.whl:
#6 9.80         Expected sha256 0000000000000000000000000000000000000000000000000000000000000000
#6 9.80              Got        b090db204af19c0b1c187a72a2694faa008c22a4405942e8ea3946eae222be33
#6 9.80
#6 ERROR: executor failed running [/bin/bash -o pipefail -c ...]: exit code: 1""".splitlines()


def test_failure_reason_names_the_package_and_both_hashes():
    assert failure_reason(PIP_HASH_FAILURE).startswith(
        "hash mismatch for paddlepaddle==2.6.2: lock sha256:" + "0" * 64 +
        ", downloaded sha256:b090db204af19c0b1c187a72a2694faa008c22a4405942e8ea3946eae222be33")


def test_failure_reason_prefers_our_own_check():
    lines = ["#5 [2/3] RUN apt-get update ...",
             "#5 7.1 E: Some index files failed to download. They have been ignored.",
             "#5 9.3 stagecraft: tini 0.19.0-1+b3 is locked but the mirror no longer serves it; "
             "run `build.py lock --upgrade`",
             "#5 ERROR: executor failed running [...]: exit code: 1"]
    assert failure_reason(lines).startswith("stagecraft: tini 0.19.0-1+b3 is locked")


# pip 24 through a proxy that does not answer (captured: `pip download six==1.16.0
# --proxy http://127.0.0.1:9 --retries 2`), as BuildKit's plain progress shows it.
DEAD_PROXY = [f"#7 {t} {line}" for t, line in [
    ("2.10", "Collecting six==1.16.0"),
    ("2.51", "WARNING: Retrying (Retry(total=1, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f8c36b35b50>: Failed to establish a new connection: [Errno 111] Connection refused'))': /simple/six/"),
    ("3.52", "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f8c35266250>: Failed to establish a new connection: [Errno 111] Connection refused'))': /simple/six/"),
    ("3.60", "ERROR: Could not find a version that satisfies the requirement six==1.16.0 (from versions: none)"),
    ("3.60", "ERROR: No matching distribution found for six==1.16.0"),
]] + ["#7 ERROR: process \"/bin/sh -c pip install ...\" did not complete successfully: exit code: 1"]


def test_failure_reason_names_an_unreachable_index_not_the_requirement():
    reason = failure_reason(DEAD_PROXY)
    assert reason.startswith("pip could not reach the package index (ProxyError('Cannot connect "
                             "to proxy.', NewConnectionError('Failed to establish a new "
                             "connection: [Errno 111] Connection refused'))"), reason
    assert "2 attempt(s) at /simple/six/" in reason and "0x7f8c" not in reason
    # A real "no such version" (the index answered) keeps pip's own line.
    assert failure_reason(PIP_FAILURE) == "ERROR: No matching distribution found for six==0.0.404"


def test_a_full_disk_in_the_engines_own_words_is_the_reason():
    """BuildKit and the daemon say ENOSPC as Go does, in lower case, at the end of a line
    that quotes the step's whole command."""
    lines = ["#8 [stage-0 2/4] RUN --mount=type=secret,id=pip-ca,required=false ...",
             '#8 ERROR: failed to solve: process "/bin/bash -o pipefail -c ' + "x" * 900 + '" did not complete '
             "successfully: mkdir /var/lib/docker/buildkit/executor/abc: no space left on device"]
    reason = failure_reason(lines)
    assert reason.startswith("no space left on device during the build (the engine's storage, most often) (")
    assert "no space left on device)" in reason, reason


def test_a_long_buildkit_error_keeps_its_end():
    """The fault suite's engine-full trials ended with BuildKit's error cut at 300
    characters inside the quoted command: the cause at its end never showed."""
    line = ('#9 ERROR: failed to solve: process "/bin/bash -o pipefail -c mkdir -p /etc/stagecraft ' + "y" * 800
            + '" did not complete successfully: exit code: 1')
    reason = failure_reason(["#9 [stage-0 3/4] RUN mkdir -p /etc/stagecraft ...", line])
    assert len(reason) == 300 and reason.startswith("#9 ERROR: failed to solve: process")
    assert reason.endswith("did not complete successfully: exit code: 1") and "..." in reason


def test_venvs_are_made_so_that_ensurepip_says_why_it_failed():
    """``python3 -m venv`` captures ensurepip's output and, on a full disk, says only that
    ensurepip exited 1 (the fault suite's engine-full trials, issue 24): every rendered
    Dockerfile makes its venv without pip, then runs ensurepip where its output is seen."""
    from tests.unit.test_golden import CASES, rendered

    made = 0
    for spec, platform in CASES:
        text = rendered(spec, platform)
        calls = re.findall(r"python3 -m venv [^;&|]*", text)
        assert all("--without-pip" in c for c in calls), (spec.tag, calls)
        made += len(calls)
        assert text.count("-m ensurepip --upgrade --default-pip") == len(calls), spec.tag
    assert made >= len(CASES)


def test_a_python_traceback_gives_its_exception_not_its_first_line():
    """The fault suite's full engine disk during the runtime stage's venv step (seed
    20261392, issue 24) ended "build failed (exit 1): Traceback (most recent call last):":
    ensurepip's tempfile found no directory it could write in, and its exception line
    names no full disk and matches no error word."""
    lines = (FIXTURES / "buildlogs" / "ensurepip-no-temp-dir.log").read_text().splitlines()
    reason = failure_reason(lines)
    assert reason.startswith("no usable temporary directory in the build step: Python could write a "
                             "file in none of ['/tmp', '/var/tmp', '/usr/tmp', '/'] (the engine's storage full"), reason
    assert reason.endswith("docker system prune) and run again")
    # Any other traceback: its exception line, also when it matches no error word.
    tb = ["#7 [stage 2/3] RUN python3 -c ...", "#7 0.52 Traceback (most recent call last):",
          '#7 0.52   File "<string>", line 1, in <module>', "#7 0.52     import paddle",
          "#7 0.52 ", "#7 0.52 ModuleNotFoundError: No module named 'paddle'",
          "#7 ERROR: process did not complete successfully: exit code: 1"]
    assert failure_reason(tb) == "ModuleNotFoundError: No module named 'paddle'"
    # A later error word in the step's output still wins over an earlier traceback.
    assert failure_reason(tb[:-1] + ["#7 0.60 ERROR: the check failed", tb[-1]]) == "ERROR: the check failed"
    # Output that ends inside a traceback says so, never quoting its first line.
    cut = failure_reason(tb[:4] + [tb[-1]])
    assert cut == "a Python traceback whose exception line never came (the output ends inside it)"


def test_a_traceback_is_read_within_its_own_step_and_depth():
    """A frame's words ("urllib/error.py", "logger.error") are never the reason; an
    indented traceback (a tool that indents what it runs) ends at the first line no
    deeper than its header; a line of another step printed between its lines is not it."""
    frames = ["#7 0.52 Traceback (most recent call last):",
              '#7 0.52   File "/usr/lib/python3.11/urllib/error.py", line 12, in <module>',
              "#7 0.52     logger.error(x)",
              "#9 0.53 Collecting numpy",
              "#7 0.53 urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
              "#7 ERROR: process did not complete successfully: exit code: 1"]
    assert failure_reason(frames) == "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>"
    nested = ["#5 1.0     Traceback (most recent call last):",
              '#5 1.0       File "x.py", line 1, in <module>',
              "#5 1.0     RuntimeError: boom",
              "#5 1.1 Removing temporary files",
              "#5 ERROR: process did not complete successfully: exit code: 1"]
    assert failure_reason(nested) == "RuntimeError: boom"
    # Chained: the last traceback's exception is the one that ended the step.
    chained = ["#3 0.1 Traceback (most recent call last):", '#3 0.1   File "a.py", line 1', "#3 0.1 KeyError: 'x'",
               "#3 0.1 ", "#3 0.1 During handling of the above exception, another exception occurred:",
               "#3 0.1 ", "#3 0.1 Traceback (most recent call last):", '#3 0.1   File "a.py", line 3',
               "#3 0.1 ValueError: no x", "#3 ERROR: process did not complete successfully: exit code: 1"]
    assert failure_reason(chained) == "ValueError: no x"


def test_a_name_another_build_made_first_is_read_from_buildkits_own_error():
    """BuildKit's exporter on the containerd image store, when another build created the
    name first (the fault suite's two runs of one tag): its error is found among the
    last lines whatever the steps printed before it; a step's output saying the same,
    or another name's form, is not it."""
    from stagecraft.buildlog import name_taken

    ref = "stagecraft-stage/runtime:5813c0e573a7f679da2c431d"
    tail = ["#9 12.31 ERROR: pip's dependency resolver does not currently take into account all the packages",
            "#12 exporting to image", "#12 naming to docker.io/" + ref + " done",
            f'#12 ERROR: image "docker.io/{ref}": already exists', "------",
            f'ERROR: failed to solve: image "docker.io/{ref}": already exists']
    assert name_taken(tail) == ref
    assert name_taken([f'image "{ref}": already exists\r']) == ref
    assert name_taken([f'#9 0.4 image "docker.io/{ref}": already exists', "#9 ERROR: exit code: 1"]) is None
    assert name_taken(["ERROR: failed to solve: image already exists"]) is None
    assert name_taken([f'ERROR: failed to solve: image "docker.io/{ref}": already exists'] + ["x"] * 20) is None
