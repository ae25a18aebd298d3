"""Where a `make test` run's time went, from its JUnit report (issue 23 item 5).

`make test` keeps each run's report under /var/lib/stagecraft/test-reports (the
Makefile's TEST_REPORTS), so a CI run's figures outlive its clone. This prints, for one
report (default: the newest there), the run's wall time as pytest measured it, the
seconds per test file (set-up, call and tear-down of its tests: a session fixture's
build counts in the first test that asked for it), and the slowest tests. Where the run's
CPU timeline is there too (``timeline-STAMP.jsonl`` beside ``pytest-STAMP.xml``, or
``--timeline``: tests/cputimeline.py), each file's row also says how many of the
machine's cores were busy on average while its tests ran, and the share of CPU time
spent waiting for I/O: cores idle there are time an overlap can win back; cores full,
time that only less work saves.

    python bench/testrun.py [REPORT.xml] [--timeline FILE] [--top 25]

Exit 2 with a one-line message when the report is missing or is not a JUnit report.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPORTS = Path("/var/lib/stagecraft/test-reports")
ROOT = Path(__file__).resolve().parents[1]
# A report of a full run is about 2 MB; more than this is not one of ours.
MAX_BYTES = 64 * 1024 * 1024


def load(path: Path) -> tuple[dict, list[tuple[str, str, float, str]]]:
    """The report's suite attributes and its test cases as (file, name, seconds, outcome).
    Raises OSError (unreadable), ValueError (too big, not XML, no testsuite)."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES} bytes, not a test report")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not XML ({exc})") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError(f"{path}: no <testsuite>: not a JUnit report")
    cases = []
    for case in suite.iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        # pytest's classname is the module's dotted path, then any class; a file that
        # failed to collect has none, and its dotted path as the name.
        dotted = case.get("classname") or case.get("name", "?")
        try:
            seconds = float(case.get("time") or 0)
        except ValueError:
            raise ValueError(f"{path}: test {dotted}::{case.get('name')} has time={case.get('time')!r}") from None
        cases.append((module_file(dotted), case.get("name", "?"), seconds, outcome))
    try:
        float(suite.get("time") or 0)
    except ValueError:
        raise ValueError(f"{path}: the testsuite has time={suite.get('time')!r}") from None
    return dict(suite.attrib), cases


