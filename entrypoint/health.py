"""The runtime images' HEALTHCHECK: is the device the entrypoint chose still usable?

Usage: stagecraft-health [--budget SECONDS]

Reads the entrypoint's start-up report (what was chosen, which devices), then re-checks
only those devices, cheaply and without importing the framework:
- NVIDIA: NVML (nvmlInit, then each chosen GPU by UUID and its memory info) within the
  budget. A container whose device access was revoked after start fails here: NVML's
  "Unknown Error" (999), which running containers get when systemd reloads units that
  reference NVIDIA devices, e.g. ``systemctl daemon-reload`` (NVIDIA's notice,
  NVIDIA/nvidia-container-toolkit#48: "the container needs to be deleted once the issue
  occurs").
- Kunlun, Ascend, AMD, Cambricon: the chosen devices' nodes and the family's control nodes
  still exist and may be opened read-write by this uid.
- CPU (or no report: the container was started without the entrypoint): nothing to check.
Which check a family gets, and its control nodes, are its record's ``health`` and
``controls`` (probes.families).

Exit 0 healthy, 1 unhealthy (Docker's HEALTHCHECK convention; 2 is reserved there, so a
bad option is also 1). One line on stdout: Docker keeps it in ``docker inspect``'s
State.Health.Log. STAGECRAFT_PROBE_ROOT (test/debug only) reads /dev under another root.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

DEFAULT_BUDGET_S = 2.0
HEALTHY, UNHEALTHY = 0, 1


def _nvml(nv: Any, uuids: Sequence[str]) -> str:
    """All NVML calls of one check through the pynvml module ``nv``; returns "" when every
    chosen GPU answers, else why. Raises pynvml.NVMLError (the caller words it)."""
    nv.nvmlInit()
    try:
        count = nv.nvmlDeviceGetCount()
        if not uuids and count < 1:
            return "NVML reports no GPU"
        for uuid in uuids:
            h = nv.nvmlDeviceGetHandleByUUID(uuid)
            nv.nvmlDeviceGetMemoryInfo(h)
        return ""
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down is best effort
            pass


def check_nvidia(devices: Sequence[Mapping[str, Any]], budget_s: float) -> tuple[int, str]:
    """(exit status, line) for the chosen NVIDIA GPUs (report device dicts with ``uuid``)."""
    from probes.budget import BudgetExceeded, call_within
    from probes.nvidia import import_pynvml

    uuids = [str(d["uuid"]) for d in devices if d.get("uuid")]
    try:
        # here, not in the worker (probes.budget.call_within): importing pynvml reads a
        # Python module and loads no library (nvmlInit does), so it is outside the
        # budget; Docker's HEALTHCHECK timeout still bounds the whole check
        nv = import_pynvml()
        why = call_within(lambda: _nvml(nv, uuids), budget_s, "NVML health check")
    except BudgetExceeded:
        return UNHEALTHY, f"unhealthy: NVML did not answer within {budget_s:g} s"
    except ImportError as exc:
        return UNHEALTHY, f"unhealthy: cannot load NVML ({exc})"
    except Exception as exc:  # noqa: BLE001 - pynvml.NVMLError and its subclasses
        code = getattr(exc, "value", None)
        hint = ("; GPU access was revoked from this container: recreate it" if code == 999 else "")
        return UNHEALTHY, f"unhealthy: NVML: {exc}{f' ({code})' if code is not None else ''}{hint}"
    if why:
        return UNHEALTHY, f"unhealthy: {why}"
    return HEALTHY, f"healthy: {len(uuids) or 'all'} NVIDIA GPU{'s' if len(uuids) != 1 else ''} answer NVML"


def check_nodes(family: str, devices: Sequence[Mapping[str, Any]], root: str) -> tuple[int, str]:
    """(exit status, line) for a device-node family: the chosen devices' nodes and the
    family's control nodes (its record's ``controls``; none for a family without a
    record) exist and may be opened read-write."""
    from probes import fsread
    from probes.families import find

    fam = find(family)
    paths = [str(d["node"]) for d in devices if d.get("node")] + list(fam.controls if fam else ())
    gone = [p for p in paths if not fsread.exists(root, p)]
    if gone:
        return UNHEALTHY, f"unhealthy: {', '.join(gone)} gone"
    denied = [p for p in paths if not fsread.may_open_rw(root, p)]
    if denied:
        return UNHEALTHY, f"unhealthy: no permission on {', '.join(denied)}"
    return HEALTHY, f"healthy: {family} nodes present and usable ({len(paths)} checked)"


def check(report: Mapping[str, Any] | None, budget_s: float, root: str = "/") -> tuple[int, str]:
    """(exit status, line) for a start-up report (None: there is none). The chosen
    family's record (probes.families ``health``) says what to check: NVML, its nodes,
    or nothing; a family without a record gets the node check."""
    from probes.families import find

    if not report:
        return HEALTHY, "healthy: no start-up report (started without the entrypoint): nothing to check"
    device = report.get("device")
    fam = find(device) if isinstance(device, str) else None
    if report.get("refused") or not device or (fam is not None and fam.health == "none"):
        return HEALTHY, f"healthy: {device or 'nothing'} chosen: nothing to check"
    devices = ((report.get("probes") or {}).get(device) or {}).get("devices") or []
    if fam is not None and fam.health == "nvml":
        return check_nvidia(devices, budget_s)
    return check_nodes(device, devices, root)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    import json

    from entrypoint import runtime

    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    budget = DEFAULT_BUDGET_S
    if args[:1] == ["--budget"] and len(args) == 2:
        try:
            budget = float(args[1])
        except ValueError:
            budget = -1.0
        if not budget > 0 or budget != budget or budget == float("inf"):
            print(f"stagecraft-health: --budget {args[1]!r}: not a positive number of seconds")
            return UNHEALTHY
    elif args:
        print("usage: stagecraft-health [--budget SECONDS]")
        return UNHEALTHY
    path = runtime.find(env)
    report = None
    if path:
        from probes import fsread

        raw = fsread.read_file(path, runtime.MAX_REPORT)  # regular files only, never blocks
        try:
            report = json.loads(raw.decode("utf-8")) if raw is not None else None
        except (ValueError, RecursionError) as exc:
            print(f"unhealthy: cannot read the start-up report {path}: {exc}")
            return UNHEALTHY
        if raw is None:
            print(f"unhealthy: cannot read the start-up report {path}: not a readable regular file")
            return UNHEALTHY
    code, line = check(report, budget, env.get("STAGECRAFT_PROBE_ROOT") or "/")
    print(line)
    return code
