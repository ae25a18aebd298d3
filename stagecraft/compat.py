"""Compatibility rules between the components of one image, applied at load time.

The facts (minimum drivers, which CUDA majors a cuDNN/NCCL/TensorRT release exists for)
are data in ``compatibility.yaml`` beside this module, with their sources; which framework
versions a toolkit works with is data on the toolkit's entry in matrix.yaml
(``frameworks``: import name -> PEP 440 specifier). ``check`` returns the broken rules of
one combination as sentences that name the rule, so a bad matrix entry is refused before
anything is built.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from .model import Matrix

TABLE_PATH = Path(__file__).with_name("compatibility.yaml")


@cache
def table() -> dict[str, Any]:
    """The compatibility table: ``cuda`` -> {min_driver, min_driver_compat},
    ``cudnn``/``nccl``/``tensorrt`` major.minor -> list of CUDA majors."""
    return yaml.safe_load(TABLE_PATH.read_text())


def major_minor(version: str) -> str:
    """``"8.6.0.163"`` -> ``"8.6"``; ``"11"`` -> ``"11"``."""
    return ".".join(str(version).split(".")[:2])


def cuda_facts(cuda: str) -> dict[str, str] | None:
    """Driver facts for a CUDA release (``"11.8"``), or None when the table lacks it."""
    return table()["cuda"].get(major_minor(cuda))


def check(matrix: Matrix, components: dict[str, dict[str, Any]],
          platforms: tuple[str, ...] = ()) -> list[str]:
    """The rules one combination breaks, each a sentence starting with the rule's name.

    ``components`` maps axis -> component entry (with ``name``); ``platforms`` the OCI
    platforms the image is built for (normalised; empty: the host's, checked by
    ``platform_rules`` once the host is known). Rules: framework-platform, base-platform,
    device-needs-cuda, cpu-without-cuda, cuda-known, framework-cuda, framework-cudnn,
    cudnn-cuda-major, nccl-cuda-major, tensorrt-cuda-major, wheel-cuda-major,
    framework-python, toolkit-framework, framework-wheels.
    """
    broken: list[str] = platform_rules(components, platforms)
    fw = components["framework"]
    base = components["base"]
    cuda = components.get("cuda")
    accel = components.get("accel")
    facts = table()

    if components.get("toolkit"):
        broken += _toolkit_rules(components["toolkit"], fw)

    supported = fw.get("build", {}).get("python")
    if supported and base["python"] not in supported:
        broken.append(f"framework-python: {fw['name']} has builds for Python "
                      f"{', '.join(supported)}, not {base['python']} (base {base['name']})")
    if fw["device"] == "nvidia" and cuda is None:
        broken.append(f"device-needs-cuda: {fw['name']} is an NVIDIA build but the image "
                      "has no cuda component")
    if fw["device"] != "nvidia" and (cuda or accel):
        broken.append(f"cpu-without-cuda: {fw['name']} is a {fw['device']} build; CUDA "
                      "components do not belong in its image")
    if cuda is None:
        return broken
    cuda_v = str(cuda["cuda"])
    cuda_major = cuda_v.split(".")[0]
    if major_minor(cuda_v) not in facts["cuda"]:
        broken.append(f"cuda-known: CUDA {cuda_v} is not in the compatibility table "
                      f"(known: {', '.join(facts['cuda'])})")
    req = fw.get("requires", {})
    if "cuda" in req and major_minor(req["cuda"]) != major_minor(cuda_v):
        broken.append(f"framework-cuda: {fw['name']} is built for CUDA {req['cuda']}; "
                      f"component {cuda['name']} provides CUDA {cuda_v}")
    if "cudnn" in req and "cudnn" in cuda:
        want, have = major_minor(req["cudnn"]), major_minor(str(cuda["cudnn"]))
        w_major, h_major = want.split(".")[0], have.split(".")[0]
        if w_major != h_major or _vt(have) < _vt(want):
            broken.append(f"framework-cudnn: {fw['name']} is built for cuDNN {req['cudnn']}; "
                          f"component {cuda['name']} provides cuDNN {cuda['cudnn']} (the major "
                          "must match and the minor be at least the build's)")
    for lib, comp in (("cudnn", cuda), ("nccl", accel), ("tensorrt", accel)):
        if comp is None or not comp.get(lib):
            continue
        mm = major_minor(str(comp[lib]))
        majors = facts[lib].get(mm)
        if majors is None:
            broken.append(f"{lib}-cuda-major: {lib} {comp[lib]} is not in the compatibility "
                          f"table (known: {', '.join(facts[lib])})")
        elif int(cuda_major) not in majors:
            broken.append(f"{lib}-cuda-major: {lib} {comp[lib]} exists for CUDA "
                          f"{', '.join(map(str, majors))}.x, not CUDA {cuda_v}")
    for comp in (cuda, accel):
        if comp is None:
            continue
        for pkg in comp.get("pypi", {}):
            suffix = pkg.rsplit("-", 1)[-1]
            if suffix.startswith("cu") and suffix[2:].isdigit() and suffix[2:] != cuda_major:
                broken.append(f"wheel-cuda-major: {comp['name']} installs {pkg}, a CUDA "
                              f"{suffix[2:]} wheel, under CUDA {cuda_v}")
    broken += framework_wheels(fw, cuda, accel)
    return broken


def platform_rules(components: dict[str, dict[str, Any]], platforms: tuple[str, ...]) -> list[str]:
    """Rules framework-platform (the framework has builds, e.g. wheels, for every platform
    of the image: ``framework.build.platforms``) and base-platform (``base.platforms``).
    A component that declares no platforms accepts any."""
    from .platforms import normalise

    broken = []
    for axis, rule, what in (("framework", "framework-platform", "builds"),
                             ("base", "base-platform", "a base")):
        comp = components.get(axis)
        if comp is None:
            continue
        declared = comp.get("build", {}).get("platforms") if axis == "framework" else comp.get("platforms")
        if not declared:
            continue
        have = [normalise(p) for p in declared]
        missing = [p for p in platforms if p not in have]
        if missing:
            broken.append(f"{rule}: {comp['name']} has {what} for {', '.join(have)}, "
                          f"not {', '.join(missing)}")
    return broken


def _toolkit_rules(toolkit: dict[str, Any], fw: dict[str, Any]) -> list[str]:
    """toolkit-framework: the framework (by its import name, so ``paddlepaddle`` and
    ``paddlepaddle-gpu`` alike are ``paddle``) is one the toolkit lists, at a version its
    specifier admits (PEP 440, ``packaging.specifiers``)."""
    works_with = toolkit.get("frameworks", {})
    name = f"{toolkit['name']} ({toolkit['package']} {toolkit['version']})"
    if fw["import"] not in works_with:
        listed = ", ".join(works_with) or "none"
        return [f"toolkit-framework: {name} lists no versions of {fw['import']} "
                f"(framework {fw['name']}); it works with: {listed}"]
    try:
        spec = SpecifierSet(works_with[fw["import"]])
        version = Version(str(fw["version"]))
    except (InvalidSpecifier, InvalidVersion) as exc:
        return [f"toolkit-framework: {name}: {exc}"]
    if not spec.contains(version, prereleases=True):
        return [f"toolkit-framework: {name} works with {fw['import']} {works_with[fw['import']]}; framework "
                f"{fw['name']} is {fw['import']} {fw['version']}"]
    return []


def framework_wheels(fw: dict[str, Any], cuda: dict[str, Any] | None,
                     accel: dict[str, Any] | None) -> list[str]:
    """Rule framework-wheels: every NVIDIA wheel the framework's package pins
    (``cuda_wheels``, its Requires-Dist) is installed by the cuda or accel stage at that
    version. Otherwise pip would install a second copy of the library into the runtime
    (a different version), or one the stages lack. One sentence per wheel, naming both
    versions."""
    wants = fw.get("cuda_wheels") or {}
    have: dict[str, tuple[str, str]] = {}
    for comp in (cuda, accel):
        for pkg, version in ((comp or {}).get("pypi") or {}).items():
            have[canonicalize_name(pkg)] = (str(version), comp["name"])
    out = []
    for pkg, version in wants.items():
        got = have.get(canonicalize_name(pkg))
        if got is None:
            out.append(f"framework-wheels: {fw['name']} requires {pkg}=={version}, which neither "
                       f"the cuda nor the accel stage installs (pip would add it to the runtime)")
        elif got[0] != str(version):
            out.append(f"framework-wheels: {fw['name']} pins {pkg}=={version}; {got[1]} installs "
                       f"{pkg}=={got[0]} (pip would install {version} again beside it)")
    return out


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())
