"""NVIDIA GPU probe through NVML (pynvml, PyPI ``nvidia-ml-py``).

``probe(root, budget_s, env)`` never raises. It imports pynvml only when NVIDIA is
plausible (a /dev/nvidia* node under root, or libnvidia-ml.so.1 where the dynamic loader
would find it), initialises NVML once, queries every GPU, shuts NVML down, and runs all
NVML calls in one worker thread under ``budget_s`` seconds: NVML calls can hang on some
drivers (e.g. NVIDIA/nvidia-docker#1133-style reports of nvidia-smi hanging), and a probe
must not hold a container's start.

NVML calls used (https://docs.nvidia.com/deploy/nvml-api/): nvmlInitWithFlags,
nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, nvmlDeviceGetCount_v2,
nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
nvmlDeviceGetCudaComputeCapability, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMigMode,
nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex, nvmlShutdown.
Error codes are NVML's ``nvmlReturn_t`` (pynvml.NVML_ERROR_*).
"""
from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

from probes import fsread
from probes.budget import BudgetExceeded, call_within
from probes.nvidia_visible import hidden_reason, visible
from probes.types import ABSENT, UNUSABLE, USABLE, Device, DeviceProbe

LIBRARY = "libnvidia-ml.so.1"
# glibc's compiled-in search dirs on the distributions we build on (Debian multiarch,
# RHEL lib64); the NVIDIA runtime mounts the library into one of them and runs ldconfig.
LOADER_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
               "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
DEFAULT_BUDGET_S = 2.0

# nvmlReturn_t values (nvml.h) -> (state, reason) when nvmlInit fails.
_INIT_ERRORS = {
    4: (UNUSABLE, "no permission to use the GPU (NVML: Insufficient Permissions)"),
    9: (UNUSABLE, "NVIDIA driver not loaded (NVML: Driver Not Loaded)"),
    12: (UNUSABLE, "NVML library libnvidia-ml.so.1 not found"),
    15: (UNUSABLE, "GPU is lost (NVML: GPU is lost); the host needs attention"),
    17: (UNUSABLE, "the operating system blocked NVML (NVML: Operating System)"),
    18: (UNUSABLE, ("driver/library version mismatch (NVML: RM version mismatch): "
                    "driver upgraded without reboot, or a stale libnvidia-ml in the image")),
}


def find_library(root: str, env: Mapping[str, str]) -> str | None:
    """Where the loader would find libnvidia-ml.so.1, or None. Mirrors ld.so's order:
    LD_LIBRARY_PATH (real paths), root/etc/ld.so.cache, then the default dirs under root."""
    for d in env.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.isfile(os.path.join(d, LIBRARY)):
            return os.path.join(d, LIBRARY)
    cache = fsread.read(root, "/etc/ld.so.cache", limit=4 << 20)
    if cache and LIBRARY in cache:
        return "ld.so.cache:" + LIBRARY
    for d in LOADER_DIRS:
        if fsread.exists(root, f"{d}/{LIBRARY}"):
            return f"{d}/{LIBRARY}"
    return None


def _stub_ctypes_util() -> object | None:
    """Put a stand-in ``ctypes.util`` in sys.modules while pynvml imports, and return it
    (None when the real one is loaded already). pynvml does ``from ctypes.util import
    find_library`` and never calls it (nvidia-ml-py 11 to 13); the real module imports
    tempfile, shutil, subprocess and random: about 10 ms of a 60 ms start-up budget. The
    stand-in's find_library loads the real module on first call, so it stays correct."""
    import importlib
    import sys
    import types

    if "ctypes.util" in sys.modules:
        return None
    stub = types.ModuleType("ctypes.util", "stand-in while pynvml imports (probes.nvidia)")

    def find_library(name: str) -> str | None:
        if sys.modules.get("ctypes.util") is stub:
            del sys.modules["ctypes.util"]
        return importlib.import_module("ctypes.util").find_library(name)  # type: ignore[no-any-return]

    stub.find_library = find_library  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = stub
    return stub


def import_pynvml() -> Any:
    """Import pynvml (with ctypes.util stubbed, see _stub_ctypes_util); under ``python -S``
    (the entrypoint skips site for a faster start) add the interpreter's (venv's)
    site-packages first, only now that NVML is needed: just the directory (pynvml is one
    module, no .pth needed), else site.main(). Raises ImportError."""
    import sys

    stub = _stub_ctypes_util()
    try:
        return _import_pynvml_from_path()
    finally:
        if stub is not None and sys.modules.get("ctypes.util") is stub:
            del sys.modules["ctypes.util"]


