#!/usr/bin/env python3
"""Where a cold build's time goes, stage by stage, against this machine's I/O floor
(issue 23 item 1).

    python bench/floor.py --tag 2.6.2-cpu [--tag T ...] [--logs DIR ...] [--platform P] \\
        [--disk-dir /var/lib/docker] [--disk-bytes 1073741824] [-o bench/results/floor.json]

For each stage of each tag (``build.py plan --json`` on the engine of the environment:
its content keys), it reads the stage's build log (``<stage>-<key12>.log`` in the first
``--logs`` directory that has it: BuildKit's plain progress, as ``build.py`` writes it
under ``<state>/logs``) and the stage image in that engine:

- ``steps s``: the RUN/COPY/ADD steps' own durations (``DONE`` lines; bench/export.py's
  ``parse``); ``export s``: the exporter's total (``exporting to ...`` ``DONE``), with its
  timed phases (exporting layers, rewriting layers with source-date-epoch, ...);
- ``fetched``: apt's ``Fetched N MB in S s`` lines and pip's ``Downloading NAME (SIZE)``
  lines (sizes in pip's and apt's 1000-based units); a pip download's seconds run from
  its line to the next line of the same step;
- ``route``: from the log's command line: ``docker build`` into the classic store, or
  buildx's reproducible route (an OCI layout with ``rewrite-timestamp=true``, then
  ``docker load``; the load's seconds are not in the log, so not in the table);
- ``unpacked``: what the stage adds, as the engine reports it (the stage image's
  ``Size`` less its parent's: the classic image store of Docker 20.10 counts unpacked
  bytes; the containerd image store counts its compressed content instead, which the
  table then says).

The floor of a stage: its fetched bytes at the measured bandwidth, plus its unpacked
bytes written twice at the measured disk write speed (once by the steps, once more by
the export, which the classic store applies to its layer store as a second copy).
Both speeds are measured first: the bandwidth by downloading one large wheel from PyPI
through this machine's route (what pip in a build uses), the disk by writing
``--disk-bytes`` to ``--disk-dir`` (the engine's data root) and fdatasync-ing it.
Nothing is built: run it after a cold build (``make image TAG=...`` on a new machine,
or a fresh clone's ``make test``), whose logs and stage images it reads. Writes the
JSON and prints a table per tag: steps, fetched, unpacked, export, total, floor,
total / floor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from export import parse  # noqa: E402  (bench/export.py: the plain-progress reader)

sys.path.insert(0, str(ROOT))
from stagecraft.platforms import host_platform  # noqa: E402

PROBE_WHEEL = ("https://pypi.org/simple/paddlepaddle/", "paddlepaddle-2.6.2-cp311-cp311-manylinux1_x86_64.whl")
LOG_BYTES = 64 << 20  # the most of one stage log read
PROBE_BYTES = 1 << 30  # the most of the probe wheel fetched
_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
_LINE = re.compile(r"^#(\d+) (\d+\.\d+) (.*)$")
_APT = re.compile(r"Fetched ([\d.]+) ([kMG]?B) in (?:(\d+)min )?(\d+)s")
_PIP = re.compile(r"Downloading (\S+) \(([\d.]+) ([kMG]?B)\)")


def fetches(log: str) -> dict:
    """Bytes and seconds fetched in one stage log: ``{"bytes": int, "seconds": float,
    "items": [[what, bytes, s], ...]}`` (apt's summary lines and pip's downloads). Pure."""
    items: list[list] = []
    pending: dict[str, tuple[list, float]] = {}  # vertex -> (its open pip download, start)
    for raw in log.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        vid, at, text = m.group(1), float(m.group(2)), m.group(3)
        if vid in pending:  # the line after a download ends it
            item, start = pending.pop(vid)
            item[2] = round(at - start, 3)
        apt = _APT.search(text)
        pip = _PIP.search(text)
        if apt:
            size = float(apt.group(1)) * _UNITS[apt.group(2)]
            items.append(["apt", int(size), int(apt.group(3) or 0) * 60 + int(apt.group(4))])
        elif pip:
            item = [pip.group(1), int(float(pip.group(2)) * _UNITS[pip.group(3)]), 0.0]
            items.append(item)
            pending[vid] = (item, at)
    return {"bytes": sum(i[1] for i in items), "seconds": round(sum(i[2] for i in items), 3),
            "items": items}


def measure_bandwidth(timeout: float = 120) -> dict:
    """Bytes per second of one large wheel from PyPI (``PROBE_WHEEL``: found in its simple
    index, PEP 503), fetched as pip in a build fetches it. Raises OSError (urllib) when
    PyPI cannot be reached, StopIteration when the index lacks the wheel."""
    with urllib.request.urlopen(PROBE_WHEEL[0], timeout=30) as r:
        page = r.read(8 << 20).decode("utf-8", "replace")
    url = next(m.split("#", 1)[0] for m in re.findall(r'href="([^"]+)"', page) if PROBE_WHEEL[1] in m)
    t0, n = time.monotonic(), 0
    with urllib.request.urlopen(url, timeout=timeout) as r:
        while n < PROBE_BYTES and (chunk := r.read(1 << 20)):
            n += len(chunk)
    s = time.monotonic() - t0
    return {"url": url, "bytes": n, "seconds": round(s, 3), "bytes_per_s": n / s}


def measure_disk(where: Path, size: int) -> dict:
    """Bytes per second of writing ``size`` bytes (incompressible, 16 MiB at a time) to a
    new file in ``where`` and fdatasync-ing it; the file is removed. Raises OSError."""
    block = os.urandom(16 << 20)
    fd, path = tempfile.mkstemp(prefix="stagecraft-floor-", dir=where)
    try:
        t0 = time.monotonic()
        left = size
        while left > 0:
            left -= os.write(fd, block[: min(left, len(block))])
        os.fdatasync(fd)
        s = time.monotonic() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return {"dir": str(where), "bytes": size, "seconds": round(s, 3), "bytes_per_s": size / s}


def image_size(ref: str) -> int | None:
    """The engine's ``Size`` of ``ref`` (bytes), None when it has no such image."""
    out = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", ref],
                         capture_output=True, text=True, timeout=60)
    return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def stage_profile(stage: dict, parent_ref: str | None, logs: list[Path], bw: float, disk: float) -> dict:
    """One stage's row (module docstring); ``bw`` and ``disk`` in bytes per second."""
    name = f"{stage['stage']}-{stage['key'][:12]}.log"
    log = next((d / name for d in logs if (d / name).is_file()), None)
    row: dict = {"stage": stage["stage"], "key": stage["key"][:12], "log": str(log) if log else None}
    if log is None:
        return row
    with open(log, "rb") as f:  # a stage log is a few hundred kB; read at most LOG_BYTES
        text = f.read(LOG_BYTES).decode("utf-8", "replace")
    first = text.split("\n", 1)[0]
    row["route"] = ("reproducible: buildx, OCI layout (rewrite-timestamp), docker load"
                    if "rewrite-timestamp=true" in text else
                    "reproducible: buildx, OCI layout (times fixed by the steps), docker load"
                    if "type=oci" in first else
                    "buildx" if " buildx " in first else "docker build (classic store)")
    parsed = parse([(0.0, ln) for ln in text.splitlines()])
    got = fetches(text)
    size, parent = image_size(stage["image"]), image_size(parent_ref) if parent_ref else 0
    unpacked = size - parent if size is not None and parent is not None else None
    steps = round(sum(parsed["steps"].values()), 1)
    export = parsed["phases"].get("exporter total", 0.0)
    floor = got["bytes"] / bw + (2 * unpacked / disk if unpacked else 0.0)
    row.update(steps_s=steps, export_s=export, phases=parsed["phases"], fetched=got,
               unpacked_bytes=unpacked, total_s=round(steps + export, 1), floor_s=round(floor, 1),
               ratio=round((steps + export) / floor, 2) if floor else None,
               top_steps=sorted(parsed["steps"].items(), key=lambda kv: -kv[1])[:3])
    return row


