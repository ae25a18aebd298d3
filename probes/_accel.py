"""Shared steps for the device-node accelerator probes (xpu, npu, amd, mlu)."""
from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Callable

from probes import _fs
from probes.types import UNUSABLE, DeviceProbe


def timed(family: str, fn: Callable[[], DeviceProbe]) -> DeviceProbe:
    """Run a probe body; never raise; stamp elapsed_ms."""
    t0 = time.monotonic()
    try:
        r = fn()
    except Exception as exc:  # noqa: BLE001 - a probe never raises
        r = DeviceProbe(family, UNUSABLE, f"probe failed: {type(exc).__name__}: {exc}")
    return r._replace(elapsed_ms=round((time.monotonic() - t0) * 1000, 2))


def denied(root: str, paths: list[str]) -> list[str]:
    """The paths (that exist) this process may not open read-write."""
    return [p for p in paths if _fs.exists(root, p) and not _fs.may_open_rw(root, p)]
