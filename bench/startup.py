#!/usr/bin/env python3
"""Start-up cost of the entrypoint: what `docker run IMAGE CMD` pays for probing.

    python bench/startup.py [--runs N] [--cpu-tag TAG] [--gpu-tag TAG] [--docker PATH]
                            [--baseline-tree DIR] [--tree DIR] [--skip-docker-run]
                            [--cases cpu,gpu8]

Two figures per image, both the median (and p90) over N runs, the two variants
interleaved (A B B A ...) so that drift on a busy host hits both alike:

- docker run: ``docker run --rm IMAGE true`` minus ``docker run --rm --entrypoint true
  IMAGE`` (wall time of the docker client, ms). The issue's definition; on a loaded host
  its noise (container create/start, hundreds of ms) dwarfs the entrypoint.
- in container: inside one container, ``tini -s -- stagecraft-entrypoint true`` minus
  ``true`` (wall time of the child process, ms): the same work without the engine's noise.
  Before each start (untimed) the report of the start before is removed, so that each
  finds what a new container has: no report to check and replace.

Images: the CPU image as is; the GPU image with the stand-in NVML
(tests/nvml_standin) bind-mounted over libnvidia-ml.so.1 and answering for 8 H200s
(tests/fixtures/nvml/h200x8.conf), so the NVIDIA probe queries 8 GPUs through the real
pynvml. Goals (issue 4): at most 40 ms on a CPU host, 60 ms with 8 GPUs.
With ``--baseline-tree DIR`` (a checkout of an earlier revision), the in-container measure
also times DIR's entrypoint/ and probes/ (byte-compiled by the image's Python, mounted
read-only) in the same container, interleaved: a regression check free of image and
engine differences. ``--tree DIR`` times DIR's entrypoint the same way in place of the
image's own (this checkout's change measured before any image is rebuilt).
Writes bench/results/startup.json (every sample, the machine, the load) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.nvml_standin import standin  # noqa: E402 - after the path set-up

CPU_TAG = "2.6.2-cpu"
GPU_TAG = "2.6.0-gpu-cuda11.8-cudnn8.6"
REPOSITORY = "stagecraft/paddle"
NVML_IN_IMAGE = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
NVML_CONF = ROOT / "tests" / "fixtures" / "nvml" / "h200x8.conf"
GOALS_MS = {"cpu": 40.0, "gpu8": 60.0}
ENTRYPOINT = "/opt/stagecraft/entrypoint/stagecraft-entrypoint"
RESULTS = ROOT / "bench" / "results" / "startup.json"

# Runs inside the image: interleaved child runs, wall ms each, as JSON on stdout.
IN_CONTAINER = r"""
import json, os, resource, subprocess, sys, time
n = int(sys.argv[1])
variants = {"with": ["/usr/bin/tini", "-s", "--", sys.argv[2], "true"], "without": ["true"]}
if len(sys.argv) > 3:  # a baseline tree mounted beside the entrypoint measured
    variants["baseline"] = ["/usr/bin/tini", "-s", "--", sys.argv[3], "true"]
out = {k: [] for k in variants}
cpu = {k: [] for k in variants}
def used():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
REPORTS = ["/run/stagecraft/report.json", f"/tmp/stagecraft-{os.getuid()}/report.json",
           f"/dev/shm/stagecraft-{os.getuid()}/report.json"]
def fresh():  # no report of an earlier start: each start begins as in a new container
    for p in REPORTS:
        for f in (os.remove, os.rmdir):
            try:
                f(p if f is os.remove else os.path.dirname(p))
            except OSError:
                pass
def once(argv):
    fresh()
    c0, t0 = used(), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1000, (used() - c0) * 1000
names = list(variants)
for _ in range(2):
    for k in names:
        once(variants[k])
for i in range(n):
    for k in names[i % len(names):] + names[:i % len(names)]:
        wall, c = once(variants[k])
        out[k].append(wall)
        cpu[k].append(c)
