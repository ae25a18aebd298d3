"""Shared steps for the device-node accelerator probes (xpu, npu, amd, mlu, and any
family whose record, probes.families, names device and control nodes)."""
from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from probes.families import Family

from probes import fsread, visible
from probes.types import ABSENT, UNUSABLE, Device, DeviceProbe

GRACE_S = 0.5  # seconds past the budget before the whole probe is given up: its vendor
# tool has the budget itself (probes.fsread.run_tool) and says so more precisely


def timed(family: str, fn: Callable[[], DeviceProbe], budget_s: float | None = None) -> DeviceProbe:
    """Run a probe body within ``budget_s`` + GRACE_S seconds (probes.budget; no limit
    when None); never raise; stamp elapsed_ms. Past the budget: ``unusable``, "timeout"."""
    from probes.budget import BudgetExceeded, call_within

    t0 = time.monotonic()
    try:
        r = fn() if budget_s is None else call_within(fn, budget_s + GRACE_S, f"{family} probe")
    except BudgetExceeded:
        r = DeviceProbe(family, UNUSABLE, f"timeout: the {family} probe did not finish within {budget_s:g} s")
    except Exception as exc:  # noqa: BLE001 - a probe never raises
        r = DeviceProbe(family, UNUSABLE, f"probe failed: {type(exc).__name__}: {exc}")
    return r._replace(elapsed_ms=round((time.monotonic() - t0) * 1000, 2))


def denied(root: str, paths: list[str]) -> list[str]:
    """The paths (that exist) this process may not open read-write."""
    return [p for p in paths if fsread.exists(root, p) and not fsread.may_open_rw(root, p)]


def gate(root: str, fam: Family, env: Mapping[str, str]) -> tuple[list[tuple[int, str]], DeviceProbe | None, list[str]]:
    """The steps every device-node family shares, from its record: its numbered nodes
    (``fam.nodes``, /dev/<prefix><N>), its visibility variables (probes.visible; none
    when the record has none), its control nodes, and permission to open the visible
    nodes. Returns ``(visible nodes, None, notes)`` when the family may go on to its own
    checks, else ``(nodes, the absent/unusable result, notes)``. Never raises for a
    well-formed record (the caller's ``timed`` catches the rest)."""
    family = fam.name
    why = visible.hidden_reason(family, env) if fam.visibility else ""
    if why:
        return [], DeviceProbe(family, ABSENT, why), []
    where, prefix = fam.node_parts()
    nodes = fsread.numbered(root, where, prefix)
    if not nodes:
        return nodes, DeviceProbe(family, ABSENT, f"no {fam.title} visible (no {fam.nodes})"), []
    found = [Device(index=i, node=p) for i, p in nodes]
    kept, notes, why = visible.select(family, found, env) if fam.visibility else (found, [], "")
    if why:
        return [], DeviceProbe(family, ABSENT, why, notes=tuple(notes)), notes
    nodes = [(d.index, d.node) for d in kept]
    missing = [p for p in fam.controls if not fsread.exists(root, p)]
    if missing:
        return nodes, DeviceProbe(family, UNUSABLE, f"{fam.nodes.replace('<N>', '*')} present but "
                                  + ", ".join(missing) + " missing (pass it with --device)"), notes
    no = denied(root, [p for _, p in nodes] + list(fam.controls))
    if no:
        return nodes, DeviceProbe(family, UNUSABLE, "no permission on " + ", ".join(no)
                                  + " (run with a group that may open them, or --privileged)"), notes
    return nodes, None, notes


def tool_failed(tool: str, why: str) -> str:
    """The reason for a vendor tool that gave no answer (probes.fsread.run_tool's text):
    ``timeout: npu-smi info timed out after 2.0 s``, ``cnmon: printed more than ...``."""
    return f"timeout: {tool} {why}" if why.startswith("timed out") else f"{tool}: {why}"


def keep_visible(parsed: list[Device], nodes: list[tuple[int, str]]) -> list[Device]:
    """Devices a vendor tool listed, restricted to the visible nodes' indices and in the
    visibility variable's order."""
    by_index = {d.index: d for d in parsed}
    return [by_index[i] for i, _ in nodes if i in by_index]
