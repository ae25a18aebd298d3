"""Checks before a build that save a doomed one, reached the way pip inside the build
will (HTTPS with the CA bundle the build gets):

- is each framework's package index reachable from this host? (A framework on PyPI is
  not checked: the builds report PyPI failures themselves.)
- does PyPI have every NVIDIA wheel version the stages to build pin? A wrong pin is bad
  input (one line at its matrix.yaml line, exit 2) found in a second, not a failed pip
  step minutes into a CUDA stage. Stages already built are not asked about: their key
  holds the pins, so their wheels existed.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .cabundle import CABundle
from .expand import ImageSpec


def index_reachable(url: str, bundle: CABundle | None, timeout_s: float = 8.0) -> str:
    """'' when ``url`` answers (any HTTP status), else the reason it does not."""
    context = ssl.create_default_context(cafile=str(bundle.path) if bundle else None)
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s,
                               context=context)
    except urllib.error.HTTPError:
        return ""  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason)[:160] or type(exc).__name__
    return ""


def unreachable(specs: list[ImageSpec], bundle: CABundle | None) -> dict[str, str]:
    """Tag -> why its framework's index cannot be reached from here (each URL tried once)."""
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for spec in specs:
        url = spec.framework.get("index_url")
        if not url:
            continue
        if url not in seen:
            seen[url] = index_reachable(url, bundle)
        if seen[url]:
            out[spec.tag] = f"package index {url} is not reachable from this host ({seen[url]})"
    return out


PYPI_SIMPLE = "https://pypi.org/simple"
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"  # PEP 691


def index_versions(name: str, bundle: CABundle | None, index: str = PYPI_SIMPLE,
                   timeout_s: float = 20.0) -> set[str] | None:
    """The versions of ``name`` that have a wheel on the index (its PEP 691 JSON simple
    page), or None when the index cannot be asked (network, proxy, a non-JSON index)."""
    import json

    context = ssl.create_default_context(cafile=str(bundle.path) if bundle else None)
    norm = canonicalize_name(name)
    req = urllib.request.Request(f"{index.rstrip('/')}/{norm}/", headers={"Accept": _SIMPLE_JSON})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=context) as resp:
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        return set() if exc.code == 404 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None
    # Wheel file names: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
    # (PEP 427), the distribution with - as _; compared PEP 503-normalised.
    out = set()
    for f in data.get("files", []):
        parts = str(f.get("filename", "")).split("-")
        if len(parts) >= 5 and parts[-1].endswith(".whl") and not f.get("yanked"):
            if canonicalize_name(parts[0]) == norm:
                out.add(parts[1])
    return out


def wheel_pins(matrix, specs_and_stages) -> dict[tuple[str, str], list]:
    """``(package, version) -> matrix path`` of the NVIDIA wheel pins that the given
    stages install: ``specs_and_stages`` yields ``(ImageSpec, stage name)``; the cuda and
    accel stages install their component's ``pypi`` table, a runtime stage with
    ``build.fatbins`` the ``build_tools``."""
    pins: dict[tuple[str, str], list] = {}
    for spec, stage in specs_and_stages:
        if stage in ("cuda", "accel"):
            comp = spec.components.get(stage)
            for pkg, version in ((comp or {}).get("pypi") or {}).items():
                pins.setdefault((pkg, str(version)), ["components", stage, comp["name"], "pypi", pkg])
        elif stage == "runtime" and spec.framework.get("build", {}).get("fatbins"):
            for tool, req in matrix.build_tools.items():
                pkg, _, version = req.partition("==")
                pins.setdefault((pkg.strip(), version.strip()), ["build_tools", tool])
    return pins


def missing_wheels(matrix, pins: dict[tuple[str, str], list], bundle: CABundle | None,
                   index: str = PYPI_SIMPLE) -> tuple[list, list[str]]:
    """The pins (from ``wheel_pins``) the index has no wheel for: ``(problems, notes)``.
    Each problem is an ``errors.Problem`` at the pin's line in matrix.yaml, naming the
    latest versions the index has; ``notes`` say what could not be checked (the index did
    not answer). Each project is asked once, several at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from .errors import Problem

    names = sorted({pkg for pkg, _ in pins})
    with ThreadPoolExecutor(max_workers=8) as pool:
        seen = dict(zip(names, pool.map(lambda n: index_versions(n, bundle, index), names), strict=True))
    problems, notes = [], []
    for (pkg, version), path in sorted(pins.items()):
        have = seen[pkg]
        if have is None:
            notes.append(f"cannot check {pkg}=={version} against {index} (no answer)")
        elif version not in have:
            near = sorted(have, key=_version_key)[-4:]
            problems.append(Problem(matrix.locate(path), f"{pkg}=={version}: {index} has no wheel "
                                    f"of that version ({'latest: ' + ', '.join(near) if near else 'no such project'})",
                                    "pin a version the index has"))
    return problems, notes


def _version_key(v: str) -> tuple:
    """PEP 440 order (packaging's ``Version``: 1.0.dev1 < 1.0rc1 < 1.0 < 1.0.post1); a
    version packaging cannot read (a legacy upload) sorts before every other."""
    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)
