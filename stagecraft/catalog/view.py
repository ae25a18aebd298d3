"""A tag's page, as data: the matrix's intent beside the facts read from its built images
(one per platform). Pure: the facts come in as plain JSON-ready dicts (see ``read``).

Facts of one platform's image (every key optional but ``platform``): ``inspect`` (the
engine's ``docker image inspect`` JSON: Id, RepoDigests, Size in bytes, Os, Architecture,
Config.Labels, RootFS.Layers), ``history`` (``docker image history``: CreatedBy, Size in
bytes), ``inventory`` (``stagecraft.sbom.inventory``'s shape: debian and python package
lists), ``manifest`` (/etc/stagecraft/image.json, with the SASS and PTX the build
measured), ``compressed_size`` (bytes in the registry, None when not read from one),
``registry_digest`` (``HOST/PATH@sha256:...``, when read from a registry),
``test_record`` (the state dir's record), ``signature`` (``"signed"``/``"unsigned"``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probes.select import gpu_kernel_path

from .. import kernels
from ..expand import ImageSpec
from . import answers, hardware, versions

UNKNOWN = "unknown"


def intent(spec: ImageSpec) -> dict[str, str]:
    """What the matrix declares for ``spec``: component -> version (see versions.SOURCES),
    plus ``package`` (the framework's distribution)."""
    fw = spec.framework
    cuda = spec.components.get("cuda") or {}
    accel = spec.components.get("accel") or {}
    out = {"framework": str(fw["version"]), "package": str(fw["package"]),
           "Python": str(spec.base.get("python", ""))}
    for comp, key, src in (("CUDA", "cuda", cuda), ("cuDNN", "cudnn", cuda), ("NCCL", "nccl", accel)):
        if src.get(key):
            out[comp] = str(src[key])
    return out


def kernel_sets_of(spec: ImageSpec, image: Mapping[str, Any] | None, platform: str) -> tuple[list[dict[str, Any]], str]:
    """(kernel sets, where they come from): the image's own /etc/stagecraft/image.json
    when it was read (SASS and PTX as the build measured them), else the matrix's."""
    sets = ((image or {}).get("manifest") or {}).get("kernel_sets")
    if isinstance(sets, list) and sets:
        return sets, "the image (/etc/stagecraft/image.json, measured at build)"
    return (kernels.for_platform(kernels.complete(spec.framework, spec.components), platform),
            "the matrix (not read from an image)")


def _ccs(value: Any) -> list[str] | str:
    return UNKNOWN if value in (None, UNKNOWN) else [str(x) for x in value]


def gpu_facts(sets: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The NVIDIA set's SASS and PTX, the generations they cover (``[{"generation", "cc",
    "path"}]``, path ``sass``/``ptx``/None/``unknown``) and its minimum drivers; None
    when the image has no NVIDIA set."""
    ks = next((k for k in sets if k.get("device") == "nvidia"), None)
    if ks is None:
        return None
    req = ks.get("requires") or {}
    sass, ptx = _ccs(req.get("sass")), _ccs(req.get("ptx"))
    cover = []
    for gen, ccs in hardware.GENERATIONS:
        for cc in ccs:
            path = (UNKNOWN if UNKNOWN in (sass, ptx) and cc not in req.get("supported", [])
                    else gpu_kernel_path(cc, [] if sass == UNKNOWN else sass, [] if ptx == UNKNOWN else ptx))
            cover.append({"generation": gen, "cc": cc, "path": path})
    return {"sass": sass, "ptx": ptx, "cover": cover, "cuda": req.get("cuda", ""),
            "min_driver": req.get("min_driver", ""), "min_driver_compat": req.get("min_driver_compat", ""),
            "ptx_needs_full_driver": bool(ptx) and ptx != UNKNOWN}


def cpu_floor(ks: Mapping[str, Any]) -> str:
    """A CPU kernel set's ISA floor in words (``"x86-64-v3"``, ``"avx2, fma"``, ``"aarch64: asimd"``)."""
    req = ks.get("requires") or {}
    parts = []
    if req.get("arch"):
        arch = req["arch"]
        parts.append(arch if isinstance(arch, str) else " or ".join(arch))
    if req.get("isa_level"):
        parts.append(str(req["isa_level"]))
    if req.get("cpu_flags"):
        parts.append(", ".join(req["cpu_flags"]))
    return ": ".join(parts) if parts else "any CPU"