def module_file(dotted: str) -> str:
    """The test file of a pytest classname (``tests.unit.test_x.TestA`` ->
    ``tests/unit/test_x.py``): the longest dotted prefix that is a file of this checkout,
    else the first three parts (the layout of tests/)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n]) + ".py"
        if (ROOT / candidate).is_file():
            return candidate
    return "/".join(parts[:3]) + ".py"


# The CPU counters of a timeline line, in tests/cputimeline.py's order.
IDLE, IOWAIT = 3, 4


def load_timeline(path: Path) -> tuple[dict[str, list[int]], int, float]:
    """A CPU timeline (tests/cputimeline.py): test file -> [busy, idle, iowait] clock
    ticks (every core's, summed over its tests), the machine's core count, and the
    session's wall seconds (0.0 without both session lines). Raises OSError
    (unreadable), ValueError (too big, a line that is not a timeline's, naming it)."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES} bytes, not a CPU timeline")
    per_file: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    cores, session = 0, {}
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            if doc["event"] == "session":
                session[doc["when"]] = float(doc["t"])
                cores = int(doc.get("cores") or cores)
                continue
            cpu0, cpu1 = [int(v) for v in doc["cpu0"]], [int(v) for v in doc["cpu1"]]
            file = str(doc["nodeid"]).split("::", 1)[0]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a CPU timeline line ({exc.__class__.__name__}: {exc})") from None
        if len(cpu0) != len(cpu1) or len(cpu0) <= IOWAIT:
            continue  # a machine without /proc/stat: no counters
        delta = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
        idle, iowait = delta[IDLE], delta[IOWAIT]
        row = per_file[file]
        row[0] += sum(delta) - idle - iowait
        row[1] += idle
        row[2] += iowait
    wall = session["end"] - session["start"] if {"start", "end"} <= session.keys() else 0.0
    return dict(per_file), cores, wall


def cpu_columns(row: list[int] | None, cores: int) -> str:
    """`` cores busy | iowait % |`` of one row of ``load_timeline`` ("- | - |" without)."""
    total = sum(row) if row else 0
    if not total or not cores:
        return " - | - |"
    return f" {cores * row[0] / total:.2f} | {100 * row[2] / total:.0f} % |"


def timeline_of(report_path: Path) -> Path | None:
    """The CPU timeline `make test` wrote beside ``report_path`` (pytest-STAMP.xml ->
    timeline-STAMP.jsonl), or None when there is none."""
    name = report_path.name
    if name.startswith("pytest-") and name.endswith(".xml"):
        candidate = report_path.with_name("timeline-" + name[len("pytest-"):-len(".xml")] + ".jsonl")
        if candidate.is_file():
            return candidate
    return None


def report(path: Path, top: int, timeline: Path | None = None) -> str:
    """The text this script prints for ``path`` (see the module docstring), with the
    CPU columns where ``timeline`` is given."""
    attrs, cases = load(path)
    outcomes = collections.Counter(c[3] for c in cases)
    per_file: dict[str, float] = collections.defaultdict(float)
    for file, _, seconds, _ in cases:
        per_file[file] += seconds
    total = float(attrs.get("time") or 0)
    lines = [f"{path.name}: {len(cases)} tests ({', '.join(f'{n} {k}' for k, n in outcomes.most_common())}), "
             f"{total:.0f} s ({total / 60:.1f} min), started {attrs.get('timestamp', '?')}"]
    cpu, cores = None, 0
    if timeline is not None:
        cpu, cores, _ = load_timeline(timeline)
        whole = [sum(r[i] for r in cpu.values()) for i in range(3)]
        ticks = sum(whole)
        if ticks and cores:
            lines.append(f"CPU ({timeline.name}): {cores * whole[0] / ticks:.2f} of {cores} cores busy on "
                         f"average while tests ran, {100 * whole[2] / ticks:.0f} % of CPU time waiting for I/O")
        else:
            lines.append(f"CPU ({timeline.name}): no counters recorded")
    lines += ["", "| test file | s | share |" + (" cores busy | iowait |" if cpu is not None else ""),
              "|---|---:|---:|" + ("---:|---:|" if cpu is not None else "")]
    lines += [f"| {f} | {s:.0f} | {100 * s / total if total else 0:.1f} % |"
              + (cpu_columns(cpu.get(f), cores) if cpu is not None else "")
              for f, s in sorted(per_file.items(), key=lambda kv: -kv[1])]
    lines += ["", f"slowest {top}:", ""]
    lines += [f"{s:8.1f} s  {f}::{n}  ({o})" for f, n, s, o in sorted(cases, key=lambda c: -c[2])[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", type=Path, help=f"a JUnit XML (default: the newest in {REPORTS})")
    ap.add_argument("--top", type=int, default=25, help="slowest tests to list (default 25)")
    ap.add_argument("--timeline", type=Path, help="the run's CPU timeline (default: timeline-STAMP.jsonl "
                                                  "beside a pytest-STAMP.xml report, where there is one)")
    args = ap.parse_args(argv)
    path = args.report
    if path is None:
        try:
            found = sorted(REPORTS.glob("pytest-*.xml")) if REPORTS.is_dir() else []
        except OSError as exc:
            print(f"testrun: {REPORTS}: {exc.strerror}; name a JUnit XML", file=sys.stderr)
            return 2
        if not found:
            print(f"testrun: no report in {REPORTS}; run `make test` or name a JUnit XML", file=sys.stderr)
            return 2
        path = found[-1]
    try:
        print(report(path, args.top, args.timeline or timeline_of(path)))
    except (OSError, ValueError) as exc:
        print(f"testrun: {exc}; give the JUnit XML a pytest --junitxml run wrote", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
