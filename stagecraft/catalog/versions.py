"""What an image holds, read from the image itself: component versions from its installed
distributions (the SBOM inventory, ``stagecraft.sbom.inventory``) set against what its
labels and the matrix say, so a tag whose label lies shows the truth and a flag. Pure.

Where each version is read (the wheels and Debian packages the templates install):
framework: the Python distribution the ``io.stagecraft.framework`` label names; CUDA:
``nvidia-cuda-runtime-cuNN`` (else Debian ``cuda-cudart-X-Y``); cuDNN: ``nvidia-cudnn-cuNN``
(else Debian ``libcudnnN``); NCCL: ``nvidia-nccl-cuNN`` (else Debian ``libnccl2``);
Python: Debian ``python3`` (else ``python3.X``; the base installs the distribution's own Python).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

# component -> (label key, [(manager, name pattern)]), in the order the page lists them.
SOURCES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "framework": ("io.stagecraft.framework.version", []),  # the distribution is named by a label
    "CUDA": ("io.stagecraft.cuda", [("python", r"nvidia-cuda-runtime-cu\d+"), ("debian", r"cuda-cudart-\d+-\d+")]),
    "cuDNN": ("io.stagecraft.cudnn", [("python", r"nvidia-cudnn-cu\d+"), ("debian", r"libcudnn\d+")]),
    "NCCL": ("io.stagecraft.nccl", [("python", r"nvidia-nccl-cu\d+"), ("debian", r"libnccl2")]),
    "Python": ("io.stagecraft.python", [("debian", r"python3"), ("debian", r"python3\.\d+")]),
}


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Paddle_Paddle`` -> ``paddle-paddle``;
    packaging's ``canonicalize_name``)."""
    return canonicalize_name(name)


def release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: ``"2.10.0+cu128"`` -> (2, 10, 0); Debian's
    ``"1:3.11.2-1+b1"`` -> (3, 11, 2) (epoch dropped); () when there are none."""
    v = str(version).split(":", 1)[-1]
    m = re.match(r"\d+(?:\.\d+)*", v)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def agrees(stated: str, found: str) -> bool:
    """Whether a stated version (label, matrix: ``"8.6"``, ``"8.6.0"``) matches an installed
    one (``"8.6.0.163"``): every number stated equals the installed one's at that place."""
    s, f = release(stated), release(found)
    return bool(s) and f[:len(s)] == s


def installed(inventory: Mapping[str, Any] | None, manager: str, pattern: str) -> tuple[str, str] | None:
    """(name, version) of the first package of ``manager`` (``python``/``debian``) whose
    name matches ``pattern`` fully (case-insensitive); None when none is installed."""
    for pkg in (inventory or {}).get(manager, ()):
        name = str(pkg.get("name", ""))
        if re.fullmatch(pattern, normalise(name), re.I):
            return name, str(pkg.get("version", ""))
    return None


def _found(component: str, inventory: Mapping[str, Any] | None, labels: Mapping[str, str],
           package: str) -> tuple[str | None, str]:
    """(installed version, "package (pip|dpkg)") of a component; (None, "") when absent."""
    if component == "framework":
        name = labels.get("io.stagecraft.framework") or package
        hit = installed(inventory, "python", re.escape(normalise(name))) if name else None
        return (hit[1], f"{hit[0]} (pip)") if hit else (None, "")
    for manager, pattern in SOURCES[component][1]:
        hit = installed(inventory, manager, pattern)
        if hit is not None:
            v = hit[1]
            if component == "Python":
                v = ".".join(str(x) for x in release(v)[:2])
            return v, f"{hit[0]} ({'pip' if manager == 'python' else 'dpkg'})"
    return None, ""


def version_rows(inventory: Mapping[str, Any] | None, labels: Mapping[str, str],
                 intent: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per component the image, its labels or the matrix mention: ``{"component",
    "found" (installed version or None), "source" (package it was read from), "label",
    "matrix", "flags" [text]}``. A flag says a label or the matrix disagrees with the
    contents, or that a stated component is not installed. ``intent``: component ->
    version the matrix declares (``"framework"`` also ``"package"``). Without an
    inventory (image not read) nothing is flagged: the found column says unknown."""
    rows = []
    for comp, (label_key, _) in SOURCES.items():
        label = labels.get(label_key, "")
        want = str(intent.get(comp, "") or "")
        found, source = _found(comp, inventory, labels, str(intent.get("package", "")))
        if not (label or want or found):
            continue
        flags = []
        if inventory is not None:
            if found is None and (label or want):
                flags.append(f"stated ({label or want}) but not installed")
            if found is not None and label and not agrees(label, found):
                flags.append(f"label {label_key}={label} disagrees with the installed {found}")
            if found is not None and want and not agrees(want, found) and want != label:
                flags.append(f"the matrix intends {want}; the image holds {found}")
        rows.append({"component": comp, "found": found, "source": source, "label": label,
                     "matrix": want, "flags": flags})
    return rows


def tag_claims(tag: str, rows: list[dict[str, Any]]) -> list[str]:
    """Flags for a tag name that claims a CUDA or cuDNN version the image does not hold
    (``...-cuda11.8`` holding CUDA 12.1, as gpu-jupyter#139 reported)."""
    out = []
    found = {r["component"]: r["found"] for r in rows}
    for comp, word in (("CUDA", "cuda"), ("cuDNN", "cudnn")):
        m = re.search(rf"(?<![a-z]){word}(\d+(?:\.\d+)*)", tag)
        if m and found.get(comp) and not agrees(m.group(1), found[comp]):
            out.append(f"the tag names {word}{m.group(1)}, the image holds {comp} {found[comp]}")
    return out
