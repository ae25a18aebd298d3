"""Which image of a matrix suits this host best, and why: a pure function of probe
results, each image's kernel sets and which images are built (``build.py probe``).

Order, most important first (each a field of ``Fit.key``):
1. ``sure``: the kernels are known to fit. A GPU choice whose kernels are "unknown" (the
   matrix could not state the build's SASS/PTX) ranks after every known fit, CPU ones
   included: an unknown fit is no fit to recommend.
2. ``accelerator``: a GPU/NPU/XPU/... choice over a CPU one.
3. ``wanted``: the image runs on the device it was built for (no fallback).
4. ``clean``: fewer warnings (native kernels over PTX JIT, a full driver over
   minor-version compatibility).
5. ``specific``: the most specific match, as archspec picks the most specific
   microarchitecture: the chosen set states more requirements that hold here (CPU flags
   and ISA level; SASS built for exactly this compute capability over a compatible one
   over PTX; exact device archs over glob patterns).
6. ``built``: an image that is built here over one that is not (unknown in between).
7. matrix order. When the best two differ only there, the answer says it is a tie.
"""
from __future__ import annotations

import fnmatch

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, NamedTuple
else:
    from probes._record import NamedTuple

from probes import cpuflags
from probes.select import Choice, choose, gpu_kernel_path

CRITERIA = ("sure", "accelerator", "wanted", "clean", "specific", "built", "order")


class Fit(NamedTuple):
    """One image on this host: its tag, the choice its entrypoint would make, the key it
    ranks by (lower first; fields named by CRITERIA), and whether it is built."""

    tag: str
    choice: Choice
    key: tuple
    built: bool | None = None
    specificity: int = 0


def specificity(kset: Mapping[str, Any] | None, probes: Mapping[str, Any]) -> int:
    """How many of the chosen set's stated requirements hold here (higher: more specific).
    CPU: each required flag, the ISA level's number, the arch. NVIDIA: 3 when every GPU
    has SASS for exactly its capability, 2 when SASS covers it (same major, lower minor)
    or the vendor lists the capability as supported, 1 through PTX, 0 unknown. Other devices: each exact (non-glob) arch that matches, and
    a minimum driver."""
    if not kset:
        return 0
    req = kset.get("requires") or {}
    dev = kset.get("device")
    if dev == "cpu":
        level = cpuflags.parse_level(str(req.get("isa_level", ""))) or 0
        return len(req.get("cpu_flags", [])) + level + (1 if req.get("arch") else 0)
    p = probes.get(dev)
    devices = getattr(p, "devices", ()) or ()
    if dev == "nvidia":
        sass = req.get("sass")
        ptx = req.get("ptx")
        if not devices or not isinstance(sass, list):
            return 0
        if all(d.arch in sass for d in devices):
            return 3
        said = req.get("supported") or []
        if all((bool(sass) and gpu_kernel_path(d.arch, sass, ()) == "sass") or d.arch in said
               for d in devices):
            return 2
        return 1 if isinstance(ptx, list) and ptx else 0
    archs = [str(a) for a in req.get("arch", [])]
    exact = [a for a in archs if not any(c in a for c in "*?[")]
    return (sum(1 for a in exact for d in devices if d.arch and fnmatch.fnmatch(d.arch, a))
            + (1 if req.get("min_driver") else 0))


def fit(probes: Mapping[str, Any], image: Mapping[str, Any], pos: int,
        built: bool | None = None) -> Fit | None:
    """The Fit of one image ({"tag", "kernel_sets"}); None when it cannot run here."""
    c = choose(probes, image.get("kernel_sets", []))
    if c.refused:
        return None
    unknown = any(w.startswith("unknown whether") for w in c.warnings)
    spec = specificity(c.kernel_set, probes)
    key = (unknown, c.device == "cpu", c.fallback, len(c.warnings), -spec,
           {True: 0, None: 1, False: 2}[built], pos)
    return Fit(str(image.get("tag")), c, key, built, spec)


def rank(probes: Mapping[str, Any], images: Sequence[Mapping[str, Any]],
         built: Mapping[str, bool | None] | None = None) -> tuple[list[Fit], list[str]]:
    """(fits best first, refusals as "tag: message") for ``images`` in matrix order.
    ``built``: tag -> built here (True/False), or None/missing when unknown."""
    fits: list[Fit] = []
    refusals: list[str] = []
    for pos, img in enumerate(images):
        f = fit(probes, img, pos, (built or {}).get(str(img.get("tag"))))
        if f is None:
            refusals.append(f"{img.get('tag')}: {choose(probes, img.get('kernel_sets', [])).message}")
        else:
            fits.append(f)
    fits.sort(key=lambda f: f.key)
    return fits, refusals


def explain(fits: Sequence[Fit]) -> str:
    """Why the first fit is the best: its kernel set and device, any fallback or warning,
    and how it compares with the runner-up (a tie is said to be one)."""
    if not fits:
        return ""
    best = fits[0]
    c = best.choice
    why = f"kernel set {c.name} ({c.device})"
    if c.fallback:
        why += f"; {c.message}"
    if c.warnings:
        why += f"; warning: {c.warnings[0]}"
    if best.built is not None:
        why += "; built" if best.built else "; not built yet"
    if len(fits) > 1:
        other = fits[1]
        differ = next(i for i, (a, b) in enumerate(zip(best.key, other.key, strict=True)) if a != b)
        name = CRITERIA[differ]
        if name == "order":
            why += (f"; tie with {other.tag} (same kernel set quality, specificity"
                    f"{' and build state' if best.built == other.built else ''}): "
                    f"{best.tag} comes first in matrix.yaml")
        elif name == "built":
            why += f"; {other.tag} fits as well but is {'not built' if other.built is False else 'of unknown build state'}"
        elif name == "specific":
            why += f"; more specific than {other.tag} ({best.specificity} requirements met against {other.specificity})"
    return why
