#!/usr/bin/env python3
"""Do the kernel sets only help? The same CPU workload through the entrypoint and with it
bypassed, and under a one-CPU quota.

    python bench/cpu_dispatch.py [--image REF] [--rounds N] [--iters N] [--docker PATH]

Workload: bench/cpu_workload.py (ResNet-18 through Paddle Inference with oneDNN, fp32
and bfloat16; a dygraph paddle.matmul (MKL); a numpy matmul (OpenBLAS)), mounted
read-only into the image. Variants, each a fresh container, interleaved round by round
in rotated order so that drift on a shared host hits all alike:

- ``entrypoint``: ``docker run IMAGE python cpu_workload.py`` (the kernel set the
  entrypoint chooses, its environment);
- ``bypass``: ``docker run --entrypoint python IMAGE cpu_workload.py`` (no entrypoint:
  the libraries' and the framework's defaults);
- ``old-cap`` (reference, no entrypoint): the bypass with the environment the previous
  top kernel set exported, ONEDNN_MAX_CPU_ISA=AVX512_CORE MKL_ENABLE_INSTRUCTIONS=AVX512,
  to show what that cap cost on this CPU.
Then the thread-sizing case: ``entrypoint`` and ``bypass`` again under ``--cpus 1``.
Each variant also runs once with ONEDNN_VERBOSE=1 and MKL_VERBOSE=1, and the libraries'
own lines naming the ISA they dispatch to are kept (oneDNN's ``info,cpu,isa:`` line and
the implementation of its first convolution; MKL's version line).

Figures: per phase, the median over every timed iteration of every round (ms), of wall
time and of the process's CPU time (all its threads; on a shared host other jobs stretch
wall time but not the CPU time the work takes), and the ratio bypass / entrypoint (>= 1.0:
the entrypoint is not slower). Writes
bench/results/cpu_dispatch.json (every sample, the machine, the load) and prints tables.
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
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "bench" / "cpu_workload.py"
RESULTS = ROOT / "bench" / "results" / "cpu_dispatch.json"
OLD_CAP = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"}
IN_IMAGE = "/bench/cpu_workload.py"


def docker_args(docker: str, image: str, variant: str, cpus: str | None, env: dict[str, str]) -> list[str]:
    argv = [docker, "run", "--rm", "-v", f"{WORKLOAD}:{IN_IMAGE}:ro", "-e", "STAGECRAFT_QUIET=1"]
    if cpus:
        argv += ["--cpus", cpus]
    for k, v in env.items():
        argv += ["-e", f"{k}={v}"]
    if variant == "entrypoint":
        return argv + [image, "python", IN_IMAGE]
    return argv + ["--entrypoint", "python", image, IN_IMAGE]


def run_workload(argv: list[str], iters: int, phases: str) -> dict:
    cp = subprocess.run([*argv, "--iters", str(iters), "--phases", phases], capture_output=True, text=True,
                        timeout=1800, check=False)
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("CPU_WORKLOAD ")), None)
    if cp.returncode != 0 or line is None:
        raise SystemExit(f"workload failed ({cp.returncode}): {' '.join(argv)}\n{cp.stderr[-3000:]}")
    return json.loads(line.split(" ", 1)[1])


def verbose_lines(docker: str, image: str, variant: str, env: dict[str, str]) -> dict[str, str]:
    """The libraries' own lines: oneDNN's ISA line and first convolution, MKL's version."""
    argv = docker_args(docker, image, variant, None, {**env, "ONEDNN_VERBOSE": "1", "MKL_VERBOSE": "1"})
    cp = subprocess.run([*argv, "--iters", "1", "--phases", "infer_bf16,matmul"], capture_output=True,
                        text=True, timeout=1800, check=False)
    text = cp.stdout + cp.stderr
    out = {}
    for ln in text.splitlines():
        if "onednn_verbose,info,oneDNN" in ln and "version" not in out:
            out["version"] = ln.strip()
        if ",info,cpu,isa:" in ln and "onednn_isa" not in out:
            out["onednn_isa"] = ln.strip()
        if ",exec,cpu,convolution," in ln and "onednn_conv" not in out:
            out["onednn_conv"] = ",".join(ln.strip().split(",")[:6])
        if ln.startswith("MKL_VERBOSE Intel") and "mkl" not in out:
            out["mkl"] = ln.strip()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default="stagecraft/paddle:2.6.2-cpu")
    ap.add_argument("--rounds", type=int, default=5, help="containers per variant (default 5)")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations per phase and container")
    ap.add_argument("--docker", default=shutil.which("docker") or "/usr/bin/docker")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--skip-quota", action="store_true", help="leave out the --cpus 1 case")
    args = ap.parse_args()

    cases = {"dispatch": (None, ["entrypoint", "bypass", "old-cap"], "infer_fp32,infer_bf16,matmul,numpy")}
    if not args.skip_quota:
        cases["cpus1"] = ("1", ["entrypoint", "bypass"], "infer_fp32,matmul,numpy")
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "image": args.image,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "model": next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                                         .splitlines() if ln.startswith("model name")), "")},
              "load_before": os.getloadavg(), "rounds": args.rounds, "iters": args.iters, "cases": {}}
    for case, (cpus, variants, phases) in cases.items():
        samples: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
        cpu_samples: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
        meta: dict[str, dict] = {}
        for r in range(args.rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                env = OLD_CAP if v == "old-cap" else {}
                got = run_workload(docker_args(args.docker, args.image, "bypass" if v == "old-cap" else v,
                                               cpus, env), args.iters, phases)
                for phase, xs in got["samples"].items():
                    samples[v].setdefault(phase, []).extend(xs)
                for phase, xs in got["cpu_samples"].items():
                    cpu_samples[v].setdefault(phase, []).extend(xs)
                meta[v] = {"threads": got["threads"], "env": got["env"]}
                print(f"{case} round {r + 1}/{args.rounds} {v}: "
                      + ", ".join(f"{p} {got[p]:.1f} ms" for p in got["samples"]), file=sys.stderr)
        medians = {v: {p: round(statistics.median(xs), 2) for p, xs in ph.items()} for v, ph in samples.items()}
        cpu_medians = {v: {p: round(statistics.median(xs), 2) for p, xs in ph.items()}
                       for v, ph in cpu_samples.items()}
        ratio = {p: round(medians["bypass"][p] / medians["entrypoint"][p], 3) for p in medians["entrypoint"]}
        cpu_ratio = {p: round(cpu_medians["bypass"][p] / cpu_medians["entrypoint"][p], 3)
                     for p in cpu_medians["entrypoint"]}
        result["cases"][case] = {"cpus": cpus, "medians_ms": medians, "ratio_bypass_over_entrypoint": ratio,
                                 "cpu_medians_ms": cpu_medians, "cpu_ratio_bypass_over_entrypoint": cpu_ratio,
                                 "samples_ms": samples, "cpu_samples_ms": cpu_samples, "meta": meta}
    result["verbose"] = {v: verbose_lines(args.docker, args.image, "bypass" if v == "old-cap" else v,
                                          OLD_CAP if v == "old-cap" else {})
                         for v in ("entrypoint", "bypass", "old-cap")}
    result["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")

    for case, data in result["cases"].items():
        for label, med, rat in (("wall", "medians_ms", "ratio_bypass_over_entrypoint"),
                                ("process CPU", "cpu_medians_ms", "cpu_ratio_bypass_over_entrypoint")):
            print(f"\n{case} (--cpus {data['cpus'] or 'unlimited'}), {label} time, median ms over "
                  f"{args.rounds} containers x {args.iters} iterations:")
            variants = list(data[med])
            print("| phase | " + " | ".join(variants) + " | bypass / entrypoint |")
            print("|---|" + "---:|" * (len(variants) + 1))
            for phase in data[med]["entrypoint"]:
                print(f"| {phase} | " + " | ".join(f"{data[med][v][phase]:.1f}" for v in variants)
                      + f" | {data[rat][phase]:.3f} |")
    print("\nlibraries' own lines:")
    for v, lines in result["verbose"].items():
        for k, ln in lines.items():
            print(f"  {v:10s} {k}: {ln}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
