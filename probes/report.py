"""Reports: probe results as JSON-ready dicts, and the host side of ``build.py probe``.

``host_report(root)`` probes every family and returns a dict;
``best_tag(report, images)`` names the matrix tag whose kernel sets suit this host best;
``format_probes(probes)`` is a person's view of the probes (the entrypoint's report and
``build.py probe`` both print it).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

from probes.types import CpuProbe, Device, DeviceProbe, to_jsonable

REPORT_SCHEMA = 1


def probes_to_dict(results: Mapping[str, Any]) -> dict[str, Any]:
    """{family: probe result} -> {family: plain dict}."""
    return {k: to_jsonable(v) for k, v in results.items()}  # type: ignore[misc]


def probes_from_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of probes_to_dict: plain dicts back into DeviceProbe / CpuProbe."""
    out: dict[str, Any] = {}
    for fam, d in data.items():
        if fam == "cpu":
            fields = {k: v for k, v in d.items() if k in CpuProbe._fields}
            fields["flags"] = frozenset(fields.get("flags", ()))
            fields["notes"] = tuple(fields.get("notes", ()))
            out[fam] = CpuProbe(**fields)
        else:
            fields = {k: v for k, v in d.items() if k in DeviceProbe._fields}
            devs = []
            for dd in fields.get("devices", ()):
                df = {k: v for k, v in dd.items() if k in Device._fields}
                df["mig_uuids"] = tuple(df.get("mig_uuids", ()))
                devs.append(Device(**df))
            fields["devices"] = tuple(devs)
            fields["notes"] = tuple(fields.get("notes", ()))
            out[fam] = DeviceProbe(**fields)
    return out


def format_probes(probes: Mapping[str, Any]) -> list[str]:
    """A person's view of probe dicts (probes_to_dict's shape): one entry per family,
    its devices, driver and notes on indented lines."""
    out: list[str] = []
    for fam, pr in probes.items():
        line = f"{fam:7s} {pr.get('state', '?'):9s}"
        if pr.get("reason"):
            line += f" {pr['reason']}"
        if fam == "cpu":
            line += (f" {pr.get('model', '')} [{pr.get('arch', '')}"
                     + (f" x86-64-v{pr['isa_level']}" if pr.get("isa_level") else "")
                     + f"] online {pr.get('online')} cpuset {pr.get('cpuset')} quota {pr.get('quota_cpus')}"
                     f" -> {pr.get('effective_cpus')} CPUs; memory limit {pr.get('memory_limit_bytes')}")
        for d in pr.get("devices", []):
            line += f"\n          [{d['index']}] {d.get('name', '')} {d.get('arch', '')} {d.get('uuid', '')}".rstrip()
        if pr.get("driver_version"):
            line += f"\n          driver {pr['driver_version']}" + (
                f", CUDA driver API {pr['api_version']}" if pr.get("api_version") else "")
        for n in pr.get("notes", []):
            line += f"\n          note: {n}"
        out.append(line)
    return out


def host_report(root: str = "/", budget_s: float = 3.0) -> dict[str, Any]:
    """Probe every device family under ``root``; {"schema": 1, "probes": {family: dict}}.
    Never raises (each probe reports its own failure)."""
    from probes import probe_all

    return {"schema": REPORT_SCHEMA, "root": root, "probes": probes_to_dict(probe_all(root, budget_s))}


def best_tag(report: Mapping[str, Any], images: Sequence[Mapping[str, Any]],
             built: Mapping[str, bool | None] | None = None) -> tuple[str | None, str]:
    """The tag that suits this host best, and why (probes.rank: known fits first, an
    accelerator over CPU, no fallback, fewer warnings, the most specific match, built,
    then matrix order, with a tie said to be one).

    images: [{"tag": str, "kernel_sets": [...]}] in matrix order; built: tag -> bool or
    None (unknown). Returns (None, reason) when no image can run here."""
    from probes.rank import explain, rank

    fits, refusals = rank(probes_from_dict(report.get("probes", {})), images, built)
    if not fits:
        return None, "no image in the matrix can run on this host: " + "; ".join(refusals)
    return fits[0].tag, explain(fits)
