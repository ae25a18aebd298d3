"""`build.py probe`: this host's hardware as the entrypoint sees it, the kernel set each
image of the matrix would choose here, and the tag that suits it best (probes.rank).

No build and no Docker needed; when an engine answers, which final images are built
is asked too (``docker image inspect``) and counts in the ranking: a built image wins
over an equally good one that is not. STAGECRAFT_PROBE_ROOT=DIR (test/debug only) reads
/proc, /sys and /dev under DIR instead of the host's.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from probes.rank import explain, rank
from probes.report import format_probes, host_report, probes_from_dict

from . import kernels
from .expand import ImageSpec

ENGINE_TIMEOUT_S = 3


def built_refs(refs: Sequence[str]) -> dict[str, bool | None]:
    """ref -> built here (True/False); every value None when no Docker engine answers
    within ENGINE_TIMEOUT_S seconds. Never raises."""
    try:
        import docker

        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except Exception:  # noqa: BLE001 - no engine: built is unknown, the probe still answers
        return dict.fromkeys(refs)
    out: dict[str, bool | None] = {}
    for ref in refs:
        try:
            client.images.get(ref)
            out[ref] = True
        except docker.errors.ImageNotFound:
            out[ref] = False
        except Exception:  # noqa: BLE001
            out[ref] = None
    return out


def probe(specs: Sequence[ImageSpec], repository: str, root: str | None = None) -> dict[str, Any]:
    """{"host": report, "images": [row per tag, matrix order], "best": {"tag", "ref",
    "why"}, "engine": bool}. A row: tag, ref, kernel_set, device, fallback, refused,
    message, warnings, built (True/False/None), specificity, rank (1 = best; None when
    it cannot run here)."""
    report = host_report(root or os.environ.get("STAGECRAFT_PROBE_ROOT") or "/")
    probes = probes_from_dict(report["probes"])
    images = [{"tag": s.tag, "kernel_sets": kernels.complete(s.framework, s.components)} for s in specs]
    refs = {s.tag: f"{repository}:{s.tag}" for s in specs}
    by_ref = built_refs(list(refs.values()))
    built = {tag: by_ref.get(ref) for tag, ref in refs.items()}
    fits, refusals = rank(probes, images, built)
    order = {f.tag: i + 1 for i, f in enumerate(fits)}
    fit_of = {f.tag: f for f in fits}
    rows = []
    for img in images:
        tag = img["tag"]
        f = fit_of.get(tag)
        if f is None:
            msg = next((r.split(": ", 1)[1] for r in refusals if r.startswith(f"{tag}: ")), "")
            rows.append({"tag": tag, "ref": refs[tag], "kernel_set": None, "device": None, "fallback": False,
                         "refused": True, "message": msg, "warnings": [], "built": built[tag],
                         "specificity": 0, "rank": None})
            continue
        c = f.choice
        rows.append({"tag": tag, "ref": refs[tag], "kernel_set": c.name, "device": c.device,
                     "fallback": c.fallback, "refused": False, "message": c.message,
                     "warnings": list(c.warnings), "built": f.built, "specificity": f.specificity,
                     "rank": order[tag]})
    if fits:
        best = {"tag": fits[0].tag, "ref": refs[fits[0].tag], "why": explain(fits)}
    else:
        best = {"tag": None, "ref": None,
                "why": "no image in the matrix can run on this host: " + "; ".join(refusals)}
    return {"host": report, "images": rows, "best": best,
            "engine": any(v is not None for v in built.values())}


def format_text(result: dict[str, Any]) -> str:
    """A person's view: the probes, each image's choice (built or not), the best tag."""
    rows = result["images"]
    out = format_probes(result["host"]["probes"])
    width = max(len(r["tag"]) for r in rows)
    out.append("\nkernel set each image would choose here:")
    for r in rows:
        what = (f"refused: {r['message']}" if r["refused"]
                else r["kernel_set"] + (f" ({r['message']})" if r["fallback"] else ""))
        if r["warnings"] and not r["refused"]:
            what += f" [warning: {r['warnings'][0]}]"
        mark = {True: "built", False: "not built", None: ""}[r["built"]]
        out.append(f"  {r['tag']:<{width}}  {mark:<9}  {what}".rstrip())
    if not result["engine"]:
        out.append("  (no Docker engine answered: which images are built is unknown)")
    best = result["best"]
    out.append(f"\nbest tag: {best['ref']} ({best['why']})" if best["tag"] else f"\nno tag fits: {best['why']}")
    return "\n".join(out)
