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
# A report of a full run is about 2 MB; more than this is not one of ours.
MAX_BYTES = 64 * 1024 * 1024


def load(path: Path) -> tuple[dict, list[tuple[str, str, float, str]]]:
    """The report's suite attributes and its test cases as (file, name, seconds, outcome).
    Raises OSError (unreadable), ValueError (too big, not XML, no testsuite)."""
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES} bytes, not a test report")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not XML ({exc})") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError(f"{path}: no <testsuite>: not a JUnit report")
    cases = []
    for case in suite.iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        module = case.get("classname", "").split(".")
        file = "/".join(module[:3]) + ".py" if len(module) >= 3 else case.get("classname", "?")
        cases.append((file, case.get("name", "?"), float(case.get("time") or 0), outcome))
    return dict(suite.attrib), cases


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
        found = sorted(REPORTS.glob("pytest-*.xml")) if REPORTS.is_dir() else []
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