out["cpu"] = cpu
print(json.dumps(out))
"""
BASELINE_IN_IMAGE = "/opt/stagecraft-baseline"
TREE_IN_IMAGE = "/opt/stagecraft-tree"


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def summarise(with_ms: list[float], without_ms: list[float]) -> dict[str, object]:
    """Medians, p90s and the overhead (median with - median without), in ms."""
    diffs = [a - b for a, b in zip(with_ms, without_ms, strict=True)]
    r = lambda x: round(x, 1)  # noqa: E731
    return {"with_ms": [r(x) for x in with_ms], "without_ms": [r(x) for x in without_ms],
            "median_with_ms": r(statistics.median(with_ms)),
            "median_without_ms": r(statistics.median(without_ms)),
            "p90_with_ms": r(pct(with_ms, 90)), "p90_without_ms": r(pct(without_ms, 90)),
            "overhead_median_ms": r(statistics.median(with_ms) - statistics.median(without_ms)),
            "overhead_p90_ms": r(pct(with_ms, 90) - pct(without_ms, 90)),
            "paired_diff_median_ms": r(statistics.median(diffs))}


def docker_run_samples(docker: str, ref: str, flags: list[str], n: int) -> dict[str, object]:
    """Interleaved `docker run --rm [flags] IMAGE true` and the same with --entrypoint true."""
    with_ep = [docker, "run", "--rm", *flags, ref, "true"]
    without = [docker, "run", "--rm", *flags, "--entrypoint", "true", ref]

    def once(argv: list[str]) -> float:
        t0 = time.perf_counter()
        cp = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300, check=False)
        ms = (time.perf_counter() - t0) * 1000
        if cp.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {cp.returncode}: {cp.stderr.decode()[-500:]}")
        return ms

    for _ in range(2):  # warm-up: page cache, overlay mounts
        once(with_ep)
        once(without)
    w: list[float] = []
    wo: list[float] = []
    for i in range(n):
        order = (True, False) if i % 2 == 0 else (False, True)
        for use_ep in order:
            (w if use_ep else wo).append(once(with_ep if use_ep else without))
    return summarise(w, wo)


def in_container_samples(docker: str, ref: str, flags: list[str], n: int,
                         baseline: Path | None = None, tree: Path | None = None) -> dict[str, object]:
    """In one container, the entrypoint (the image's own, or ``tree``'s prepared copy) vs
    `true` (and, with ``baseline``, the baseline tree's entrypoint, run against the same
    image, interleaved with the other two)."""
    extra: list[str] = []
    args = [str(n), ENTRYPOINT]
    if tree is not None:
        extra += ["-v", f"{tree}:{TREE_IN_IMAGE}:ro"]
        args[1] = f"{TREE_IN_IMAGE}/entrypoint/stagecraft-entrypoint"
    if baseline is not None:
        extra += ["-v", f"{baseline}:{BASELINE_IN_IMAGE}:ro"]
        args.append(f"{BASELINE_IN_IMAGE}/entrypoint/stagecraft-entrypoint")
    argv = [docker, "run", "--rm", *flags, *extra, "--entrypoint", "python3", ref, "-c", IN_CONTAINER, *args]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if cp.returncode != 0:
        raise SystemExit(f"in-container run failed ({cp.returncode}): {cp.stderr[-800:]}")
    data = json.loads(cp.stdout.strip().splitlines()[-1])
    out = summarise(data["with"], data["without"])
    # CPU time of the child (user + system, getrusage): what the start costs in work, which
    # other jobs on a shared host cannot stretch as they stretch wall time.
    out["cpu_median_with_ms"] = round(statistics.median(data["cpu"]["with"]), 1)
    out["cpu_median_without_ms"] = round(statistics.median(data["cpu"]["without"]), 1)
    if baseline is not None:
        out["cpu_median_baseline_ms"] = round(statistics.median(data["cpu"]["baseline"]), 1)
        base = summarise(data["baseline"], data["without"])
        out["baseline"] = base
        out["vs_baseline_median_ms"] = round(out["overhead_median_ms"] - base["overhead_median_ms"], 1)
    return out


def prepare_tree(docker: str, ref: str, tree: Path, tmp: str) -> Path:
    """A copy of ``tree``'s entrypoint/ and probes/, byte-compiled by the image's own
    Python (as the image build does for its own copy), to mount in the image (BASELINE_IN_IMAGE,
    TREE_IN_IMAGE)."""
    dest = Path(tmp) / "baseline"
    for part in ("entrypoint", "probes"):
        shutil.copytree(tree / part, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    cp = subprocess.run([docker, "run", "--rm", "--user", "0", "-v", f"{dest}:/b", "--entrypoint", "python3", ref,
                         "-m", "compileall", "-q", "/b"], capture_output=True, text=True, timeout=300, check=False)
    if cp.returncode != 0:
        raise SystemExit(f"compiling the baseline failed: {cp.stderr[-500:]}")
    subprocess.run(["chmod", "-R", "a+rX", str(dest)], check=True)
    return dest


def machine(docker: str) -> dict[str, object]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ver = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"], capture_output=True,
                         text=True, check=False).stdout.strip()
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "docker_server": ver, "docker_client": docker, "loadavg_start": list(os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--runs", type=int, default=25, help="measured runs per variant (default 25)")
    ap.add_argument("--cpu-tag", default=CPU_TAG)
    ap.add_argument("--gpu-tag", default=GPU_TAG)
    ap.add_argument("--repository", default=REPOSITORY)
    ap.add_argument("--docker", default=shutil.which("docker") or "/usr/bin/docker",
                    help="docker client (default: the first on PATH)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--baseline-tree", type=Path, default=None,
                    help="a source tree (e.g. `git archive REV`) whose entrypoint/ and probes/ are "
                         "also timed in the same containers: a regression check")
    ap.add_argument("--tree", type=Path, default=None,
                    help="a source tree whose entrypoint/ and probes/ are timed in place of the "
                         "image's own (in-container measure only)")
    ap.add_argument("--skip-docker-run", action="store_true", help="only the in-container measure")
    ap.add_argument("--cases", default="cpu,gpu8", help="which images, of cpu,gpu8 (default both)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="stagecraft-bench-") as tmp:
        lib = standin.build(tmp)
        lib.chmod(0o755)
        gpu_flags = ["-v", f"{lib}:{NVML_IN_IMAGE}:ro", "-v", f"{NVML_CONF}:/etc/stagecraft-bench/nvml.conf:ro",
                     "-e", "STAGECRAFT_NVML_CONFIG=/etc/stagecraft-bench/nvml.conf"]
        cases = {"cpu": (f"{args.repository}:{args.cpu_tag}", []),
                 "gpu8": (f"{args.repository}:{args.gpu_tag}", gpu_flags)}
        result: dict[str, object] = {
            "command": "python bench/startup.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(args.docker), "runs": args.runs, "goals_ms": GOALS_MS, "cases": {}}
        t0 = time.monotonic()
        wanted = [c for c in args.cases.split(",") if c]
        if not wanted or set(wanted) - set(cases):
            ap.error(f"--cases {args.cases!r}: name some of {', '.join(cases)}")
        for name, (ref, flags) in ((n, cases[n]) for n in wanted):
            print(f"{name}: {ref} ({args.runs} runs per variant) ...", file=sys.stderr, flush=True)
            check = subprocess.run([args.docker, "run", "--rm", *flags, ref, "true"], capture_output=True,
                                   text=True, timeout=300, check=False)
            base = prepare_tree(args.docker, ref, args.baseline_tree, tempfile.mkdtemp(dir=tmp)) \
                if args.baseline_tree else None
            tree = prepare_tree(args.docker, ref, args.tree, tempfile.mkdtemp(dir=tmp)) if args.tree else None
            result["cases"][name] = {  # type: ignore[index]
                "ref": ref, "flags": flags, "line": check.stderr.strip(),
                "tree": str(args.tree) if args.tree else None,
                "docker_run": None if args.skip_docker_run else docker_run_samples(args.docker, ref, flags, args.runs),
                "in_container": in_container_samples(args.docker, ref, flags, args.runs, base, tree)}
        result["seconds"] = round(time.monotonic() - t0, 1)
        result["machine"]["loadavg_end"] = list(os.getloadavg())  # type: ignore[index]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


def table(result: dict) -> str:
    rows = [f"{'case':<6} {'measure':<13} {'with med':>9} {'w/o med':>9} {'overhead med':>13} "
            f"{'with p90':>9} {'w/o p90':>9} {'goal':>6}  met"]
    for name, c in result["cases"].items():
        goal = result["goals_ms"][name]
        for m in ("docker_run", "in_container"):
            s = c[m]
            if s is None:
                continue
            met = "yes" if s["overhead_median_ms"] <= goal else "NO"
            rows.append(f"{name:<6} {m:<13} {s['median_with_ms']:>9.1f} {s['median_without_ms']:>9.1f} "
                        f"{s['overhead_median_ms']:>13.1f} {s['p90_with_ms']:>9.1f} {s['p90_without_ms']:>9.1f} "
                        f"{goal:>6.0f}  {met}")
        base = c["in_container"].get("baseline")
        if base:
            rows.append(f"{name:<6} {'baseline':<13} {base['median_with_ms']:>9.1f} {base['median_without_ms']:>9.1f} "
                        f"{base['overhead_median_ms']:>13.1f} {base['p90_with_ms']:>9.1f} {base['p90_without_ms']:>9.1f} "
                        f"{goal:>6.0f}  (this tree {c['in_container']['vs_baseline_median_ms']:+.1f} ms)")
        ic = c["in_container"]
        rows.append(f"{name:<6} {'CPU time':<13} {ic['cpu_median_with_ms']:>9.1f} {ic['cpu_median_without_ms']:>9.1f}"
                    + (f"   baseline {ic['cpu_median_baseline_ms']:.1f}" if "cpu_median_baseline_ms" in ic else ""))
    return "\n".join(rows) + "\n(ms; overhead = median with - median without)"


if __name__ == "__main__":
    sys.exit(main())
