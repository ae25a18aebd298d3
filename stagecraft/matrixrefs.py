"""The referential rules of matrix.yaml: names and paths that point nowhere (a template,
suite or copied path that does not exist, a stage, component table, component, axis or
platform not defined), copied paths with symbolic links, an NVIDIA framework without its
declared facts, an image group defined twice. Pure but for looking at the project's files:
the parsed data in, ``(path, Problem)`` pairs out, each at the ``file:line`` of the value
to edit. Parts with a problem of an earlier phase (``clean`` is False there) are left
out: their shape is not known.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from entrypoint import devicestring

from . import platforms
from .errors import Problem
from .safetext import clip
from .yamlsrc import Locator

Found = list[tuple[tuple, Problem]]  # (path of the value, problem)
# Axes every image group must have: the OS base and the framework.
REQUIRED_AXES = ("base", "framework")
# What an NVIDIA framework build must declare (the kernel-set chooser and the CUDA image
# suite read them); each is a list or the word ``unknown`` (fatbins: a list, the binaries
# the runtime stage measures SASS and PTX from).
NVIDIA_FACTS = ("sass", "ptx", "dlopen", "fatbins")


def _d(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list:
    return value if isinstance(value, list) else []


def stage_shaped(stage: Any) -> bool:
    """Whether a stage's description has the shape later phases read (a template name,
    lists of strings for ``uses``, ``copies``, ``tests``, ``parents``): a stage with a
    missing template or a bad description still tells expand what it uses; only its shape
    matters there."""
    return (isinstance(stage, dict) and isinstance(stage.get("template"), str)
            and all(isinstance(stage.get(k, []), list)
                    and all(isinstance(v, str) for v in stage.get(k, []))
                    for k in ("uses", "copies", "tests", "parents")))


def symlink_problems(root: Path, rel: str) -> list[str]:
    """What is wrong with symbolic links on a copied path: one on the way that leads
    outside the project, or any inside a copied directory (COPY would copy the link
    itself, not its target, and the content key would miss what it points to); at most
    five."""
    out: list[str] = []
    top = root.resolve()
    here = root
    for part in Path(rel).parts:
        here = here / part
        if here.is_symlink():
            target = here.resolve()
            if target != top and top not in target.parents:
                out.append(f"{here.relative_to(root)} is a symbolic link to {target}, "
                           "outside the project")
                return out
    target = (root / rel).resolve()
    if target.is_dir():
        for dirpath, dirnames, filenames in os.walk(target):
            for name in sorted(dirnames + filenames):
                entry = Path(dirpath) / name
                if entry.is_symlink():
                    out.append(f"{rel}/{entry.relative_to(target)} is a symbolic link "
                               f"(to {os.readlink(entry)})")
                    if len(out) >= 5:
                        return out
    return out


def closest_hint(value: str, names: dict[str, Any] | list[str]) -> str:
    """``did you mean a or b?`` for the names closest to ``value``, else all of them."""
    close = difflib.get_close_matches(value, list(names), n=3, cutoff=0.5)
    return f"did you mean {' or '.join(close)}?" if close else f"one of: {', '.join(names)}"


def problems(data: Any, locate: Locator, root: Path, clean: Callable[[tuple], bool]) -> Found:
    """Names and paths of ``data`` (matrix.yaml, parsed; the project at ``root``) that
    point nowhere, in the order: stages, bases, frameworks, the components' suites,
    image groups."""
    refs = _References(data, locate, root, clean)
    refs.stages()
    refs.bases()
    refs.frameworks()
    refs.component_tests()
    named: dict[str, int] = {}
    for gi, group in enumerate(_l(refs.data.get("images"))):
        if clean(("images", gi)):
            refs.group(gi, group, named)
    return refs.found


class _References:
    """One reading of the matrix ``data``: its component ``tables`` and ``stages``, and
    the problems ``found`` so far."""

    def __init__(self, data: Any, locate: Locator, root: Path, clean: Callable[[tuple], bool]):
        self.data = _d(data)
        self.locate, self.root, self.clean = locate, root, clean
        self.tables = {t: _d(e) for t, e in _d(self.data.get("components")).items()}
        self.stage_table = _d(self.data.get("stages"))
        self.found: Found = []

    def bad(self, path: list, what: str, hint: str) -> None:
        self.found.append((tuple(path), Problem(self.locate(path), what, hint)))

    def stages(self) -> None:
        """Each stage's template, component tables, copied paths and suites exist."""
        root = self.root
        for sname, stage in self.stage_table.items():
            if not self.clean(("stages", sname)):
                continue
            if not (root / "templates" / stage["template"]).is_file():
                self.bad(["stages", sname, "template"], f"stage {sname!r}: template "
                         f"templates/{stage['template']} does not exist", "create it or fix the name")
            for i, table in enumerate(stage.get("uses", [])):
                if table not in self.tables:
                    self.bad(["stages", sname, "uses", i], f"stage {sname!r} uses component table "
                             f"{table!r}, which is not under components",
                             f"one of: {', '.join(self.tables)}")
            for key in ("copies", "tests"):
                for i, rel in enumerate(stage.get(key, [])):
                    if not (root / rel).exists():
                        self.bad(["stages", sname, key, i], f"stage {sname!r}: {key[:-1] if key == 'tests' else 'copied path'} "
                                 f"{rel} does not exist", "fix the path (relative to the project root)")
                    elif key == "copies":
                        for what in symlink_problems(root, rel):
                            self.bad(["stages", sname, key, i], f"stage {sname!r}: copied path {what}",
                                     "copy real files: replace the link with what it points to")

    def bases(self) -> None:
        """Each base has the section its source names; then its platforms are known."""
        for bname, base in self.tables.get("base", {}).items():
            if not self.clean(("components", "base", bname)):
                continue
            src = base["source"]
            if src not in base:
                self.bad(["components", "base", bname, "source"], f"base {bname!r} has source "
                         f"{src!r} but no {src!r} section", f"add components.base.{bname}.{src}")
        for bname, base in self.tables.get("base", {}).items():
            if self.clean(("components", "base", bname)):
                self.platforms(["components", "base", bname, "platforms"],
                               base.get("platforms"), f"base {bname!r}")

    def platforms(self, path: list, names: Any, owner: str) -> None:
        """Each of ``names`` (at ``path``, of ``owner``) is a platform stagecraft knows."""
        for i, name in enumerate(_l(names)):
            if platforms.normalise(str(name)) not in platforms.KNOWN:
                self.bad(path + [i], f"{owner}: unknown platform {name!r}",
                         f"one of: {', '.join(platforms.KNOWN)}")

    def frameworks(self) -> None:
        """Each framework's platforms, build tools, device strings and NVIDIA facts."""
        for fname, fw in self.tables.get("framework", {}).items():
            if not self.clean(("components", "framework", fname)):
                continue
            self.platforms(["components", "framework", fname, "build", "platforms"],
                           _d(fw.get("build")).get("platforms"), f"framework {fname!r}")
            if fw.get("build", {}).get("fatbins") and "cuobjdump" not in _d(self.data.get("build_tools")):
                self.bad(["components", "framework", fname, "build", "fatbins"], f"framework {fname!r} "
                         "names build.fatbins to measure, but build_tools.cuobjdump is not set",
                         "add build_tools: {cuobjdump: nvidia-cuda-cuobjdump==VERSION}")
            for family, template in _d(fw.get("device_strings")).items():
                for what in devicestring.problems(template):
                    self.bad(["components", "framework", fname, "device_strings", family],
                             f"framework {fname!r}: device_strings.{family} {clip(template, 40)} {what}",
                             "write the framework's own spelling, e.g. 'gpu:{index}'")
            if fw.get("device") == "nvidia":
                self.nvidia_facts(fname, fw)

    def nvidia_facts(self, fname: str, fw: dict[str, Any]) -> None:
        """An NVIDIA framework declares every one of ``NVIDIA_FACTS`` under ``build``."""
        build = _d(fw.get("build"))
        missing = [k for k in NVIDIA_FACTS if k not in build]
        if missing:
            self.bad(["components", "framework", fname] + (["build"] if "build" in fw else []),
                     f"framework {fname!r} (device nvidia) does not declare "
                     + ", ".join(f"build.{k}" for k in missing),
                     "complete data or no claim: list the compute capabilities the wheel ships "
                     "SASS and PTX for (cuobjdump --list-elf/--list-ptx), the libraries it "
                     "dlopens and the binaries the build measures them from (fatbins, relative "
                     "to site-packages); write `unknown` for a fact not known (the entrypoint "
                     "then warns)")

    def component_tests(self) -> None:
        """The suites components name (framework, toolkit) exist."""
        for tname, entries in _d(self.tables).items():
            for ename, entry in _d(entries).items():
                if not self.clean(("components", tname, ename)):
                    continue
                for i, rel in enumerate(_l(_d(entry).get("tests"))):
                    if not (self.root / str(rel)).exists():
                        self.bad(["components", tname, ename, "tests", i],
                                 f"{tname} {ename!r}: test {rel} does not exist", "fix the path")

    def group(self, gi: int, group: dict[str, Any], named: dict[str, int]) -> None:
        """Image group ``gi``: its name not taken (``named``: name -> first index), its
        platforms, chain, axes and exclude/include entries."""
        gpath: list = ["images", gi]
        gname = group["name"]
        if gname in named:
            self.bad(gpath + ["name"], f"image group {gname!r} is defined twice (first at "
                     f"{self.locate(['images', named[gname]])})", "give each group its own name")
        named.setdefault(gname, gi)
        self.platforms(gpath + ["platforms"], group.get("platforms"), f"image group {gname!r}")
        self.chain(gpath, gname, group)
        self.axes(gpath, gname, group["axes"])
        for key in ("exclude", "include"):
            for ei, entry in enumerate(group.get(key, [])):
                self.entry(gpath + [key, ei], gname, key, entry, group["axes"])

    def chain(self, gpath: list, gname: str, group: dict[str, Any]) -> None:
        """Each stage of the group's chain is defined, and each table it uses is an axis."""
        stages, axes = self.stage_table, group["axes"]
        for i, sname in enumerate(group["chain"]):
            if sname not in stages:
                self.bad(gpath + ["chain", i], f"image group {gname!r}: stage {sname!r} is not "
                         "defined under stages", f"one of: {', '.join(stages)}")
                continue
            for table in stages[sname].get("uses", []) if stage_shaped(stages[sname]) else []:
                if table not in axes and table in self.tables:
                    self.bad(gpath + ["chain", i], f"image group {gname!r}: stage {sname!r} uses "
                             f"{table!r} but the group has no {table!r} axis",
                             f"add axes.{table} or drop the stage from the chain")

    def axes(self, gpath: list, gname: str, axes: dict[str, Any]) -> None:
        """The required axes are not null; each axis names a table, each value a component."""
        for axis in REQUIRED_AXES:
            if None in axes.get(axis, []):
                self.bad(gpath + ["axes", axis], f"image group {gname!r}: axis {axis!r} cannot "
                         "be null", "every image needs a base and a framework")
        for axis, values in axes.items():
            if axis not in self.tables:
                self.bad(gpath + ["axes", axis], f"image group {gname!r}: axis {axis!r} names no "
                         "component table", f"one of: {', '.join(self.tables)}")
                continue
            for i, value in enumerate(values):
                if value is not None and value not in self.tables[axis]:
                    self.bad(gpath + ["axes", axis, i], f"image group {gname!r}: {axis} "
                             f"{value!r} is not under components.{axis}",
                             closest_hint(value, self.tables[axis]))

    def entry(self, epath: list, gname: str, key: str, entry: dict[str, Any],
              axes: dict[str, Any]) -> None:
        """One ``exclude`` or ``include`` entry (``key``) at ``epath``: its axes are the
        group's, its values components; an include names every axis, none of the
        required ones null."""
        for axis, value in entry.items():
            if axis not in axes:
                self.bad(epath + [axis], f"image group {gname!r}: {key} names "
                         f"axis {axis!r}, which the group does not have",
                         f"one of: {', '.join(axes)}")
            elif value is None and axis in REQUIRED_AXES and key == "include":
                self.bad(epath + [axis], f"image group {gname!r}: include "
                         f"entry has a null {axis}", "every image needs a base and a framework")
            elif value is not None and value not in self.tables.get(axis, {}):
                self.bad(epath + [axis], f"image group {gname!r}: {key} value "
                         f"{value!r} is not under components.{axis}",
                         closest_hint(str(value), self.tables.get(axis, {})))
        if key == "include":
            missing = [a for a in axes if a not in entry]
            if missing:
                self.bad(epath, f"image group {gname!r}: include entry lacks "
                         f"axes {', '.join(missing)}", "an include names a value for every axis")
