"""Where a `make test` run's time went, from its JUnit report (issue 23 item 5).

`make test` keeps each run's report under /var/lib/stagecraft/test-reports (the
Makefile's TEST_REPORTS), so a CI run's figures outlive its clone. This prints, for one
report (default: the newest there), the run's wall time as pytest measured it, the
seconds per test file (set-up, call and tear-down of its tests: a session fixture's
build counts in the first test that asked for it), and the slowest tests.

    python bench/testrun.py [REPORT.xml] [--top 25]

Exit 2 with a one-line message when the report is missing or is not a JUnit report.
"""

from __future__ import annotations

import argparse
import collections
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


def report(path: Path, top: int) -> str:
    """The text this script prints for ``path`` (see the module docstring)."""
    attrs, cases = load(path)
    outcomes = collections.Counter(c[3] for c in cases)
    per_file: dict[str, float] = collections.defaultdict(float)
    for file, _, seconds, _ in cases:
        per_file[file] += seconds
    total = float(attrs.get("time") or 0)
    lines = [f"{path.name}: {len(cases)} tests ({', '.join(f'{n} {k}' for k, n in outcomes.most_common())}), "
             f"{total:.0f} s ({total / 60:.1f} min), started {attrs.get('timestamp', '?')}", "",
             "| test file | s | share |", "|---|---:|---:|"]
    lines += [f"| {f} | {s:.0f} | {100 * s / total if total else 0:.1f} % |"
              for f, s in sorted(per_file.items(), key=lambda kv: -kv[1])]
    lines += ["", f"slowest {top}:", ""]
    lines += [f"{s:8.1f} s  {f}::{n}  ({o})" for f, n, s, o in sorted(cases, key=lambda c: -c[2])[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", type=Path, help=f"a JUnit XML (default: the newest in {REPORTS})")
    ap.add_argument("--top", type=int, default=25, help="slowest tests to list (default 25)")
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
        print(report(path, args.top))
    except (OSError, ValueError) as exc:
        print(f"testrun: {exc}; give the JUnit XML a pytest --junitxml run wrote", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