def _layers(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for h in history:
        size = int(h.get("Size") or 0)
        if size:
            cmd = str(h.get("CreatedBy") or "").replace("/bin/sh -c #(nop) ", "").strip()
            out.append({"size": size, "created_by": cmd if len(cmd) <= 200 else cmd[:197] + "..."})
    return out


def platform_view(image: Mapping[str, Any]) -> dict[str, Any]:
    """One platform's row: platform, size (bytes, unpacked), compressed (bytes or None),
    digest, image id, layers [{size, created_by}], test record summary, signature."""
    ins = image.get("inspect") or {}
    rec = image.get("test_record")
    test = None
    if rec:
        counts = rec.get("counts") or {}
        test = {"passed": bool(rec.get("passed")), "counts": ", ".join(f"{n} {k}" for k, n in sorted(counts.items())),
                "seconds": rec.get("seconds"), "suites": rec.get("suites") or []}
    return {"platform": image.get("platform", ""), "size": ins.get("Size"),
            "compressed": image.get("compressed_size"), "id": ins.get("Id", ""),
            "digest": image.get("registry_digest") or next(iter(ins.get("RepoDigests") or []), ""),
            "layers": _layers(image.get("history") or []), "test": test,
            "signature": image.get("signature") or "unknown"}


def tag_view(spec: ImageSpec, facts: Mapping[str, Any] | None, pull_ref: str) -> dict[str, Any]:
    """Everything a tag's page shows (see the module docstring for ``facts``: ``{"images":
    [platform facts]}``, None when the tag is not built): versions with their flags, the
    platforms, GPU and CPU kernels, packages, and the pull and run commands."""
    images = list((facts or {}).get("images") or [])
    first = images[0] if images else None
    labels = ((first or {}).get("inspect") or {}).get("Config", {}).get("Labels") or {}
    inv = (first or {}).get("inventory")
    rows = versions.version_rows(inv, labels, intent(spec))
    platform = (first or {}).get("platform") or (spec.platforms[0] if spec.platforms else "linux/amd64")
    sets, sets_from = kernel_sets_of(spec, first, platform)
    gpu = gpu_facts(sets)
    declared = list(spec.platforms) or ["linux/amd64"]
    packages = sorted(({"manager": "pip" if m == "python" else "dpkg", "name": p.get("name", ""),
                        "version": p.get("version", "")} for m in ("python", "debian")
                       for p in (inv or {}).get(m, ())), key=lambda p: (p["manager"], p["name"].lower()))
    return {"tag": spec.tag, "aliases": list(spec.aliases), "built": bool(images),
            "device": spec.framework.get("device", ""), "pull_ref": pull_ref,
            "intent": intent(spec), "versions": rows, "claims": versions.tag_claims(spec.tag, rows),
            "flagged": any(r["flags"] for r in rows), "platforms_declared": declared,
            "platforms": [platform_view(i) for i in images], "kernel_sets": sets, "kernel_sets_from": sets_from,
            "gpu": gpu, "cpu_sets": [{"name": k.get("name"), "floor": cpu_floor(k), "description": k.get("description", "")}
                                     for k in sets if k.get("device") == "cpu"],
            "packages": packages, "inventory_read": inv is not None,
            "gpu_cells": [answers.gpu_cell(sets, cc) for _, ccs in hardware.GENERATIONS for cc in ccs],
            "cpu_cells": cpu_cells(spec, images, declared)}


def cpu_cells(spec: ImageSpec, images: Sequence[Mapping[str, Any]], declared: Sequence[str]) -> list[tuple[str, str]]:
    """The overview's CPU cells of a tag (answers.cpu_cell), each with the kernel sets of
    the image for that CPU's platform (a platform the tag is not made for: ``none``)."""
    out = []
    for cpu, (_label, platform, _arch, _flags) in hardware.CPUS.items():
        if platform not in declared:
            out.append(("none", f"no {platform.split('/')[1]} image"))
            continue
        image = next((i for i in images if i.get("platform") == platform), None)
        out.append(answers.cpu_cell(kernel_sets_of(spec, image, platform)[0], cpu))
    return out
