#!/usr/bin/env python3
"""Time `build.py catalog` on fixture facts for every tag of matrix.yaml (no Docker).

    python bench/catalog.py [--runs N] [--packages N]

Makes a facts file in which every tag is built (the fixture facts of
tests/fixtures/catalog/facts.json, the GPU one for GPU tags, the CPU one for the rest,
each with N extra Python packages so the package lists are of a real image's size), then
runs the command N times in a subprocess, as a user runs it, and prints the wall time of
each run (median, min, max, in seconds) and the site's size.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stagecraft.expand import expand  # noqa: E402
from stagecraft.matrix import load_matrix  # noqa: E402


def all_facts(packages: int) -> dict:
    """The facts file: every matrix tag built (from the two fixture tags)."""
    fixture = json.loads((ROOT / "tests" / "fixtures" / "catalog" / "facts.json").read_text())
    cpu, gpu = fixture["tags"]["2.6.2-cpu"], fixture["tags"]["2.6.0-gpu-cuda11.8-cudnn8.6"]
    tags = {}
    for spec in expand(load_matrix(ROOT / "matrix.yaml")):
        f = copy.deepcopy(gpu if spec.framework["device"] == "nvidia" else cpu)
        f["images"][0]["inventory"]["python"] += [{"name": f"pkg{i}", "version": f"1.{i}.0"} for i in range(packages)]
        tags[spec.tag] = f
    return {"schema": 1, "tags": tags}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--packages", type=int, default=300, help="extra Python packages per image (default 300)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        facts = Path(tmp) / "facts.json"
        facts.write_text(json.dumps(all_facts(args.packages)))
        env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
        times = []
        for _ in range(args.runs):
            start = time.monotonic()
            cp = subprocess.run([sys.executable, str(ROOT / "build.py"), "catalog", "-o", f"{tmp}/site",
                                 "--facts", str(facts)], cwd=ROOT, env=env, capture_output=True, text=True)
            times.append(time.monotonic() - start)
            if cp.returncode:
                print(cp.stderr, file=sys.stderr)
                return 1
        size = sum(p.stat().st_size for p in Path(tmp, "site").rglob("*") if p.is_file())
        print(cp.stdout.strip())
        print(f"build.py catalog, {args.runs} runs: median {statistics.median(times):.2f} s, "
              f"min {min(times):.2f} s, max {max(times):.2f} s; site {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
