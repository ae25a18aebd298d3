#!/usr/bin/env python3
"""Runner simulation: do stage caches really cross CI runners?

    python bench/runner_cache.py [--tags T1,T2,...] [--jobs 2] [--kind registry|local]

A "runner" is the modern engine (Docker 26.1 + buildx 0.13.1, containerd image store;
scripts/modern-engine.sh) of its own container `stagecraft-bench`, reset to a fresh state
before each run: no images, no build cache. What runners share is the cache location: the
registry in that engine's network namespace (127.0.0.1:5000, kept across resets), under a
repository new to this benchmark run, or a new directory on the host (`--kind local`).
Every run is the same CI command: `build.py --tag ... --cache-from LOC --cache-to LOC`.

  A. a fresh runner builds the tags (nothing in the cache yet: a cold build) and exports;
  B. a fresh runner builds the same tags importing A's caches;
  C. one template edited (a RUN step added to the runtime template, before `USER`), then a
     fresh runner builds again: the runtime stages and their dependants get new keys and
     take their unchanged steps from their line's cache.

Works on a copy of the project (git ls-files) in a scratch directory; the default tags
are every CPU image of the matrix this host can build, on its own platform. Prints a
table and writes bench/results/runner_cache.json (every stage of every run, the RUN
steps each ran or took from cache, load averages). Times include everything a runner
pays: the base taken from the cache or bootstrapped, imports, exports, unpacking.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENGINE = "stagecraft-bench"


def fresh_runner() -> dict[str, str]:
    """Reset the bench engine (new data volume, registry kept); its variables."""
    env = {**os.environ, "STAGECRAFT_MODERN_NAME": ENGINE}
    script = ROOT / "scripts" / "modern-engine.sh"
    up = subprocess.run(["bash", str(script), "reset"], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"the bench engine did not start: {up.stderr[-2000:]}")
    out = subprocess.run(["bash", str(script), "env"], env=env, capture_output=True, text=True,
                         check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def copy_project(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                           text=True).stdout.split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def default_tags() -> list[str]:
    from stagecraft.cabundle import find_ca_bundle
    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.preflight import unreachable

    specs = expand(load_matrix(ROOT / "matrix.yaml"))
    cpu = [s for s in specs if s.framework.get("device") == "cpu"]
    skipped = unreachable(cpu, find_ca_bundle())
    return [s.tag for s in cpu if s.tag not in skipped]


def run(project: Path, tags: list[str], jobs: int, location: str) -> dict:
    env = {**os.environ, **{k: v for k, v in fresh_runner().items() if k in ("DOCKER_HOST", "DOCKER_CONFIG")}}
    from stagecraft.platforms import host_platform

    # Each run's stage logs are kept (the results name them): what BuildKit printed for a
    # step counted as run can be read afterwards.
    state = Path(tempfile.mkdtemp(prefix="stagecraft-runner-bench-state-"))
    argv = [sys.executable, "build.py", "--json", "--jobs", str(jobs), "--platform", host_platform(),
            "--repository", "bench/runner", "--cache-from", location, "--cache-to", location,
            "--state-dir", str(state)]
    for t in tags:
        argv += ["--tag", t]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"build failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    stages = [{"stage": s["stage"], "key": s["key"][:12], "status": s["status"],
               "seconds": round(s["seconds"], 1), "run_executed": s["run_executed"],
               "run_cached": s["run_cached"], "cache": s["cache"], "log": s["log"]}
              for s in report["stages"]]
    return {"seconds": round(seconds, 1), "loadavg_1m_start": round(load, 2),
            "run_executed": sum(s["run_executed"] for s in stages),
            "run_cached": sum(s["run_cached"] for s in stages),
            "stages_built": sum(s["status"] == "built" for s in stages),
            "warnings": report.get("warnings", []),
            "base": [ln for ln in proc.stderr.splitlines() if ln.startswith("base ")],
            "stages": stages}


def edit_runtime(project: Path, marker: str) -> None:
    path = project / "templates" / "runtime.Dockerfile.j2"
    text = path.read_text()
    assert "\nUSER 1000\n" in text, "the runtime template has no USER 1000 line to edit before"
    path.write_text(text.replace("\nUSER 1000\n", f"\nRUN echo {marker} > /etc/stagecraft/bench-edit\nUSER 1000\n", 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tags", help="comma-separated (default: every CPU image buildable here)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kind", choices=("registry", "local"), default="registry")
    args = ap.parse_args()
    tags = args.tags.split(",") if args.tags else default_tags()
    run_id = uuid.uuid4().hex[:10]
    results: dict = {"tags": tags, "jobs": args.jobs, "kind": args.kind, "machine": f"{os.cpu_count()} CPUs",
                     "engine": "Docker 26.1.5 + buildx 0.13.1, containerd image store (scripts/modern-engine.sh)",
                     "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="stagecraft-runner-bench-") as tmp:
        project = copy_project(Path(tmp) / "project")
        if args.kind == "registry":
            location = f"type=registry,ref=127.0.0.1:5000/bench/cache-{run_id}"
        else:
            location = f"type=local,dir={Path(tmp) / 'cache'}"
        results["location"] = location
        for name in ("A", "B"):
            results[name] = run(project, tags, args.jobs, location)
            r = results[name]
            print(f"{name}: {r['seconds']:.1f} s, {r['stages_built']} stages built, RUN steps: "
                  f"{r['run_executed']} ran, {r['run_cached']} from cache (load {r['loadavg_1m_start']})",
                  flush=True)
        edit_runtime(project, run_id)
        results["C"] = run(project, tags, args.jobs, location)
        r = results["C"]
        print(f"C (runtime template edited): {r['seconds']:.1f} s, RUN steps: {r['run_executed']} ran, "
              f"{r['run_cached']} from cache", flush=True)
    results["B_over_A"] = round(results["B"]["seconds"] / results["A"]["seconds"], 3)
    results["C_over_A"] = round(results["C"]["seconds"] / results["A"]["seconds"], 3)
    print(f"B/A = {results['B_over_A']:.3f} (goal <= 0.2); C/A = {results['C_over_A']:.3f}")
    out = ROOT / "bench" / "results" / f"runner_cache_{args.kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
