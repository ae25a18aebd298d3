"""The SASS and PTX a framework build carries, measured from its own binaries.

The runtime stage runs this file at build time, inside the image, with the venv's Python
(standard library only) and NVIDIA's ``cuobjdump`` (PyPI ``nvidia-cuda-cuobjdump``)::

    python3 -I fatbin.py measure --cuobjdump PATH --root SITE_PACKAGES --out FILE BINARY...
    python3 -I fatbin.py apply FILE IMAGE_JSON

(``-I``: this directory holds a ``select.py`` that must not shadow the standard one.)

For each BINARY (a path under SITE_PACKAGES that matrix.yaml names in the framework's
``build.fatbins``), ``cuobjdump --list-elf --list-ptx`` lists the embedded cubins
(``libx.3.sm_90.cubin``: SASS for compute capability 9.0) and PTX (``libx.1.sm_80.ptx``).
What counts, per binary:

- a compute capability counts as SASS when the binary carries at least half as many
  cubins for it as for its best-covered capability: a handful of sm_89 kernels beside
  378 per other capability is not a build for 8.9 (torch 2.7.1's libtorch_cuda.so);
- architecture-specific cubins (``sm_90a``, ``sm_100f``) never count: ``a`` code runs on
  that exact capability only, and neither is what a build targets as a whole (CUDA C
  Programming Guide, "Feature Availability"); they are kept in the counts;
- PTX the same way, among the PTX entries.

Across binaries a capability counts only when every binary has it: a GPU needs them all.
``measure`` writes the result to FILE (right after the framework is installed, in the
same layer as the tool it fetches and removes); ``apply`` puts it into IMAGE_JSON: it
replaces ``sass``/``ptx`` in every NVIDIA kernel set (what the entrypoint chooses with)
and is kept whole under ``measured`` (for the image suite, which compares it with
matrix.yaml). Exit 1, naming the binary, when a binary holds no device code or cuobjdump
fails: the matrix names the wrong file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

_ENTRY = re.compile(r"^(ELF|PTX) file\s+\d+:\s*\S*\.sm_(\d+)([a-z]?)\.(cubin|ptx)\s*$")


def _cc(digits: str) -> str:
    """``"90"`` -> ``"9.0"``, ``"100"`` -> ``"10.0"``, ``"120"`` -> ``"12.0"``."""
    return f"{int(digits[:-1])}.{digits[-1]}"


def _key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


def parse_listing(text: str) -> dict[str, dict[str, int]]:
    """cuobjdump ``--list-elf --list-ptx`` output -> ``{"sass": {cc: cubins},
    "ptx": {cc: entries}, "specific": {"9.0a": cubins, ...}}``."""
    out: dict[str, dict[str, int]] = {"sass": {}, "ptx": {}, "specific": {}}
    for line in text.splitlines():
        m = _ENTRY.match(line.strip())
        if not m:
            continue
        kind, digits, suffix, _ = m.groups()
        cc = _cc(digits)
        table = "specific" if suffix else ("sass" if kind == "ELF" else "ptx")
        name = cc + suffix if suffix else cc
        out[table][name] = out[table].get(name, 0) + 1
    return out


def covered(counts: dict[str, int]) -> list[str]:
    """The capabilities with at least half the cubins (or PTX entries) of the
    best-covered one, in ascending order."""
    if not counts:
        return []
    top = max(counts.values())
    return sorted((cc for cc, n in counts.items() if 2 * n >= top), key=_key)


def measure(cuobjdump: str, root: str, binaries: list[str]) -> dict:
    """``{"tool", "binaries": {path: counts}, "sass": [...], "ptx": [...]}`` for the
    binaries (relative to ``root``). Raises RuntimeError naming the binary when it cannot
    be read or holds no device code."""
    per: dict[str, dict[str, dict[str, int]]] = {}
    sass: set[str] | None = None
    ptx: set[str] | None = None
    for rel in binaries:
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            raise RuntimeError(f"{rel}: no such file under {root} (build.fatbins in matrix.yaml)")
        proc = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", path],
                              capture_output=True, text=True, check=False)
        counts = parse_listing(proc.stdout)
        if not counts["sass"] and not counts["ptx"] and not counts["specific"]:
            why = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
            raise RuntimeError(f"{rel}: no device code found by cuobjdump ({why})")
        per[rel] = counts
        s, p = set(covered(counts["sass"])), set(covered(counts["ptx"]))
        sass = s if sass is None else sass & s
        ptx = p if ptx is None else ptx & p
    version = subprocess.run([cuobjdump, "--version"], capture_output=True, text=True, check=False).stdout
    tool = next((ln.strip() for ln in version.splitlines() if "release" in ln.lower()), "cuobjdump")
    return {"tool": tool, "binaries": per, "sass": sorted(sass or (), key=_key),
            "ptx": sorted(ptx or (), key=_key)}


def apply(manifest: dict, measured: dict) -> dict:
    """The manifest with every NVIDIA kernel set requiring the measured SASS and PTX and
    the whole measurement under ``measured``."""
    out = dict(manifest)
    sets = []
    for ks in manifest.get("kernel_sets", []):
        ks = dict(ks)
        if ks.get("device") == "nvidia":
            ks["requires"] = {**(ks.get("requires") or {}), "sass": measured["sass"], "ptx": measured["ptx"]}
        sets.append(ks)
    out["kernel_sets"] = sets
    out["measured"] = measured
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="fatbin.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure SASS/PTX of the binaries into a JSON file")
    m.add_argument("--cuobjdump", required=True)
    m.add_argument("--root", required=True, help="directory the binaries are relative to")
    m.add_argument("--out", required=True, help="where to write the measurement (JSON)")
    m.add_argument("binaries", nargs="+")
    a = sub.add_parser("apply", help="put a measurement into image.json, in place")
    a.add_argument("measurement")
    a.add_argument("manifest")
    args = p.parse_args(argv)
    if args.command == "measure":
        try:
            measured = measure(args.cuobjdump, args.root, args.binaries)
        except (RuntimeError, OSError) as exc:
            print(f"fatbin.py: {exc}", file=sys.stderr)
            return 1
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(measured, fh, sort_keys=True, indent=1)
            fh.write("\n")
        print(f"fatbin.py: SASS {' '.join(measured['sass']) or 'none'}; PTX "
              f"{' '.join(measured['ptx']) or 'none'} ({measured['tool']})")
        return 0
    with open(args.measurement, encoding="utf-8") as fh:
        measured = json.load(fh)
    with open(args.manifest, encoding="utf-8") as fh:
        manifest = json.load(fh)
    with open(args.manifest, "w", encoding="utf-8") as fh:
        json.dump(apply(manifest, measured), fh, sort_keys=True, separators=(",", ":"))
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
