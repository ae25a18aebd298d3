"""A test run's CPU timeline (issue 23 item 5): how busy the machine's cores were while
each test ran, so a run's profile says where cores sat idle (time to overlap) and where
they were full (time only less work saves).

``pytest --cpu-timeline=PATH`` (``make test`` passes one next to its JUnit report) writes
JSON lines: one ``{"event": "session", ...}`` at the start and the end of the session,
and for each test one ``{"event": "test", "nodeid", "t0", "t1", "cpu0", "cpu1"}``: the
wall clock (s since the epoch) before its set-up and after its tear-down, and the
machine's CPU counters at those instants (``cpu_ticks``). ``bench/testrun.py`` reads it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

# The counters of /proc/stat's first line, in its order (proc(5)); guest time is already
# in user and nice, so it is left out.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# /proc/stat's first line is under 200 bytes; more than this is read no further.
MAX_READ = 4096


def cpu_ticks(path: str = "/proc/stat") -> list[int]:
    """The machine's CPU counters (``FIELDS``, in clock ticks summed over every core,
    USER_HZ: 100 per second per core on Linux) from ``path``'s first line; [] when it
    cannot be read or is not that line (a machine without /proc)."""
    try:
        with open(path, "rb") as f:
            first = f.read(MAX_READ).split(b"\n", 1)[0].split()
    except OSError:
        return []
    if first[:1] != [b"cpu"] or len(first) < 1 + len(FIELDS):
        return []
    try:
        return [int(v) for v in first[1:1 + len(FIELDS)]]
    except ValueError:
        return []


class Timeline:
    """Writes the run's timeline to ``path`` (created or truncated; line-buffered, so a
    run that is killed keeps what it wrote). An error writing it is reported once by
    pytest's warning and ends the timeline, never the run."""

    def __init__(self, path: Path):
        self.path = path
        self.file = open(path, "w", buffering=1)  # noqa: SIM115 (closed by close())
        self.started: dict[str, tuple[float, list[int]]] = {}

    def _write(self, doc: dict) -> None:
        if self.file is None:
            return
        try:
            self.file.write(json.dumps(doc, separators=(",", ":")) + "\n")
        except OSError as exc:
            import warnings

            warnings.warn(f"cpu timeline {self.path}: {exc}; no more lines", stacklevel=2)
            self.close()

    def session(self, when: str) -> None:
        """A session line: ``when`` is "start" or "end"."""
        self._write({"event": "session", "when": when, "t": time.time(), "cpu": cpu_ticks(),
                     "cores": os.cpu_count()})

    def test_start(self, nodeid: str) -> None:
        self.started[nodeid] = (time.time(), cpu_ticks())

    def test_end(self, nodeid: str) -> None:
        t0, cpu0 = self.started.pop(nodeid, (None, []))
        if t0 is not None:
            self._write({"event": "test", "nodeid": nodeid, "t0": t0, "t1": time.time(),
                         "cpu0": cpu0, "cpu1": cpu_ticks()})

    def close(self) -> None:
        """Close the file; a flush that fails (the disk full) is dropped with it."""
        if self.file is not None:
            f, self.file = self.file, None
            try:
                f.close()
            except OSError:
                pass
