"""Which tag fits a machine, answered by the project's own chooser for every machine the
selector offers: ``probes.rank.rank`` (what ``build.py probe`` ranks with) over the probe
results ``hardware.machine_probes`` makes. The selector page embeds this table as JSON
and only looks answers up: no rule lives in its JavaScript.

Also the overview's cells: how each tag runs on one GPU generation or CPU level, read
from ``probes.select.choose``'s choice for that machine.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probes.rank import explain, rank
from probes.select import choose

from . import hardware

NEWEST = "newest"  # the overview's GPU cells: a driver new enough for every CUDA release


def key(cpu: str, cc: str, driver: str) -> str:
    """The table's key of a machine: ``"x86-64-v3|9.0|550.54.14"`` (driver ``""`` without a GPU)."""
    return f"{cpu}|{cc}|{driver}"


def machines(grid: list[str]) -> list[tuple[str, str, str]]:
    """Every (cpu, cc, driver) the selector offers: each CPU choice without a GPU, and with
    one GPU of each capability of hardware.GENERATIONS on each grid driver."""
    ccs = [cc for _, group in hardware.GENERATIONS for cc in group]
    out = []
    for cpu in hardware.CPUS:
        out.append((cpu, hardware.NO_GPU, ""))
        out.extend((cpu, cc, drv) for cc in ccs for drv in grid)
    return out


class _Strings:
    """Interns repeated text (reasons repeat across thousands of machines)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.items)
            self.items.append(text)
        return self._index[text]


def answer(probes: Mapping[str, Any], images: Sequence[Mapping[str, Any]],
           built: Mapping[str, bool | None]) -> dict[str, Any]:
    """One machine's answer: ``{"best": tag | None, "why": text, "others": [(tag, text)]}``
    where ``others`` names every other image of the platform, best first, then those that
    cannot run here with the chooser's refusal."""
    fits, refusals = rank(probes, images, built)
    others = [(f.tag, "fits, ranks lower: kernel set " + f.choice.name
               + (f" ({f.choice.message})" if f.choice.message else "")
               + (f"; warning: {f.choice.warnings[0]}" if f.choice.warnings else "")) for f in fits[1:]]
    others += [(r.partition(": ")[0], r.partition(": ")[2]) for r in refusals]
    if not fits:
        return {"best": None, "why": "no tag of this platform can run on this machine", "others": others}
    return {"best": fits[0].tag, "why": explain(fits), "others": others}


def table(images_by_platform: Mapping[str, Sequence[Mapping[str, Any]]],
          built: Mapping[str, bool | None]) -> dict[str, Any]:
    """The selector's whole table, JSON-ready: ``{"grid": [driver, ...] (ascending),
    "strings": [text, ...], "answers": {key: [best tag index or -1, why index,
    [[tag index, reason index], ...]]}}``; every text is an index into ``strings``.

    images_by_platform: platform -> [{"tag", "kernel_sets"}] in matrix order (the
    images built, or to be built, for it). built: tag -> built (True/False/None)."""
    grid = hardware.driver_grid()
    text = _Strings()
    answers: dict[str, Any] = {}
    for cpu, cc, drv in machines(grid):
        platform = hardware.CPUS[cpu][1]
        a = answer(hardware.machine_probes(cpu, cc, drv), images_by_platform.get(platform, ()), built)
        answers[key(cpu, cc, drv)] = [text(a["best"]) if a["best"] else -1, text(a["why"]),
                                      [[text(t), text(r)] for t, r in a["others"]]]
    return {"grid": grid, "strings": text.items, "answers": answers}


def lookup(tbl: Mapping[str, Any], cpu: str, cc: str, driver: str) -> dict[str, Any] | None:
    """An answer of ``table``'s output as ``answer`` gives it (what the page's JavaScript
    does: the driver's grid floor, then the key); None when the machine is not in it."""
    drv = ""
    if cc != hardware.NO_GPU:
        drv = hardware.floor_driver(driver, tbl["grid"]) or ""
        if not drv:
            return None
    row = tbl["answers"].get(key(cpu, cc, drv))
    if row is None:
        return None
    s = tbl["strings"]
    return {"best": s[row[0]] if row[0] >= 0 else None, "why": s[row[1]],
            "others": [(s[t], s[r]) for t, r in row[2]]}


def gpu_cell(kernel_sets: Sequence[Mapping[str, Any]], cc: str) -> tuple[str, str]:
    """(class, text) of a tag on a GPU of capability ``cc`` with the newest driver and an
    x86-64-v3 CPU: ``native``/``SASS``, ``ptx``/``PTX`` (JIT at start-up),
    ``unknown``/``?`` (the build does not state its kernels), ``fallback``/``CPU`` (the
    image runs on the CPU there), ``none``/``–`` (a CPU image) or ``none``/``no``."""
    newest = hardware.driver_grid()[-1]
    c = choose(hardware.machine_probes("x86-64-v3", cc, newest), kernel_sets)
    if c.refused:
        return "none", "no"
    if c.device != "nvidia":
        return ("fallback", "CPU") if c.fallback or c.wanted_device == "nvidia" else ("none", "–")
    if any(w.startswith("unknown whether") for w in c.warnings):
        return "unknown", "?"
    if any(w.startswith("no native kernels") for w in c.warnings):
        return "ptx", "PTX"
    return "native", "SASS"


def cpu_cell(kernel_sets: Sequence[Mapping[str, Any]], cpu: str) -> tuple[str, str]:
    """(class, text) of a tag on CPU choice ``cpu`` without a GPU: ``native`` with the
    kernel set's name when the image was made for the CPU, ``fallback`` with it for an
    accelerator image, ``none`` ("refused") when no set can run."""
    c = choose(hardware.machine_probes(cpu, hardware.NO_GPU, ""), kernel_sets)
    if c.refused:
        return "none", "refused"
    return ("fallback" if c.fallback else "native"), c.name
