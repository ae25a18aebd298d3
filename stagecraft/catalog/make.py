"""The catalog from the matrix's images and their facts: every page, pure (no I/O).

``make(specs, facts, pull_refs, source, previous, compares)`` -> (pages, facts file).
The selector's answers come from ``answers.table`` (the project's chooser), over the
kernel sets each image carries: its own /etc/stagecraft/image.json when built, the
matrix's otherwise, restricted to the platforms it is made for.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..expand import ImageSpec
from . import answers, diff, hardware, read, site, view


def platforms_of(spec: ImageSpec, facts: Mapping[str, Any] | None) -> list[str]:
    """The platforms a tag is for: those of its built images, else those it declares
    (``linux/amd64`` when it declares none, as the build hosts of this project are)."""
    built = [i.get("platform") for i in (facts or {}).get("images") or [] if i.get("platform")]
    return built or list(spec.platforms) or ["linux/amd64"]


def images_by_platform(specs: Sequence[ImageSpec], facts: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """platform -> [{"tag", "kernel_sets"}] in matrix order: what rank() chooses among on
    a machine of that platform."""
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in hardware.PLATFORMS}
    for spec in specs:
        f = facts.get(spec.tag)
        for p in platforms_of(spec, f):
            image = next((i for i in (f or {}).get("images") or [] if i.get("platform") == p), None)
            sets, _ = view.kernel_sets_of(spec, image, p)
            out.setdefault(p, []).append({"tag": spec.tag, "kernel_sets": sets})
    return out


def notes(by_platform: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """What the selector should say it does not model (CPU flags beyond its CPU choices)."""
    flags = hardware.unmodelled_flags([ks for imgs in by_platform.values() for i in imgs for ks in i["kernel_sets"]])
    if not flags:
        return []
    return [f"Some kernel sets require CPU flags the CPU choices here do not tell apart "
            f"({', '.join(flags)}): on such a CPU, `build.py probe` on the machine is the answer."]


def changes(specs: Sequence[ImageSpec], facts: Mapping[str, Any], previous: Mapping[str, Any] | None,
            compares: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The "what changed" entries: each tag against its build in ``previous`` (a facts
    file's tags) where both are built, then each (old tag, new tag) of ``compares``."""
    out = []
    for spec in specs:
        old, new = (previous or {}).get(spec.tag), facts.get(spec.tag)
        if old and new:
            out.append(diff.change(f"{spec.tag} (earlier build)", old, f"{spec.tag} (this build)", new))
    for a, b in compares:
        out.append(diff.change(a, facts.get(a), b, facts.get(b)))
    return out


def make(specs: Sequence[ImageSpec], facts: Mapping[str, Any], pull_refs: Mapping[str, str], source: str,
         previous: Mapping[str, Any] | None = None,
         compares: Sequence[tuple[str, str]] = ()) -> tuple[dict[str, str], dict[str, Any]]:
    """(pages: relative path -> text, the facts file to write beside them). ``facts``:
    tag -> facts (``view``'s shape) of the built tags; ``pull_refs``: tag -> the ref users
    pull."""
    views = [view.tag_view(s, facts.get(s.tag), pull_refs[s.tag]) for s in specs]
    by_platform = images_by_platform(specs, facts)
    built = {s.tag: bool((facts.get(s.tag) or {}).get("images")) for s in specs}
    table = answers.table(by_platform, built)
    pages = site.render(views, table, changes(specs, facts, previous, compares), notes(by_platform), source)
    return pages, {"schema": read.FACTS_SCHEMA, "tags": dict(facts)}
