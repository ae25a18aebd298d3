"""The environment the command gets: a pure function of the choice and the probes.

- The chosen kernel set's ``env`` (a variable the user already set wins).
- For a CPU set with ``isa_cap`` below the host's class (a lower set forced on a newer
  CPU): ONEDNN_MAX_CPU_ISA / MKL_ENABLE_INSTRUCTIONS at the host's highest level within
  that class (probes.isa). The top CPU set, or a set at the host's own class, caps
  nothing: the libraries' own dispatch is the best the host has.
- GPUs hidden when the choice is not NVIDIA but the image carries NVIDIA sets or a GPU
  is visible: ``CUDA_VISIBLE_DEVICES=""`` (CUDA: an empty list exposes no device), so the
  framework does not touch a GPU it cannot use. This one overrides the user's value.
  Likewise Kunlun (``XPU_VISIBLE_DEVICES=""``), Ascend (``ASCEND_RT_VISIBLE_DEVICES=""``),
  AMD (``ROCR_VISIBLE_DEVICES=""``) and Cambricon (``MLU_VISIBLE_DEVICES=""``) devices
  when the choice is not theirs (probes.visible names each runtime's source), and any
  other family: each record's ``visibility.hide`` spelling (probes.families).
- Thread pools sized to the effective CPUs (min of online CPUs, cpuset, ceil(quota)) when
  that is below the online count and the user has not set the variable: OpenMP (also
  what oneDNN uses in Paddle's OpenMP builds), MKL, OpenBLAS, and numexpr. Paddle's own
  FLAGS_paddle_num_threads (default 1, per-instance) is left alone: its official builds
  use oneDNN, where only OpenMP's setting applies (paddle/fluid/platform/init.cc).
- STAGECRAFT_CHOSEN (the set's name) and STAGECRAFT_DEVICE_STRING (the chosen device in
  the framework's own spelling, ``gpu:0`` or ``cpu``: entrypoint.devicestring) for the
  command to read; ``python -m stagecraft_device`` prints the latter.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

from probes.show import shown

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_MAX_THREADS")


def plan_env(choice: Any, probes: Mapping[str, Any], kernel_sets: Sequence[Mapping[str, Any]],
             env: Mapping[str, str], device_strings: Mapping[str, str] | None = None,
             ) -> tuple[dict[str, str], list[str]]:
    """(variables to set, notes). ``env`` is the current environment; nothing is mutated.
    ``device_strings``: the image's {family: template} (entrypoint.devicestring)."""
    out: dict[str, str] = {}
    notes: list[str] = []
    for k, v in (choice.env or {}).items():
        if k in env:
            notes.append(f"{k} kept as the user set it ({shown(env[k])}); the kernel set wanted {shown(v)}")
        else:
            out[k] = str(v)
    cpu = probes.get("cpu")
    if choice.device == "cpu" and cpu is not None:
        _isa(choice, cpu, env, out, notes)
    _hide_accelerators(choice, probes, kernel_sets, env, out, notes)
    if cpu is not None and cpu.effective_cpus < cpu.online:
        n = str(cpu.effective_cpus)
        why = []
        if cpu.quota_cpus:
            why.append(f"quota {cpu.quota_cpus:g} CPUs")
        if cpu.cpuset and cpu.cpuset < cpu.online:
            why.append(f"cpuset {cpu.cpuset} CPUs")
        for var in THREAD_VARS:
            if var in env:
                notes.append(f"{var} kept as the user set it ({shown(env[var])})")
            else:
                out[var] = n
        notes.append(f"thread pools sized to {n} ({', '.join(why) or 'limits'}; {cpu.online} online)")
    if choice.name:
        out["STAGECRAFT_CHOSEN"] = choice.name
        _device_string(choice, probes, env, device_strings, out, notes)
    return out, notes


def _device_string(choice: Any, probes: Mapping[str, Any], env: Mapping[str, str],
                   device_strings: Mapping[str, str] | None, out: dict[str, str], notes: list[str]) -> None:
    """STAGECRAFT_DEVICE_STRING: the chosen device in the framework's own spelling."""
    from entrypoint import devicestring

    p = probes.get(choice.device)
    count = len(getattr(p, "devices", ())) if choice.device != "cpu" else 1
    value = devicestring.render(dict(device_strings or {}), choice.device, count)
    if value is None:
        return
    if "STAGECRAFT_DEVICE_STRING" in env:
        notes.append(f"STAGECRAFT_DEVICE_STRING kept as the user set it ({shown(env['STAGECRAFT_DEVICE_STRING'])}); "
                     f"the choice is {value!r}")
        return
    out["STAGECRAFT_DEVICE_STRING"] = value


def _isa(choice: Any, cpu: Any, env: Mapping[str, str], out: dict[str, str], notes: list[str]) -> None:
    """oneDNN/MKL ISA caps of a chosen CPU set (probes.isa.caps): none for the top set or
    when the host is within the set's class; the host's exact level within the class when
    the set is below the host. A variable the user set wins."""
    from probes import isa

    try:
        caps, note = isa.caps((choice.kernel_set or {}).get("isa_cap"), cpu.flags, cpu.vendor, cpu.arch)
    except ValueError as exc:
        caps, note = {}, f"{exc}: no CPU ISA cap set"
    for k, v in caps.items():
        if k in env:
            notes.append(f"{k} kept as the user set it ({shown(env[k])}); the kernel set wanted {shown(v)}")
        else:
            out[k] = v
    notes.append(note or f"CPU kernels: {isa.describe(cpu.flags, cpu.vendor, cpu.arch, cpu.model)}, "
                 "each library's own dispatch (no cap)")


def _hide_accelerators(choice: Any, probes: Mapping[str, Any], kernel_sets: Sequence[Mapping[str, Any]],
                       env: Mapping[str, str], out: dict[str, str], notes: list[str]) -> None:
    """Every other family's devices hidden (probes.visible.hide: each runtime's own
    spelling, from the family's record), in probe order, NVIDIA first, when the choice is
    not theirs but the image carries sets for them or they are visible: the framework
    must not open a device it was not chosen for."""
    from probes.families import records

    around = [f for f in records() if f.visibility is not None and f.name != choice.device and (
        any(s.get("device") == f.name for s in kernel_sets)
        or (probes.get(f.name) is not None and probes[f.name].state != "absent"))]
    if not around:
        return
    from probes import visible

    for fam in around:
        hide = visible.hide(fam.name, env)
        if hide:
            out.update(hide)
            notes.append(f"{fam.plural} hidden from the framework: "
                         + ", ".join(f"{k}={v!r}" for k, v in hide.items()))
