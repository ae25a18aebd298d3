#!/usr/bin/env python3
"""What a stage's export costs on the modern engine (issue 23 item 2): a plain export into
the engine against the reproducible ones, each from a cold build of the same stage.

    env $(STAGECRAFT_MODERN_NAME=NAME scripts/modern-engine.sh env) \\
        python bench/export.py [--tag 2.6.2-cpu] [--stages base,runtime] \\
            [--variants plain,layout,...] [--rounds 1] [-o bench/results/export.json]

Needs buildx and the containerd image store (scripts/modern-engine.sh), and the tag's
bootstrapped base in that engine (run `build.py --tag TAG` on it once). Each run is
`docker buildx build --no-cache --target STAGE` of the tag's rendered Dockerfile
(`build.py render --base-source bootstrap`), so every step runs and every layer is new;
the secret is the host's CA bundle, as builds get it. Variants (what follows the steps):

- plain: ``--output type=image`` (the image exporter unpacks into the engine; no
  timestamp rewrite): the price to match.
- layout: what Engine.build did for a reproducible build before the steps fixed their
  file times: ``type=oci,tar=false,rewrite-timestamp=true`` to a directory, then
  ``tar | docker load``.
- fixed: what Engine.build does now (stagecraft/steptimes.py): ``type=oci,tar=false``
  (no rewrite pass: every RUN fixed its file times), the check that no entry of a layer
  above the base is newer than the epoch (``check_s``, ``newer``: what it found), then
  ``tar | docker load``.
- stream: ``type=docker,dest=-,rewrite-timestamp=true`` piped straight into
  ``docker load`` (no layout on disk).
- nounpack: ``type=image,rewrite-timestamp=true,unpack=false`` (into the engine's
  content store, unpacked when a container needs it).
- zstd: layout's route with ``compression=zstd,force-compression=true`` (cheaper to
  compress and to rewrite; pulling zstd layers needs Docker 23 / containerd 1.5 or later).

From BuildKit's plain progress, each line timed as it arrives: the steps' own
durations (``#N DONE 12.3s`` of the RUN/COPY vertices), the exporter's phases
(``#N exporting layers 27.8s done``, ``rewriting layers with source-date-epoch``, ...),
and ``export_s``: from the last step's completion to the end of the last command (the
load included), what the export costs on top of the steps. Writes every run to the
JSON file and prints a table (median per stage and variant); a variant the engine
refuses is recorded with its error (BuildKit 0.13 refuses ``nounpack``: 'exporter
option "rewrite-timestamp" conflicts with "unpack"', moby/buildkit#4230).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from stagecraft.steptimes import from_images, newer_entries  # noqa: E402

VARIANTS = ("plain", "layout", "fixed", "stream", "nounpack", "zstd")
_VERTEX = re.compile(r"^#(\d+) (.*)$")
_DONE = re.compile(r"^DONE (\d+(?:\.\d+)?)s$")
_PHASE = re.compile(r"^(.*?) (\d+(?:\.\d+)?)s done$")
_STEP = re.compile(r"^\[[^\]]*\d+/\d+\] (RUN|COPY|ADD) ")


def parse(lines: list[tuple[float, str]]) -> dict:
    """Read timed plain-progress lines ``[(seconds since start, line)]``. Returns
    ``{"steps": {name: s}, "phases": {name: s}, "last_step_at": s, "error": str|None}``:
    each RUN/COPY/ADD vertex's DONE duration (s), the exporter's timed sub-lines (the
    largest figure per name: BuildKit prints ``exporting layers`` once per layer set),
    and when the last step completed (seconds since start; 0.0 when none did). Pure."""
    names: dict[str, str] = {}
    steps: dict[str, float] = {}
    phases: dict[str, float] = {}
    last, error = 0.0, None
    for at, raw in lines:
        m = _VERTEX.match(raw.rstrip())
        if not m:
            continue
        vid, text = m.groups()
        if vid not in names:
            names[vid] = text
            continue
        if text.startswith("ERROR"):
            error = f"{names[vid]}: {text}"
        done = _DONE.match(text)
        if done and _STEP.match(names[vid]):
            steps[names[vid][:60]] = float(done.group(1))
            last = max(last, at)
            continue
        if done and names[vid].startswith("exporting to "):
            phases["exporter total"] = float(done.group(1))
            continue
        phase = _PHASE.match(text)
        if phase and not text.startswith("sha256:"):
            name = re.sub(r" sha256:[0-9a-f]+", "", phase.group(1))
            # "rewriting layers with source-date-epoch 1783764997 (2026-07-11 ...)"
            name = re.sub(r"(source-date-epoch) \d+ \(.*\)$", r"\1", name)
            phases[name] = max(phases.get(name, 0.0), float(phase.group(2)))
    return {"steps": steps, "phases": phases, "last_step_at": last, "error": error}


def _timed(argv: list[str], start: float, out: list[tuple[float, str]],
           stdout=subprocess.PIPE) -> subprocess.Popen:
    """Start ``argv`` with its progress (stderr, or stdout when ``stdout`` is given
    elsewhere) appended to ``out`` with arrival times, in this thread."""
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stderr is not None
    for line in proc.stderr:
        out.append((time.monotonic() - start, line))
    return proc


def run_variant(variant: str, dockerfile: Path, stage: str, epoch: int, work: Path) -> dict:
    """One cold build of ``stage`` exported the ``variant`` way. Returns the parse plus
    ``wall_s``, ``load_s`` (the separate ``docker load``, layout routes only),
    ``check_s`` and ``newer`` (fixed only) and ``export_s`` (s). Raises RuntimeError with
    the log's tail when a command fails."""
    name = f"stagecraft-i23-export/{stage}:{variant}"
    base = ["docker", "buildx", "build", "--no-cache", "--progress=plain", "--provenance=false",
            "--target", stage, "-f", str(dockerfile), "--build-arg", f"SOURCE_DATE_EPOCH={epoch}",
            "--secret", "id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt"]
    layout = work / f"{stage}-{variant}.oci"
    outputs = {
        "plain": f"type=image,name={name}",
        "layout": f"type=oci,dest={layout},tar=false,rewrite-timestamp=true",
        "stream": "type=docker,dest=-,rewrite-timestamp=true",
        "nounpack": f"type=image,name={name},rewrite-timestamp=true,unpack=false",
        "zstd": f"type=oci,dest={layout},tar=false,rewrite-timestamp=true,compression=zstd,force-compression=true",
        "fixed": f"type=oci,dest={layout},tar=false",
    }
    argv = [*base, "--output", outputs[variant], str(ROOT)]
    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    load_s = check_s = 0.0
    newer: list = []
    if variant == "stream":
        load = subprocess.Popen(["docker", "load"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        proc = _timed(argv, start, lines, stdout=load.stdin)
        rc = proc.wait()
        assert load.stdin is not None
        load.stdin.close()
        rc = rc or load.wait()
    else:
        proc = _timed(argv, start, lines)
        rc = proc.wait()
        if rc == 0 and variant == "fixed":
            t0 = time.monotonic()
            newer = [vars(e) for e in newer_entries(layout, epoch, _base_layers(dockerfile))]
            check_s = time.monotonic() - t0
        if rc == 0 and variant in ("layout", "zstd", "fixed"):
            t0 = time.monotonic()
            tar = subprocess.Popen(["tar", "-C", str(layout), "-cf", "-", "."], stdout=subprocess.PIPE)
            rc = subprocess.run(["docker", "load"], stdin=tar.stdout, stdout=subprocess.DEVNULL).returncode
            assert tar.stdout is not None
            tar.stdout.close()
            rc = rc or tar.wait()
            load_s = time.monotonic() - t0
    wall = time.monotonic() - start
    shutil.rmtree(layout, ignore_errors=True)
    got = parse(lines)
    if rc != 0:
        tail = "".join(line for _, line in lines[-15:])
        raise RuntimeError(f"{stage}/{variant}: exit {rc}\n{tail}")
    return {**got, "variant": variant, "stage": stage, "wall_s": round(wall, 2),
            "load_s": round(load_s, 2), "check_s": round(check_s, 2), "newer": newer,
            "export_s": round(wall - got["last_step_at"], 2)}


def _base_layers(dockerfile: Path) -> set[str]:
    """The diff ids of the rendered Dockerfile's first FROM image (the bootstrapped base:
    its layers are not the build's)."""
    ref = from_images(dockerfile.read_text())[0]
    out = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref],
                         capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def table(runs: list[dict]) -> str:
    """Markdown table: per stage and variant, the median steps, exporter phases, load and
    export seconds, and export / plain export."""
    def med(xs: list[float]) -> float:
        return round(statistics.median(xs), 1) if xs else 0.0

    rows = ["| stage | variant | steps s | exporting layers s | rewriting s | load s | export s | export / plain |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for stage in dict.fromkeys(r["stage"] for r in runs):
        mine = [r for r in runs if r["stage"] == stage]
        plain = med([r["export_s"] for r in mine if r["variant"] == "plain"])
        for variant in dict.fromkeys(r["variant"] for r in mine):
            rs = [r for r in mine if r["variant"] == variant]
            export = med([r["export_s"] for r in rs])
            rows.append(
                f"| {stage} | {variant} | {med([sum(r['steps'].values()) for r in rs])} "
                f"| {med([r['phases'].get('exporting layers', 0.0) for r in rs])} "
                f"| {med([r['phases'].get('rewriting layers with source-date-epoch', 0.0) for r in rs])} "
                f"| {med([r['load_s'] for r in rs])} | {export} "
                f"| {round(export / plain, 2) if plain else '-'} |")
    return "\n".join(rows)


def render(tag: str, work: Path) -> Path:
    """The tag's Dockerfile, rendered by build.py with the bootstrapped base."""
    out = work / f"{tag}.Dockerfile"
    subprocess.run([sys.executable, str(ROOT / "build.py"), "render", tag, "--platform", "linux/amd64",
                    "--base-source", "bootstrap", "-o", str(out)], check=True, capture_output=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default="2.6.2-cpu")
    ap.add_argument("--stages", default="base,runtime")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--epoch", type=int, default=1783764997, help="SOURCE_DATE_EPOCH (default: the lock's bookworm release)")
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "bench/results/export.json")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if not os.environ.get("DOCKER_HOST") or set(variants) - set(VARIANTS):
        print(f"error: select the modern engine (DOCKER_HOST) and variants of {', '.join(VARIANTS)}",
              file=sys.stderr)
        return 2
    runs: list[dict] = []
    refused: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="stagecraft-export-bench-") as tmp:
        dockerfile = render(args.tag, Path(tmp))
        for rnd in range(args.rounds):
            for stage in args.stages.split(","):
                # Rotated order, so that drift on a shared machine hits every variant.
                k = rnd % len(variants)
                for variant in variants[k:] + variants[:k]:
                    try:
                        run = run_variant(variant, dockerfile, stage, args.epoch, Path(tmp))
                    except RuntimeError as exc:  # an engine that refuses the variant
                        print(f"{stage} {variant}: refused: {exc}", file=sys.stderr)
                        refused.append({"stage": stage, "variant": variant, "error": str(exc)[-600:]})
                        continue
                    print(f"{stage} {variant}: steps {sum(run['steps'].values()):.1f} s, "
                          f"export {run['export_s']:.1f} s, phases {run['phases']}", file=sys.stderr)
                    runs.append(run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tag": args.tag, "epoch": args.epoch, "load": os.getloadavg(),
                                    "runs": runs, "refused": refused}, indent=1) + "\n")
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
