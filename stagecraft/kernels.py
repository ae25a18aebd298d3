"""Kernel sets of one image, completed from its components and validated. Pure.

matrix.yaml declares a framework's kernel sets once; what an NVIDIA set requires of the
host depends on the image's CUDA component (the CUDA version and its minimum drivers,
from compatibility.yaml) and on the framework build (the compute capabilities it ships
SASS and PTX for). ``complete`` fills those in; ``problems`` checks the result against
``probes/kernel_sets.schema.json``, the schema the entrypoint reads them with.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from probes.isa import CAP_VARS

from . import compat

UNKNOWN = "unknown"  # a build fact not known: the chooser warns instead of assuming
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "probes" / "kernel_sets.schema.json"


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def complete(framework: dict[str, Any], components: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The framework's kernel sets with NVIDIA requirements filled from the components:
    ``cuda``, ``min_driver``, ``min_driver_compat`` (compatibility table) and ``sass``,
    ``ptx`` (framework ``build``; a list, or ``"unknown"``), ``supported`` (capabilities the
    vendor says the build runs on, kernel form not stated). Values written in matrix.yaml win. A framework that
    declares none carries one set for its device (plus a CPU fallback for accelerators)."""
    sets = copy.deepcopy(list(framework.get("kernel_sets", ())))
    if not sets:
        device = framework["device"]
        sets = [{"name": device, "device": device,
                 "description": "default: the framework declares no kernel sets"}]
        if device != "cpu":
            sets.append({"name": "cpu", "device": "cpu", "description": "default CPU fallback"})
    cuda = components.get("cuda")
    build = framework.get("build", {})
    for ks in sets:
        if ks.get("device") != "nvidia":
            continue
        req = ks.setdefault("requires", {})
        if not isinstance(req, dict):
            continue
        if cuda:
            req.setdefault("cuda", str(cuda["cuda"]))
            for key, value in (compat.cuda_facts(str(cuda["cuda"])) or {}).items():
                req.setdefault(key, str(value))
        for key in ("sass", "ptx", "supported"):
            if key in build:
                value = build[key]
                req.setdefault(key, value if value == UNKNOWN else list(value))
    return sets


def for_platform(sets: list[dict[str, Any]], platform: str) -> list[dict[str, Any]]:
    """The sets an image for ``platform`` (``linux/arm64``; '' for the host's) carries:
    a CPU set whose ``requires.arch`` names other CPUs is dropped (it could never be
    chosen there). A set without ``arch`` stays."""
    if not platform:
        from .platforms import host_platform

        platform = host_platform()
    from .platforms import KNOWN

    machine = KNOWN[platform].machine if platform in KNOWN else platform.rsplit("/", 1)[-1]
    out = []
    for ks in sets:
        req = ks.get("requires")
        arch = req.get("arch") if ks.get("device") == "cpu" and isinstance(req, dict) else None
        allowed = [arch] if isinstance(arch, str) else list(arch or ())
        if allowed and machine not in allowed:
            continue
        out.append(ks)
    return out


def problems(sets: list[dict[str, Any]]) -> list[str]:
    """Schema problems of completed kernel sets, each ``path: message``."""
    out = []
    for err in _validator().iter_errors(sets):
        path = ".".join(str(p) for p in err.absolute_path)
        out.append(f"kernel_sets.{path}: {err.message}")
    names = [ks.get("name") for ks in sets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(f"kernel_sets: names used twice: {', '.join(map(str, dupes))}")
    out += _cap_problems(sets)
    return out


def _cap_problems(sets: list[dict[str, Any]]) -> list[str]:
    """Kernel sets only help: no set caps oneDNN/MKL through ``env`` (a fixed level is
    below the host on newer CPUs: AVX512_CORE switches off VNNI, BF16 and AMX), and the
    first CPU set caps nothing, so the best choice is never slower than no entrypoint."""
    out = []
    first_cpu = True
    for i, ks in enumerate(sets):
        if not isinstance(ks, dict):
            continue
        env = ks.get("env") if isinstance(ks.get("env"), dict) else {}
        for var in CAP_VARS:
            if var in env:
                out.append(f"kernel_sets.{i}.env.{var}: a fixed ISA cap is below newer CPUs "
                           "(VNNI, BF16, AMX); use isa_cap: avx|avx2|avx512, which the entrypoint "
                           "turns into the host's own highest level, or leave it out")
        if ks.get("device") == "cpu":
            if first_cpu and ks.get("isa_cap") is not None:
                out.append(f"kernel_sets.{i}.isa_cap: {ks.get('name')} is the image's top CPU kernel set: "
                           "it must not cap the CPU ISA (the libraries dispatch to the best the host has)")
            first_cpu = False
    return out
