"""Hardware probes: one module per device family, plus the pure kernel-set choice.

Every probe reads the machine through one ``root`` path (default ``/``), runs within a
time budget and never raises; see probes.types for the result shapes and states.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

from probes.families import NAMES, get
from probes.types import CpuProbe, DeviceProbe

DEFAULT_BUDGET_S = 3.0


def probe_family(family: str, root: str = "/", budget_s: float = DEFAULT_BUDGET_S,
                 env: Mapping[str, str] | None = None) -> DeviceProbe | CpuProbe:
    """Run one family's probe (``"nvidia"``, ``"xpu"``, ``"npu"``, ``"amd"``, ``"mlu"``,
    ``"cpu"``, or a registered family: its record's ``probe`` module, probes.families);
    imports the module only now. Raises ValueError for an unknown family."""
    try:
        record = get(family)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    __import__(record.probe)  # importlib.import_module's work, without importing importlib
    mod = sys.modules[record.probe]  # (and warnings): 0.4 ms of every start (issue 22)
    if family == "cpu":
        return mod.probe(root, budget_s)  # type: ignore[no-any-return]
    return mod.probe(root, budget_s, env)  # type: ignore[no-any-return]


def probe_all(root: str = "/", budget_s: float = DEFAULT_BUDGET_S,
              families: Sequence[str] | None = None,
              env: Mapping[str, str] | None = None) -> dict[str, DeviceProbe | CpuProbe]:
    """Probe the given families (default: all) and return {family: result}, cpu included.
    ``budget_s`` is each family's budget (seconds); only families with device nodes run
    vendor tools or NVML, so the common path costs a few file reads."""
    wanted = list(families) if families is not None else list(NAMES)
    if "cpu" not in wanted:
        wanted.append("cpu")
    return {f: probe_family(f, root, budget_s, env) for f in wanted}
