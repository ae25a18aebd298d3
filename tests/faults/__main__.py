"""The fault-injection suite (issue 24): ``python -m tests.faults --faults N --seed S``.

Drives real builds of the small ``six`` project (``--project real``: ``2.6.2-cpu`` of this
checkout's matrix, for the slow paths) on the suite's own engine (tests/faults/rig.py),
injects ``N`` faults of the five kinds in turn, each at an
instant drawn from ``random.Random(SEED)`` (the seed is printed first: rerun with it),
checks the invariants after each fault and after the run that follows it
(tests/faults/trials.py), and writes one JSON line per trial to ``--out`` as it goes,
then a table per kind: trials, violations, recoveries. Exit 0 when no trial found a
violation, 1 otherwise, 2 for bad arguments. Needs root (a loop device, a tmpfs, nsenter)
and the host's Docker engine (`make setup`). ``make faults`` runs it with 500 faults.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import signal
import sys
import time
from pathlib import Path

from tests.faults.rig import PROJECTS, Rig, load_json_lines
from tests.faults.trials import KINDS, calibrate, trial


def variant_counts(outcomes: list[dict]) -> str:
    """``"11 SIGINT build, 9 SIGKILL build.py alone build, ..."``: the trials per variant,
    most first, a variant's drawn numbers (the engine's time down, the bytes left free)
    and "(no --test)" left out."""
    names = [re.sub(r", down [\d.]+s| \(no --test\)|, \d+ B free", "", o["variant"]).strip()
             for o in outcomes]
    return ", ".join(f"{n} {name}" for name, n in collections.Counter(names).most_common())


def table(outcomes: list[dict]) -> str:
    """Markdown table: kind, trials, struck, violations, recovered, seconds, variants."""
    rows = ["| fault kind | trials | fault struck mid-run | with a violation | recovered (next run green) "
            "| seconds | variants |", "|---|---:|---:|---:|---:|---:|---|"]

    def row(name: str, mine: list[dict], variants: bool = True) -> str:
        return (f"| {name} | {len(mine)} | {sum(o.get('struck', True) for o in mine)} | "
                f"{sum(bool(o['violations']) for o in mine)} | {sum(o['recovered'] for o in mine)} | "
                f"{sum(o['seconds'] for o in mine):.0f} | {variant_counts(mine) if variants else ''} |")

    rows += [row(kind, [o for o in outcomes if o["kind"] == kind]) for kind in KINDS
             if any(o["kind"] == kind for o in outcomes)]
    rows.append(row("all", outcomes, variants=False))
    return "\n".join(rows)


def where(met: str) -> str:
    """The part of a run a fault fell in, from the last line it had said before
    (``Outcome.met``): ``stage runtime`` (a stage's build: its "[n/N] runtime@key" line
    or one of its steps), ``push``, ``after the push`` (its summary said), ``planning``
    (the run's first line said), ``tagging``, ``base bootstrap`` (debootstrap or the
    import of its root file system), ``base``; else the line's first word,
    numbers as N."""
    line = met.strip()
    if not line or line == "(nothing said yet)":
        return "(nothing said yet)"
    if m := re.match(r"(?:\[\d+/\d+\] )?([\w.-]+)@[0-9a-f]{6,} ", line):
        return f"stage {m.group(1)}"
    if line.startswith(("pushing ", "alias ", "index ")) or re.match(r"sha256:[0-9a-f]+ verified", line):
        return "push"
    if re.match(r"\d+/\d+ image\(s\) pushed", line):  # the push's summary: the run's end
        return "after the push"
    if line.startswith("stagecraft: "):  # the plan's first line
        return "planning"
    if re.match(r"base [\w.-]+: debootstrap ", line):  # a cold base: debootstrap, then its import
        return "base bootstrap"
    words = re.sub(r"\d+", "N", line).split()
    return words[0]


def where_table(outcomes: list[dict]) -> str:
    """Markdown table of the struck timed faults by ``where`` they fell, most first; ""
    when no outcome says (lines written before ``met`` existed)."""
    places = collections.Counter(where(o["met"]) for o in outcomes if o.get("met"))
    if not places:
        return ""
    rows = ["| where the fault fell (what the run had said last) | faults |", "|---|---:|"]
    return "\n".join(rows + [f"| {name} | {n} |" for name, n in places.most_common()])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", type=int, default=10, help="trials (default 10)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {','.join(KINDS)}")
    ap.add_argument("--out", type=Path, default=Path("faults.jsonl"), help="JSON lines, one per trial")
    ap.add_argument("--work", type=Path, default=None,
                    help="the project, scratch and state mount (reused between suite runs; default: "
                         "/var/lib/stagecraft/<the project's engine>/work)")
    ap.add_argument("--project", choices=sorted(PROJECTS), default="six",
                    help="six (default: the small matrix, every phase) or real (2.6.2-cpu of this "
                         "checkout's matrix: the slow paths); each on an engine of its own")
    ap.add_argument("--cold-base", type=float, default=0.1, metavar="SHARE",
                    help="the share of trials (but the registry kind's) that start from a cold base: "
                         "the bootstrapped base and the base stage removed, the fault drawn over the "
                         "bootstrap too (default 0.1; 0 skips the cold calibration run)")
    ap.add_argument("--minutes", type=float, default=0, help="stop starting trials after this many minutes")
    ap.add_argument("--table", type=Path, nargs="+", metavar="JSONL",
                    help="print the table of these runs' JSON lines (one seed per file or many) and exit; "
                         "runs nothing")
    args = ap.parse_args(argv)
    if args.table:
        try:
            outcomes = [o for path in args.table for o in load_json_lines(path, strict=True)]
        except (OSError, ValueError) as exc:
            print(f"faults: --table: {exc}; give the JSON lines files a suite run wrote (--out)",
                  file=sys.stderr)
            return 2
        seeds = sorted({o.get("seed") for o in outcomes}, key=str)
        # Lines of runs before --project existed are of the six project.
        projects = sorted({o.get("project", "six") for o in outcomes})
        print(f"{len(outcomes)} trial(s), seed(s) {', '.join(map(str, seeds))}, project(s) {', '.join(projects)}")
        print(table(outcomes))
        print(where_table(outcomes))
        return 0
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or args.faults < 1 or not 0 <= args.cold_base <= 1:
        print(f"faults: --kinds {unknown} unknown (known: {', '.join(KINDS)}), --faults < 1 or "
              "--cold-base outside 0..1",
              file=sys.stderr)
        return 2
    # A SIGTERM (or a SIGINT a background start ignored) still takes the rig down: the
    # state mount, the proxy and the registry go with ``finally``.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"faults: seed {seed}, {args.faults} trial(s) of {', '.join(kinds)} on the {args.project} project",
          flush=True)
    rng = random.Random(seed)
    # Cold base trials drawn apart, so that the seed's other draws do not move with them.
    cold_rng = random.Random(f"{seed} cold base")
    project = PROJECTS[args.project]
    rig = Rig(args.work or project.disk_dir / "work", project)
    t_up = time.monotonic()
    rig.up()
    outcomes: list[dict] = []
    t_end = time.monotonic() + args.minutes * 60 if args.minutes else None
    try:
        t_cal = time.monotonic()
        cal = calibrate(rig, cold=args.cold_base > 0 and any(k != "registry" for k in kinds))
        print(f"faults: undisturbed runs: {', '.join(f'{k} {v:.1f}s' for k, v in cal.items())} "
              f"(set-up {t_cal - t_up:.0f}s, calibration {time.monotonic() - t_cal:.0f}s)", flush=True)
        with open(args.out, "a") as out:
            for i in range(args.faults):
                if t_end and time.monotonic() > t_end:
                    print(f"faults: --minutes {args.minutes} reached after {i} trial(s)", flush=True)
                    break
                kind = kinds[i % len(kinds)]
                o = trial(rig, i, kind, rng, cal, cold=cold_rng.random() < args.cold_base).to_json()
                o["seed"], o["project"] = seed, args.project
                outcomes.append(o)
                out.write(json.dumps(o) + "\n")
                out.flush()
                mark = "ok" if not o["violations"] else "VIOLATION " + "; ".join(o["violations"])
                mark += "" if o["struck"] else " (ended before the instant)"
                print(f"[{i + 1}/{args.faults}] {kind:<10} {o['variant']:<34} t={o['instant']:6.2f}s "
                      f"rc={o['fault_rcs']} -> {o['recovery_rc']} {o['seconds']:5.1f}s {mark}", flush=True)
    finally:
        rig.down()
    print(table(outcomes))
    print(where_table(outcomes))
    return 0 if all(not o["violations"] for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
