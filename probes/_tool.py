"""Run a vendor tool (xpu_smi, npu-smi, cnmon) under a time budget and an output cap.

Why not ``subprocess.run(..., timeout=)``: it reads all the output into memory (a tool
that floods reached 1 GB within the default budget, issue 22), and on a timeout it kills
the tool but then waits for end-of-file on the pipe, which a child of the tool that still
holds the pipe (``tool | tee``, a daemon it forks) postpones for ever. Here the tool runs
in a session of its own; at the deadline, or once it has printed ``limit`` bytes, the
whole process group is killed, our end of the pipe closed, and the tool reaped.
"""
from __future__ import annotations

import os
import time

KILL_WAIT_S = 1.0  # seconds to reap the tool after SIGKILL (the kernel needs milliseconds)
GRACE_S = 0.1  # seconds of reading after the tool exited, for what is still in the pipe


def _reap(proc: object) -> int | None:
    """Kill ``proc``'s process group and reap it; its exit status or None."""
    import signal
    import subprocess

    assert isinstance(proc, subprocess.Popen)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        return proc.wait(KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        return None


def _exit_fd(pid: int) -> int | None:
    """A pidfd that turns readable when ``pid`` exits (Linux 5.3+), or None (older kernels:
    the caller polls instead)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _drain(fd: int, deadline: float, limit: int, proc: object) -> tuple[bytes, str]:
    """Read ``fd`` until end-of-file, the deadline (time.monotonic) or ``limit`` bytes;
    (bytes read, "" or "timeout" or "flood"). Once the tool ``proc`` itself has exited,
    reading goes on for at most GRACE_S: a child it left holding the pipe (a daemon it
    forked) does not turn a finished answer into a timeout (issue 22 review F13)."""
    import select

    chunks: list[bytes] = []
    got = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    pidfd = _exit_fd(proc.pid)  # type: ignore[attr-defined]
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    end, exited = deadline, False
    try:
        while True:
            now = time.monotonic()
            if not exited and proc.poll() is not None:  # type: ignore[attr-defined]
                exited, end = True, min(deadline, now + GRACE_S)
                if pidfd is not None:
                    poller.unregister(pidfd)
            left = end - now
            if left <= 0:
                return b"".join(chunks), ("" if exited and end < deadline else "timeout")
            wait_ms = max(1, int(left * 1000)) if exited or pidfd is not None else min(50, max(1, int(left * 1000)))
            ready = [f for f, _ in poller.poll(wait_ms)]
            if fd not in ready:
                continue
            b = os.read(fd, min(65536, limit + 1 - got))
            if not b:
                return b"".join(chunks), ""
            chunks.append(b)
            got += len(b)
            if got > limit:
                return b"".join(chunks)[:limit], "flood"
    finally:
        if pidfd is not None:
            os.close(pidfd)


def run(argv: list[str], timeout_s: float, limit: int) -> tuple[int | None, str]:
    """(exit code, stdout+stderr text of at most ``limit`` bytes); exit code None, and the
    text saying why, when the tool cannot start, runs past ``timeout_s`` seconds or
    prints more than ``limit`` bytes. Never raises."""
    import subprocess

    t0 = time.monotonic()
    budget = max(timeout_s, 0.05)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return None, f"cannot run: {exc}"
    assert proc.stdout is not None
    try:
        data, why = _drain(proc.stdout.fileno(), t0 + budget, limit, proc)
    except OSError as exc:
        data, why = b"", f"error {exc}"
    if why:
        _reap(proc)
        proc.stdout.close()
        if why == "timeout":
            return None, f"timed out after {budget:.1f} s"
        if why == "flood":
            return None, f"printed more than {limit} bytes: stopped"
        return None, why
    proc.stdout.close()
    try:
        rc = proc.wait(max(0.0, t0 + budget - time.monotonic()))
    except subprocess.TimeoutExpired:  # closed its output but did not exit
        _reap(proc)
        return None, f"timed out after {budget:.1f} s"
    _reap(proc)  # children it left behind in its group
    return rc, data.decode("utf-8", "replace")
