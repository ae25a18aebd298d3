"""Checks before a build that save a doomed one: is each framework's package index
reachable from this host? (Reached the way pip inside the build will: HTTPS with the CA
bundle the build gets.) A framework on PyPI is not checked: the builds report PyPI
failures themselves."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request

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
