"""Load-time rules of matrix.yaml that no schema can state: stage chains in the order the
stages build on each other (``chains``) and requirement sets pip could never satisfy
(``pins``). Pure: the parsed data in, ``(path, Problem)`` pairs out, each at the
``file:line`` of the value to edit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import chains, pins
from .errors import Problem
from .yamlsrc import Locator

Found = list[tuple[tuple, Problem]]
PIN_HINT = "pin one version of each distribution, one the framework's own pin allows"


def _d(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list:
    return value if isinstance(value, list) else []


def _names(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def problems(data: Any, locate: Locator, clean: Callable[[tuple], bool]) -> Found:
    """Chain-order and pin problems of the parts of ``data`` that are ``clean`` (no
    problem of an earlier phase at, in or around them)."""
    return _chain_problems(_d(data), locate, clean) + _pin_problems(_d(data), locate, clean)


def _parents(data: dict, locate: Locator, clean: Callable[[tuple], bool]) -> tuple[dict[str, list[str]], Found]:
    """The parents of every clean stage whose parents are all defined, and the problems
    of the others (a parent that is no stage, a cycle)."""
    stages = _d(data.get("stages"))
    found: Found = []
    parents: dict[str, list[str]] = {}
    for name, stage in stages.items():
        listed = _names(_d(stage).get("parents", []))
        if not clean(("stages", name)) or listed is None:
            continue
        missing = [i for i, p in enumerate(listed) if p not in stages]
        for i in missing:
            path = ("stages", name, "parents", i)
            found.append((path, Problem(locate(path), f"stage {name!r} names parent "
                                        f"{listed[i]!r}, which is not defined under stages",
                                        f"one of: {', '.join(stages)}")))
        if not missing:
            parents[name] = listed
    loop = chains.cycle(parents)
    if loop:
        path = ("stages", loop[0], "parents")
        found.append((path, Problem(locate(path), "stages build on each other in a circle: "
                                    + " on ".join(loop), "a stage's parents are stages below it")))
        for name in loop:
            parents.pop(name, None)
    return parents, found


def _chain_problems(data: dict, locate: Locator, clean: Callable[[tuple], bool]) -> Found:
    parents, found = _parents(data, locate, clean)
    for gi, group in enumerate(_l(data.get("images"))):
        chain = _names(_d(group).get("chain"))
        if not clean(("images", gi)) or not chain or any(s not in parents for s in chain):
            continue
        bad = chains.chain_problem(chain, parents)
        if bad:
            path = ("images", gi, "chain", bad[0])
            found.append((path, Problem(locate(path), f"image group {group.get('name')!r}: "
                                        f"{bad[1]}", chains.hint(parents))))
    return found


def _sets(data: dict) -> list[tuple[tuple, list[pins.Line]]]:
    """Every requirement set of the matrix with the path of the component it belongs to."""
    comps = _d(data.get("components"))
    entry = [pins.Line(r, ("entrypoint", "requirements", i), "entrypoint requirement")
             for i, r in enumerate(_l(_d(data.get("entrypoint")).get("requirements")))
             if isinstance(r, str)]
    out = []
    for table, own, key, role in (("framework", "package", "version", "the framework's own pin"),
                                  ("toolkit", "package", "version", "the toolkit's own pin"),
                                  ("jupyter", None, "jupyterlab", "JupyterLab's own pin")):
        for name, comp in _d(comps.get(table)).items():
            comp = _d(comp)
            at = ("components", table, name)
            pkg = comp.get(own) if own else "jupyterlab"
            lines = []
            if isinstance(pkg, str) and isinstance(comp.get(key), str):
                lines.append(pins.Line(f"{pkg}=={comp[key]}", at + (key,), role))
            if table == "framework":
                lines += entry
            lines += [pins.Line(c, at + ("constraints", i)) for i, c in
                      enumerate(_l(comp.get("constraints"))) if isinstance(c, str)]
            out.append((at, lines))
    return out


def _pin_problems(data: dict, locate: Locator, clean: Callable[[tuple], bool]) -> Found:
    found: Found = []
    seen: set[tuple] = set()
    if not clean(("entrypoint",)):
        return found
    for at, lines in _sets(data):
        if not clean(at):
            continue
        for path, what in pins.conflicts(lines):
            if path in seen:  # an entrypoint line, reported once for every framework
                continue
            seen.add(path)
            owner = f"{at[1]} {at[2]!r}: " if path[0] == "components" else ""
            found.append((path, Problem(locate(path), f"{owner}{what}", PIN_HINT)))
    return found