def _import_pynvml_from_path() -> Any:
    try:
        import pynvml
    except ImportError:
        import sys

        if not sys.flags.no_site:
            raise
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
        sp = os.path.join(prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
        if os.path.isdir(sp) and sp not in sys.path:
            sys.path.append(sp)
        try:
            import pynvml
        except ImportError:
            import site

            site.main()
            import pynvml
    return pynvml


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _query(nv: Any) -> dict[str, Any]:
    """All NVML calls, in one thread: init once, read, shut down. Raises pynvml.NVMLError."""
    nv.nvmlInit()
    try:
        out: dict[str, Any] = {"driver": "", "cuda": 0, "gpus": [], "errors": []}
        out["driver"] = _text(nv.nvmlSystemGetDriverVersion())
        try:
            out["cuda"] = int(nv.nvmlSystemGetCudaDriverVersion())
        except nv.NVMLError as exc:
            out["errors"].append(f"CUDA driver version: {exc}")
        for i in range(nv.nvmlDeviceGetCount()):
            g: dict[str, Any] = {"index": i}
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
                g["name"] = _text(nv.nvmlDeviceGetName(h))
                g["uuid"] = _text(nv.nvmlDeviceGetUUID(h))
                g["cc"] = tuple(nv.nvmlDeviceGetCudaComputeCapability(h))
                g["memory"] = int(nv.nvmlDeviceGetMemoryInfo(h).total)
            except nv.NVMLError as exc:
                g["error"] = f"GPU {i}: {exc}"
                out["gpus"].append(g)
                continue
            try:
                g["mig"] = bool(nv.nvmlDeviceGetMigMode(h)[0])
            except nv.NVMLError:
                g["mig"] = None  # not supported on this GPU
            migs = []
            if g["mig"]:
                try:
                    for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
                        try:
                            m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                            migs.append(_text(nv.nvmlDeviceGetUUID(m)))
                        except nv.NVMLError:
                            continue
                except nv.NVMLError as exc:
                    out["errors"].append(f"GPU {i} MIG devices: {exc}")
            g["migs"] = tuple(migs)
            out["gpus"].append(g)
        return out
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down is best effort
            pass


def _cuda_version(v: int) -> str:
    """NVML's CUDA driver version integer (12040) as ``"12.4"``."""
    return f"{v // 1000}.{(v % 1000) // 10}" if v > 0 else ""


def probe(root: str = "/", budget_s: float = DEFAULT_BUDGET_S,
          env: Mapping[str, str] | None = None) -> DeviceProbe:
    """Probe NVIDIA GPUs. See the module docstring; never raises."""
    t0 = time.monotonic()
    env = os.environ if env is None else env
    try:
        r = _probe(root, budget_s, env)
    except Exception as exc:  # noqa: BLE001 - a probe never raises
        r = DeviceProbe("nvidia", UNUSABLE, f"probe failed: {type(exc).__name__}: {exc}")
    return r._replace(elapsed_ms=round((time.monotonic() - t0) * 1000, 2))


def _probe(root: str, budget_s: float, env: Mapping[str, str]) -> DeviceProbe:
    why = hidden_reason(env)
    if why:
        return DeviceProbe("nvidia", ABSENT, why)
    nodes = fsread.numbered(root, "/dev", "nvidia")
    ctl = fsread.exists(root, "/dev/nvidiactl")
    lib = find_library(root, env)
    where = "/dev/nvidia* present" if nodes else "no /dev/nvidia*"
    if lib is None:
        if nodes or ctl:
            return DeviceProbe("nvidia", UNUSABLE, f"{where} but NVML library {LIBRARY} not found "
                               "(container started without the NVIDIA runtime / --gpus?)")
        return DeviceProbe("nvidia", ABSENT, f"no NVIDIA GPU visible ({where}, NVML library not found)")
    try:
        nv = import_pynvml()
    except ImportError:
        state = UNUSABLE if nodes else ABSENT
        return DeviceProbe("nvidia", state, f"{where}; pynvml (nvidia-ml-py) not installed")
    try:
        raw = call_within(lambda: _query(nv), budget_s, "NVML")
    except BudgetExceeded:
        return DeviceProbe("nvidia", UNUSABLE, f"timeout: NVML did not answer within {budget_s:.1f} s")
    except nv.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code in (9, 12) and not nodes:
            return DeviceProbe("nvidia", ABSENT, f"no NVIDIA GPU visible ({where}, NVML: {exc})")
        state, reason = _INIT_ERRORS.get(code, (UNUSABLE, f"NVML error {code}: {exc}"))
        return DeviceProbe("nvidia", state, f"{reason}; {where}")
    return _result(root, raw, nodes, ctl, env)


def _result(root: str, raw: dict[str, Any], nodes: list[tuple[int, str]], ctl: bool,
            env: Mapping[str, str]) -> DeviceProbe:
    driver, api = raw["driver"], _cuda_version(raw["cuda"])
    notes = list(raw["errors"])
    good: list[Device] = []
    for g in raw["gpus"]:
        if "error" in g:
            notes.append(g["error"])
            continue
        good.append(Device(index=g["index"], name=g["name"], uuid=g["uuid"],
                           arch=f"{g['cc'][0]}.{g['cc'][1]}", memory_bytes=g["memory"],
                           node=f"/dev/nvidia{g['index']}", mig=g["mig"], mig_uuids=g["migs"]))
    base = {"family": "nvidia", "driver_version": driver, "api_version": api}
    if not raw["gpus"]:
        state = UNUSABLE if nodes else ABSENT
        return DeviceProbe(state=state, reason="NVML answers but reports 0 GPUs", notes=tuple(notes), **base)
    if not good:
        return DeviceProbe(state=UNUSABLE, reason="every GPU failed to answer: " + "; ".join(notes),
                           notes=tuple(notes), **base)
    chosen, vis_notes = visible(good, env)
    notes += vis_notes
    if not chosen:
        return DeviceProbe(state=ABSENT, reason=vis_notes[0] if vis_notes else "no GPU selected",
                           notes=tuple(notes), **base)
    if ctl and not fsread.may_open_rw(root, "/dev/nvidiactl"):
        return DeviceProbe(state=UNUSABLE, reason="no permission on /dev/nvidiactl",
                           devices=tuple(chosen), notes=tuple(notes), **base)
    if not nodes and not ctl:
        notes.append("NVML answers but no /dev/nvidia* node is visible; CUDA will need them")
    return DeviceProbe(state=USABLE, devices=tuple(chosen), notes=tuple(notes), **base)
