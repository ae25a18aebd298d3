"""Pushed images in a registry: per tag and platform, the manifest digest and the bytes
the image takes there (config plus compressed layers), read through stagecraft's one
path to registries (stagecraft.registry.Registry: skopeo). I/O; ``merge`` (pure) adds what it read to the engine's facts.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..publish import remote_repository
from ..pushsteps import manifest_size
from ..registry import Registry, RegistryError, loopback


def _credentials(host: str) -> dict[str, Any] | None:
    """The Docker config's entry for ``host`` (helpers resolved), None when there is none."""
    try:
        import docker.auth

        return docker.auth.load_config().resolve_authconfig(host)
    except Exception:  # noqa: BLE001 - no config: anonymous pulls
        return None


def _platform(entry: Mapping[str, Any]) -> str:
    p = entry.get("platform") or {}
    text = f"{p.get('os', '')}/{p.get('architecture', '')}"
    return text + (f"/{p['variant']}" if p.get("variant") and p.get("architecture") != "arm64" else "")


def read_tag(client: Registry, path: str, tag: str) -> list[dict[str, Any]]:
    """[{"platform" ("" for a single-platform manifest), "digest", "compressed_size"
    (bytes)}] of ``path:tag``; attestation manifests (platform unknown/unknown) are left
    out. Raises RegistryError (a missing tag included)."""
    digest, body, _ = client.manifest(path, tag)
    doc = json.loads(body)
    if "manifests" not in doc:
        return [{"platform": "", "digest": digest, "compressed_size": manifest_size(body)}]
    out = []
    for m in doc["manifests"]:
        platform = _platform(m)
        if platform.startswith("unknown") or platform == "/":
            continue
        d, b, _ = client.manifest(path, m["digest"])
        out.append({"platform": platform, "digest": d, "compressed_size": manifest_size(b)})
    return out


def read_registry(registry: str, repository: str, tags: Iterable[str],
                  timeout_s: float = 30.0) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """(tag -> read_tag's list for the tags the registry has, notes: one line per tag
    that could not be read and why). ``registry``: ``HOST[:PORT][/NAMESPACE]``. Never raises
    for a registry that does not answer: the catalog then says sizes are unknown."""
    host, path = remote_repository(registry, repository)
    client = Registry(host, _credentials(host) or {}, insecure=loopback(host), timeout_s=timeout_s)
    out: dict[str, list[dict[str, Any]]] = {}
    notes = []
    for tag in tags:
        try:
            out[tag] = read_tag(client, path, tag)
        except (RegistryError, ValueError, KeyError) as exc:
            notes.append(f"{host}/{path}:{tag}: not read from the registry ({str(exc)[:160]})")
    return out, notes


def merge(facts: Mapping[str, Any], pushed: Mapping[str, list[dict[str, Any]]], where: str) -> dict[str, Any]:
    """The engine's facts with the registry's digests and compressed sizes added: to the
    image of the same platform (a single-platform manifest: the tag's only image), or as a
    new image entry with nothing else known (a platform, or a tag, not in the engine).
    ``where``: ``HOST[:PORT]/PATH`` the digests are named under."""
    out = {t: {**f, "images": [dict(i) for i in f.get("images", [])]} for t, f in facts.items()}
    for tag, entries in pushed.items():
        images = out.setdefault(tag, {"ref": f"{where}:{tag}", "images": []})["images"]
        for e in entries:
            same = [i for i in images if i.get("platform") == e["platform"]] or (
                images if not e["platform"] and len(images) == 1 else [])
            if same:
                same[0]["compressed_size"] = e["compressed_size"]
                same[0]["registry_digest"] = f"{where}@{e['digest']}"
            else:
                images.append({"platform": e["platform"], "compressed_size": e["compressed_size"],
                               "registry_digest": f"{where}@{e['digest']}"})
    return out
