#!/usr/bin/env python3
"""What a run fetched more than once (issue 23 item 4): reads the stage logs a run kept
(BuildKit's plain progress, ``<state>/logs/*.log``) and counts pip's ``Downloading
NAME.whl (SIZE)`` and apt's ``Get:N URL SUITE/COMPONENT NAME ARCH VERSION [SIZE]`` lines:
the wheels and .debs, how many fetches, their megabytes (as pip and apt print them: 1 MB
= 10^6 bytes), and how many of those were a second fetch of the same file; and apt's
package-index downloads (``Packages``, ``Translation``). It builds nothing.

    python bench/refetch.py --logs .stagecraft/logs [--logs ...]

A stage's log is that of its last build (the state directory keeps one log per stage
key), so a stage built by two engines counts once: the figures are a floor on what a
run fetched twice.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

UNITS = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}
WHEEL = re.compile(r"Downloading (\S+\.whl) \(([\d.]+) (kB|MB|GB)\)")
DEB = re.compile(r"Get:\d+ \S+ \S+ \S+ (\S+) (\S+) (\S+) \[([\d.]+) (B|kB|MB)\]")
INDEX = re.compile(r"Get:\d+ (\S+ \S+ (?:\S+ )?(?:Packages|Translation-\S+)) \[([\d.]+) (B|kB|MB)\]")
MAX_LINE = 64 * 1024  # a log line read: longer ones are cut


def count(logs: list[Path]) -> dict[str, tuple[int, int, float, float]]:
    """Per kind (``wheels``, ``debs``, ``indexes``): (distinct files, fetches, MB fetched,
    MB fetched again). Reads each ``*.log`` under ``logs`` line by line (lines cut at
    ``MAX_LINE`` characters)."""
    fetched: dict[str, Counter] = {"wheels": Counter(), "debs": Counter(), "indexes": Counter()}
    size: dict[tuple[str, object], float] = {}
    for folder in logs:
        for log in sorted(folder.glob("*.log")):
            with open(log, encoding="utf-8", errors="replace") as f:
                for line in iter(lambda: f.readline(MAX_LINE), ""):
                    if m := WHEEL.search(line):
                        key: object = m.group(1).rsplit("/", 1)[-1]
                        kind, mb = "wheels", float(m.group(2)) * UNITS[m.group(3)]
                    elif m := INDEX.search(line):
                        key, kind, mb = m.group(1), "indexes", float(m.group(2)) * UNITS[m.group(3)]
                    elif m := DEB.search(line):
                        key, kind = (m.group(1), m.group(2), m.group(3)), "debs"
                        mb = float(m.group(4)) * UNITS[m.group(5)]
                    else:
                        continue
                    fetched[kind][key] += 1
                    size[(kind, key)] = mb
    out = {}
    for kind, c in fetched.items():
        total = sum(size[(kind, k)] * n for k, n in c.items())
        again = sum(size[(kind, k)] * (n - 1) for k, n in c.items())
        out[kind] = (len(c), sum(c.values()), total, again)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, action="append", required=True, help="a state directory's logs/")
    args = ap.parse_args()
    print("| what | distinct | fetches | MB fetched | MB fetched again |")
    print("|---|---:|---:|---:|---:|")
    for kind, (distinct, fetches, total, again) in count(args.logs).items():
        print(f"| {kind} | {distinct} | {fetches} | {total:,.0f} | {again:,.0f} |")


if __name__ == "__main__":
    main()
