"""The entries of matrix.lock an image needs, by key, and what each stage installs
according to matrix.yaml (its Debian packages, its NVIDIA wheels). Pure.

Keys are readable names: ``debian debian12 linux/amd64`` (one Debian entry per base and
platform), ``runtime paddle-2.6.2-cpu on debian12 linux/amd64`` (one Python entry per
requirement set, base and platform), ``build-tool cuobjdump on debian12 linux/amd64``.
``lockfile.wanted`` assembles the entries' inputs from them.
"""

from __future__ import annotations

import re
from typing import Any

from .expand import ImageSpec

DEFAULT_PLATFORM = "linux/amd64"
# Where a stage's Debian packages come from in matrix.yaml: stage -> component table.
APT_TABLES = {"base": "base", "accel": "accel", "runtime": "framework"}


def platforms(spec: ImageSpec) -> tuple[str, ...]:
    """The OCI platforms (``linux/amd64``) an image is built for."""
    found = getattr(spec, "platforms", None) or spec.components.get("platforms")
    return tuple(found) if found else (DEFAULT_PLATFORM,)



def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def debian_key(spec: ImageSpec, platform: str) -> str:
    """Key of the Debian entry of ``spec``'s base on ``platform``."""
    return f"debian {spec.base['name']} {platform}"


def stage_apt(components: dict[str, Any], stage: str) -> dict[str, Any]:
    """The Debian packages (``{package: {"version", "why"}}``) a stage installs: the
    base's ``apt`` for the base stage; for the runtime stage the framework's ``apt`` and
    the base's ``toolkit_apt`` (what the frameworks' common toolkits load), one set; for
    the accel stage the accel component's ``apt``."""
    if stage == "base":
        return dict((components.get("base") or {}).get("apt") or {})
    if stage == "runtime":
        return {**((components.get("base") or {}).get("toolkit_apt") or {}),
                **((components.get("framework") or {}).get("apt") or {})}
    if stage == "accel":  # what NCCL and cuFile RDMA load (rdma-core's user space)
        return dict((components.get("accel") or {}).get("apt") or {})
    return {}


def apt_stage_name(spec: ImageSpec, stage: str) -> str:
    """Name of a stage's apt set inside its Debian entry (``base``, ``runtime paddle-...``)."""
    table = APT_TABLES[stage]
    return stage if table == "base" else f"{stage} {spec.components[table]['name']}"


def python_key(spec: ImageSpec, stage: str, platform: str) -> str | None:
    """Key of the Python requirement set a stage installs, or None when it installs none."""
    comps = spec.components
    on = f"on {spec.base['name']} {platform}"
    if stage == "runtime":
        return f"runtime {comps['framework']['name']} {on}"
    if stage == "jupyter" and comps.get("jupyter"):
        return f"jupyter {comps['jupyter']['name']}+{comps['framework']['name']} {on}"
    if stage == "toolkit" and comps.get("toolkit"):
        return f"toolkit {comps['toolkit']['name']}+{comps['framework']['name']} {on}"
    if stage in ("cuda", "accel") and comps.get(stage) and comps[stage].get("pypi") \
            and comps[stage].get("source", "pypi") == "pypi":
        return f"{stage} {comps[stage]['name']} {on}"
    return None


def stage_pins(spec: ImageSpec, upto: str) -> list[str]:
    """``pkg==version`` of the NVIDIA wheels the cuda stage (and, with ``upto="accel"``,
    the accel stage) of ``spec`` installs."""
    tables = ("cuda", "accel") if upto == "accel" else ("cuda",)
    return [f"{p}=={v}" for t in tables for p, v in
            sorted(((spec.components.get(t) or {}).get("pypi") or {}).items())
            if t in spec.chain]


def debian_arch(platform: str) -> str:
    """Debian's name for the architecture of ``platform`` (``linux/arm64`` -> ``arm64``)."""
    return {"amd64": "amd64", "arm64": "arm64"}.get(platform.split("/")[1], platform.split("/")[1])



def tool_key(spec: ImageSpec, platform: str) -> str:
    """Key of the Python entry of the build tool cuobjdump on ``spec``'s base and ``platform``."""
    return f"build-tool cuobjdump on {spec.base['name']} {platform}"