def plan(tag: str) -> dict:
    """``build.py plan --tag TAG --json`` on the environment's engine. Raises
    CalledProcessError."""
    out = subprocess.run([sys.executable, str(ROOT / "build.py"), "plan", "--tag", tag, "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)


def table(tag: str, rows: list[dict]) -> str:
    """Markdown: one row per stage of ``tag``."""
    out = [f"{tag}:", "| stage | route | steps s | fetched MB (s) | unpacked MB | export s (layers, "
           "rewrite) | total s | floor s | total / floor |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("log") is None:
            out.append(f"| {r['stage']} | no log `{r['stage']}-{r['key']}.log` | | | | | | | |")
            continue
        f, ph = r["fetched"], r["phases"]
        unpacked = "?" if r["unpacked_bytes"] is None else f"{r['unpacked_bytes'] / 1e6:.0f}"
        parts = f"{ph.get('exporting layers', 0):.1f}, {ph.get('rewriting layers with source-date-epoch', 0):.1f}"
        out.append(f"| {r['stage']} | {r['route']} | {r['steps_s']:.1f} | {f['bytes'] / 1e6:.0f} "
                   f"({f['seconds']:.1f}) | {unpacked} | {r['export_s']:.1f} ({parts}) | {r['total_s']:.1f} | "
                   f"{r['floor_s']:.1f} | {r['ratio'] if r['ratio'] is not None else '-'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", action="append", required=True)
    ap.add_argument("--logs", action="append", type=Path, default=[],
                    help="directories of stage logs, searched in order (default .stagecraft/logs)")
    ap.add_argument("--platform", default=host_platform(), help="the stages of this platform (default: the host's)")
    ap.add_argument("--disk-dir", type=Path, default=Path("/var/lib/docker"))
    ap.add_argument("--disk-bytes", type=int, default=1 << 30)
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "bench" / "results" / "floor.json")
    args = ap.parse_args(argv)
    logs = args.logs or [ROOT / ".stagecraft" / "logs"]
    bw, disk = measure_bandwidth(), measure_disk(args.disk_dir, args.disk_bytes)
    print(f"bandwidth {bw['bytes_per_s'] / 1e6:.1f} MB/s ({bw['bytes'] / 1e6:.0f} MB in {bw['seconds']:.2f} s); "
          f"disk write {disk['bytes_per_s'] / 1e6:.1f} MB/s ({disk['bytes'] / 1e6:.0f} MB in {disk['seconds']:.2f} s)")
    result: dict = {"bandwidth": bw, "disk": disk, "tags": {}}
    for tag in args.tag:
        p = plan(tag)
        images = {s["key"]: s["image"] for s in p["stages"]}
        here = [s for s in p["stages"] if s["platform"] == args.platform]
        base = next((b["ref"] for b in p.get("bases", []) if b["platform"] == args.platform), None)
        rows = [stage_profile(s, images.get(s["parent"]) if s["parent"] else base, logs,
                              bw["bytes_per_s"], disk["bytes_per_s"]) for s in here]
        result["tags"][tag] = rows
        print(table(tag, rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
