#!/usr/bin/env python3
"""Matrix-scale build benchmark: stagecraft vs plain `docker build`, measured in one run.

    python bench/build_bench.py [--tags 2.6.2-cpu,3.3.1-cpu-debian12,3.3.1-cpu-debian13] [--jobs 2]

Works on a copy of this project in a scratch directory, so nothing here is touched. Each
scenario gets a fresh BuildKit cache scope by an `ENV STAGECRAFT_BENCH_RUN=<uuid>` line
at the top of the base template (every later step's cache key changes; the bootstrapped
Debian base images, made once per host, are shared by both sides). Scenarios:

  a. cold build of the tags: stagecraft (`--jobs N`) vs each tag's rendered Dockerfile
     built with plain `DOCKER_BUILDKIT=1 docker build`, one after another;
  b. no-op rebuild with nothing changed: stagecraft vs the same plain builds (warm cache);
  c. one runtime-template edit (an ENV line before the framework install): what
     stagecraft rebuilds, and its time vs plain builds of the runtime stage alone.

Prints a table and writes bench/results/build.json. Figures on shared machines are
noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DOCKER = os.environ.get("STAGECRAFT_DOCKER", "/usr/bin/docker")


def sh(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    dt = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return dt, proc


def copy_project(dest: Path) -> Path:
    for name in ("build.py", "matrix.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("stagecraft", "templates", "entrypoint", "probes", "tests"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def set_run(project: Path, run_id: str, edit: str = "") -> None:
    """Fresh cache scope for a scenario (`run_id`), optionally a runtime-template edit."""
    base = project / "templates" / "base.Dockerfile.j2"
    text = (ROOT / "templates" / "base.Dockerfile.j2").read_text()
    base.write_text(f"ENV STAGECRAFT_BENCH_RUN={run_id}\n{text}")
    rt = project / "templates" / "runtime.Dockerfile.j2"
    text = (ROOT / "templates" / "runtime.Dockerfile.j2").read_text()
    if edit:
        text = text.replace("ENV VIRTUAL_ENV=/opt/venv", f"ENV STAGECRAFT_BENCH_EDIT={edit}\nENV VIRTUAL_ENV=/opt/venv", 1)
    rt.write_text(text)


def stagecraft(project: Path, tags: list[str], jobs: int) -> tuple[float, dict]:
    argv = [sys.executable, "build.py", "--json", "--jobs", str(jobs), "--repository", "bench/stagecraft"]
    for t in tags:
        argv += ["--tag", t]
    dt, proc = sh(argv, project)
    return dt, json.loads(proc.stdout)


def render_all(project: Path, tags: list[str], out: Path) -> list[Path]:
    files = []
    for t in tags:
        f = out / f"{t}.Dockerfile"
        sh([sys.executable, "build.py", "render", t, "--base-source", "bootstrap", "-o", str(f)], project)
        files.append(f)
    return files


def plain(project: Path, files: list[Path], target: str | None = None) -> float:
    """Plain sequential builds, given the same CA bundle secret stagecraft finds."""
    from stagecraft.cabundle import SECRET_ID, find_ca_bundle

    bundle = find_ca_bundle()
    secret = ["--secret", f"id={SECRET_ID},src={bundle.path}"] if bundle else []
    total = 0.0
    for f in files:
        argv = [DOCKER, "build", "-q", *secret, "-f", str(f), "-t", f"bench/plain:{f.stem}"]
        if target:
            argv += ["--target", target]
        argv.append(str(project))
        dt, _ = sh(argv, project, {"DOCKER_BUILDKIT": "1"})
        total += dt
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tags", default="2.6.2-cpu,3.3.1-cpu-debian12,3.3.1-cpu-debian13")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    tags = args.tags.split(",")
    results: dict = {"tags": tags, "jobs": args.jobs, "machine": f"{os.cpu_count()} CPUs, {platform.machine()}",
                     "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "loadavg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="stagecraft-bench-") as tmp:
        (Path(tmp) / "sc").mkdir()
        (Path(tmp) / "plain").mkdir()
        sc, pl = copy_project(Path(tmp) / "sc"), copy_project(Path(tmp) / "plain")
        run_sc, run_pl = uuid.uuid4().hex[:12], uuid.uuid4().hex[:12]
        set_run(sc, run_sc)
        set_run(pl, run_pl)

        # a. cold
        t_sc, rep = stagecraft(sc, tags, args.jobs)
        files = render_all(pl, tags, Path(tmp))
        t_pl = plain(pl, files)
        results["cold"] = {"stagecraft_s": round(t_sc, 1), "plain_sequential_s": round(t_pl, 1),
                           "ratio": round(t_sc / t_pl, 3),
                           "stages_built": sum(s["status"] == "built" for s in rep["stages"])}
        print(f"a. cold build of {len(tags)} tags: stagecraft {t_sc:.1f} s, plain sequential "
              f"{t_pl:.1f} s, ratio {t_sc / t_pl:.2f}", flush=True)

        # b. no-op
        t_sc, rep = stagecraft(sc, tags, args.jobs)
        t_pl = plain(pl, files)
        results["noop"] = {"stagecraft_s": round(t_sc, 2), "plain_warm_s": round(t_pl, 2),
                           "ratio": round(t_sc / t_pl, 3),
                           "stages_built": sum(s["status"] == "built" for s in rep["stages"])}
        print(f"b. no-op rebuild: stagecraft {t_sc:.2f} s ({results['noop']['stages_built']} stages "
              f"built), plain warm {t_pl:.2f} s, ratio {t_sc / t_pl:.3f}", flush=True)

        # c. one runtime-template edit
        edit_sc, edit_pl = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
        set_run(sc, run_sc, edit_sc)
        t_sc, rep = stagecraft(sc, tags, args.jobs)
        rebuilt = sorted({s["stage"] for s in rep["stages"] if s["status"] == "built"})
        set_run(pl, run_pl, edit_pl)
        files = render_all(pl, tags, Path(tmp))
        t_alone = plain(pl, files, target="runtime")
        results["edit_runtime"] = {"stagecraft_s": round(t_sc, 1), "rebuilt_stages": rebuilt,
                                   "stages_built": sum(s["status"] == "built" for s in rep["stages"]),
                                   "plain_runtime_alone_s": round(t_alone, 1),
                                   "ratio": round(t_sc / t_alone, 3)}
        print(f"c. runtime template edited: stagecraft rebuilt {rebuilt} in {t_sc:.1f} s; plain builds "
              f"of the runtime stage alone {t_alone:.1f} s, ratio {t_sc / t_alone:.2f}", flush=True)
    results["loadavg_end"] = os.getloadavg()
    out = ROOT / "bench" / "results" / "build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
