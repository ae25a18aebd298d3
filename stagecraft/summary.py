"""The lines under a build's summary table that say what its numbers mean and what went
wrong without failing it. Pure over a ``BuildReport``."""

from __future__ import annotations

from typing import Any

SIZE_KINDS = {
    "unpacked": "* size: unpacked, as this engine reports it (the layers as extracted on disk)",
    "compressed": "* size: compressed, as this engine reports it (the containerd image store "
                  "counts the content it holds: the layers as pushed, not as extracted)",
}


def summary_notes(report: Any) -> list[str]:
    """Notes for ``report`` (a ``buildreport.BuildReport``): which size the table shows; the
    RUN steps BuildKit ran and took from a cache; the stage caches written and not
    written; every warning again (caches are optional: the images were built)."""
    notes = [SIZE_KINDS[k] for k in sorted({i.size_kind for i in report.images
                                            if i.status == "built" and i.size_kind})]
    built = [s for s in report.stages.values() if s.status == "built"]
    if built:
        ran = sum(s.run_executed for s in built)
        hit = sum(s.run_cached for s in built)
        notes.append(f"RUN steps: {ran} ran, {hit} from cache")
    exported = [s for s in built if s.cache]
    if exported:
        missing = [s for s in exported if s.cache != "written"]
        notes.append(f"build cache: {len(exported) - len(missing)} stage(s) written"
                     + (f", {len(missing)} NOT written (the images are built and tagged all the same)"
                        if missing else ""))
    if report.warnings:
        notes.append(f"{len(report.warnings)} warning(s):")
        notes += [f"  {w}" for w in report.warnings]
    return notes
