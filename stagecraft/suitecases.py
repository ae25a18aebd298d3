"""What failed in a suite run, read from the JUnit report pytest wrote (``--junitxml``),
and whether it was the engine, not the image, that failed it.

testinfra's docker backend runs each check's command with ``docker exec``. When the
engine cannot start a process in the test container, the Docker CLI prints the
runtime's error and exits 126, and every check that ran a command at that moment fails
with it: "OCI runtime exec failed: exec failed: unable to start container process:
waiting for init preliminary setup: ..." (runc's exec handshake with the process it
starts, libcontainer/process_linux.go). The fault suite met it on the first suite run
after the engine's container was killed and started again (issue 24, seeds 20261382
and 20261390). Such a failure says nothing about the image. Where the image's own
command cannot be executed, the runtime names it, quoted (``exec: "/bin/sh": ...``) or
not (``exec /bin/sh: exec format error``): that is the image's failure and stays one.
A container's first process can fail the same way, "OCI runtime create failed: runc
create failed: unable to start container process: waiting for init preliminary setup:
..." (a suite's own ``docker run``, or the test container's start: ``containers.start``).

A check that failed because the engine refused its command may fail with its own words
(an assertion on the command's output, which was the runtime's error), so one failure
of the engine's makes the whole run no verdict, not only that check. A check that
expects a command to fail (``rc != 0``) passes when the engine refuses it: a run where
the engine refused nothing that failed is taken as it is.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# A report of the largest suite set is about 100 kB; far more is not pytest's report.
MAX_REPORT = 16 * 1024 * 1024
# A failure's message is kept to this many characters (whitespace collapsed).
MAX_MESSAGE = 2000

# runc's words for a process it could not start: any ``exec`` in a running container (a
# check's command) but the image's own (``_IMAGE_EXEC``); for a container's first process
# (``docker run`` in a suite, the test container's own start: ``containers.start``) only
# runc's handshake with it, since most create refusals are the image's: a directory at
# /etc/resolv.conf, a working directory the user cannot enter. runc 1.1 words the
# handshake's failure "waiting for init preliminary setup" (its ``initWaiter``); 1.2 and
# later, which removed it, "can't get final child's PID from pipe".
_ENGINE_RUNTIME = re.compile(r"OCI runtime exec failed|OCI runtime create failed:.{0,300}?"
                             r"(?:waiting for init preliminary setup|can't get final child's PID from pipe)")
# The runtime could not execute the image's own command: the image's failure. runc names
# it quoted when the lookup failed (``exec: "dpkg-query": executable file not found in
# $PATH``) and unquoted when execve did (``exec /bin/sh: exec format error``, ``exec
# /bin/sh: no such file or directory`` for a missing loader, ``... permission denied``).
_IMAGE_EXEC = re.compile(r"""exec: \\*["']|exec \.{0,2}/\S*: """)
# testinfra's host parameter in a test id: ``test_x[docker://<container id>]``, or first
# among others (``[docker://<id>-python3]``).
_HOST_PARAM = re.compile(r"docker://[0-9a-f]{12,64}-?")


@dataclass(frozen=True)
class FailedCase:
    """One test case that failed or erred: ``test`` as ``module::name`` (pytest's
    classname and name) and its ``message`` (at most ``MAX_MESSAGE`` characters)."""

    test: str
    message: str


def failed_cases(report: Path) -> list[FailedCase]:
    """The cases of ``report`` (a JUnit XML) with a ``failure`` or ``error``, in order.
    Raises OSError when it cannot be read, ValueError when it is over ``MAX_REPORT``
    bytes or not XML."""
    with open(report, "rb") as f:
        data = f.read(MAX_REPORT + 1)
    if len(data) > MAX_REPORT:
        raise ValueError(f"{report}: over {MAX_REPORT} bytes, not a suite's report")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"{report}: not XML ({exc})") from None
    out = []
    for case in root.iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            # pytest's message attribute is the exception's line; the text, the whole
            # traceback (the test's source among it), is read only where there is none.
            text = " ".join((bad.get("message") or bad.text or "").split())
            # The container's id testinfra puts in every test's id says nothing here.
            name = _HOST_PARAM.sub("", case.get("name") or "?").replace("[]", "")
            out.append(FailedCase(f"{case.get('classname') or '?'}::{name}", text[:MAX_MESSAGE]))
    return out


def engine_failed(case: FailedCase) -> bool:
    """Whether ``case`` failed because the engine could not start a process in the
    test container (module docstring), not because of the image."""
    return runtime_refused(case.message)


def runtime_refused(text: str) -> bool:
    """Whether ``text`` (a check's failure, an engine's answer) says the runtime could not
    start a process for a reason that is not the image's (module docstring): "OCI runtime
    exec failed" but for the image's own command, or "OCI runtime create failed" where
    runc's handshake with the container's first process failed ("runc create failed:
    unable to start container process: waiting for init preliminary setup: ..." from runc
    1.1, libcontainer/process_linux.go, met by the fault suite on Docker 26.1.5, issue 24,
    seed 20261404; "... can't get final child's PID from pipe: EOF" from runc 1.2). Any
    other create refusal (a mount, the working directory, a device) stays the image's or
    the caller's. Such a start may be made again: nothing of the image ran."""
    found = _ENGINE_RUNTIME.search(text)
    return bool(found) and not _IMAGE_EXEC.search(text, found.end())
