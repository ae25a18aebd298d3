"""``build.py doctor``: the engine, its BuildKit, the build path and what it can do. Pure
over ``EngineFacts``; the CLI prints the result (text, or ``--json``)."""

from __future__ import annotations

from typing import Any

from .capabilities import EngineFacts, buildkit_version, capabilities


def doctor_report(facts: EngineFacts, ca_bundle: str) -> dict[str, Any]:
    """The doctor's findings as a JSON-ready dict: ``engine``, ``buildkit``
    (``version``, ``source``), ``build_path``, ``capabilities`` (list of ``name``, ``ok``,
    ``detail``) and ``ca_bundle`` (a description, or ``none``)."""
    version, source = buildkit_version(facts)
    if facts.path == "buildx":
        path = (f"{facts.client} + buildx {facts.buildx_version or '?'}: builder "
                f"{facts.builder or '?'} ({facts.driver or '?'} driver)")
    else:
        path = f"{facts.client} with DOCKER_BUILDKIT=1 (classic builder, no buildx)"
    return {
        "engine": {"version": facts.engine_version, "api": facts.api_version, "os": facts.os,
                   "storage": facts.storage, "containerd_store": facts.containerd_store},
        "buildkit": {"version": version, "source": source},
        "build_path": path,
        "platforms": list(facts.platforms),
        "capabilities": [{"name": c.name, "ok": c.ok, "detail": c.detail}
                         for c in capabilities(facts)],
        "ca_bundle": ca_bundle,
    }


def format_report(report: dict[str, Any]) -> list[str]:
    """The report as aligned lines for a person."""
    e = report["engine"]
    lines = [
        f"{'engine':<12} Docker {e['version']} (API {e['api']}), {e['os']}; storage {e['storage']}",
        f"{'buildkit':<12} {report['buildkit']['version']} ({report['buildkit']['source']})",
        f"{'build path':<12} {report['build_path']}",
        f"{'ca bundle':<12} {report['ca_bundle']}",
        "capabilities:",
    ]
    width = max(len(c["name"]) for c in report["capabilities"])
    for c in report["capabilities"]:
        lines.append(f"  {c['name']:<{width}}  {'yes' if c['ok'] else 'no '}  {c['detail']}")
    return lines
