"""What changed between two builds of a tag, or between two tags: packages added,
removed, upgraded and downgraded, and the size difference, as docker-stacks' build
manifests show them. Pure.

Versions are compared as their package manager orders them: Python distributions by
PEP 440 (``packaging.version``), Debian packages by Debian policy (python-debian's
``debian_support.Version``, epochs and tildes included).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from debian.debian_support import Version as DebVersion
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


def packages(inventory: Mapping[str, Any] | None) -> dict[tuple[str, str], str]:
    """(manager ``pip``/``dpkg``, name) -> version of an inventory (``sbom.inventory``'s shape)."""
    out: dict[tuple[str, str], str] = {}
    for manager, key in (("pip", "python"), ("dpkg", "debian")):
        for p in (inventory or {}).get(key, ()):
            name = str(p.get("name", ""))
            out[(manager, canonicalize_name(name) if manager == "pip" else name)] = str(p.get("version", ""))
    return out


def newer(manager: str, old: str, new: str) -> bool | None:
    """True when ``new`` orders after ``old``, False before, None when neither (equal or
    not comparable)."""
    try:
        a, b = ((Version(old), Version(new)) if manager == "pip" else (DebVersion(old), DebVersion(new)))
    except (InvalidVersion, ValueError):
        return None
    return None if a == b else b > a


def compare(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any]:
    """The change from inventory ``old`` to ``new``: ``{"added": [(manager, name,
    version)], "removed": [...], "upgraded": [(manager, name, old, new)], "downgraded":
    [...], "changed": [...] (versions not comparable), "same": count}``, each sorted."""
    a, b = packages(old), packages(new)
    out: dict[str, Any] = {"added": [], "removed": [], "upgraded": [], "downgraded": [], "changed": [], "same": 0}
    for k in sorted(set(a) | set(b)):
        if k not in a:
            out["added"].append((*k, b[k]))
        elif k not in b:
            out["removed"].append((*k, a[k]))
        elif a[k] == b[k]:
            out["same"] += 1
        else:
            which = {True: "upgraded", False: "downgraded", None: "changed"}[newer(k[0], a[k], b[k])]
            out[which].append((*k, a[k], b[k]))
    return out


def size_of(facts: Mapping[str, Any] | None) -> int | None:
    """Unpacked size in bytes of a tag's first image (None when not built)."""
    images = (facts or {}).get("images") or []
    return (images[0].get("inspect") or {}).get("Size") if images else None


def change(label_old: str, old: Mapping[str, Any] | None, label_new: str,
           new: Mapping[str, Any] | None) -> dict[str, Any]:
    """One entry of the "what changed" page: the two sides' labels, their package change
    (``compare``) and sizes in bytes (``size_delta``: new - old, None when one is unknown)."""
    inv = [((f or {}).get("images") or [{}])[0].get("inventory") for f in (old, new)]
    so, sn = size_of(old), size_of(new)
    return {"old": label_old, "new": label_new, "packages": compare(inv[0], inv[1]),
            "size_old": so, "size_new": sn, "size_delta": (sn - so) if so is not None and sn is not None else None,
            "readable": all(i is not None for i in inv)}
