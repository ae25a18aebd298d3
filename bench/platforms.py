"""Build time and size per platform of multi-platform images (issue 12).

Runs `python3 build.py --tag TAG ... --json` (extra arguments pass through: `--platform`,
`--repository`, `--state-dir`) or reads such a report (`--report FILE`), and prints, per
image and platform: the seconds each stage took to build (cached stages: 0, marked), their
sum, and the image's size as the engine reports it (Docker 20.10: unpacked bytes; the
containerd image store: content, i.e. compressed, bytes). The numbers go into
BENCHMARKS.md with the command that produced them.

    python3 bench/platforms.py --tag 3.2.2-cpu      (one tag per run: stages are grouped by platform)
    python3 bench/platforms.py --report .stagecraft/last.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def summarise(report: dict) -> list[dict]:
    """One row per (tag, platform): stages ``[(stage, status, seconds)]``, ``built_s``
    (sum of built stages' seconds), ``size`` (bytes)."""
    rows = []
    by_key = {s["key"]: s for s in report["stages"]}
    for image in report["images"]:
        for platform, one in image.get("platforms", {}).items():
            stages = [s for s in by_key.values() if s.get("platform") == platform]
            rows.append({"tag": image["tag"], "platform": platform,
                         "stages": [(s["stage"], s["status"], round(s["seconds"], 1)) for s in stages],
                         "built_s": round(sum(s["seconds"] for s in stages if s["status"] == "built"), 1),
                         "size": one["size"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", help="a `build.py --json` report to summarise instead of building")
    args, rest = p.parse_known_args(argv)
    if args.report:
        report = json.loads(Path(args.report).read_text())
    else:
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), *rest, "--json"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            return proc.returncode
        report = json.loads(proc.stdout)
    print("| tag | platform | stages (status, s) | built s | size |")
    print("|-----|----------|--------------------|--------:|-----:|")
    for r in summarise(report):
        stages = ", ".join(f"{n} {st} {sec}" for n, st, sec in r["stages"])
        print(f"| {r['tag']} | {r['platform']} | {stages} | {r['built_s']} | {r['size'] / 1e6:.0f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
