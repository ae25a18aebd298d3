"""Load and validate matrix.yaml.

``load_matrix(path)`` parses the file, checks it against ``matrix.schema.json`` and the
referential rules (a stage, template, test, component or axis that points nowhere), and
returns a frozen ``Matrix``. Every problem found is reported at once, each as one line
with ``file:line``, in a single ``InputError``. Nothing here knows any framework: the
framework is data.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from entrypoint import devicestring

from . import matrixrules, platforms
from .errors import InputError, Problem
from .model import Group, Matrix, Stage
from .safetext import clip, cut
from .yamlsrc import Locator, read_document

SCHEMA_PATH = Path(__file__).with_name("matrix.schema.json")
# Axes every image group must have: the OS base and the framework.
REQUIRED_AXES = ("base", "framework")


@cache
def schema() -> dict[str, Any]:
    """matrix.yaml's JSON schema (``matrix.schema.json`` beside this module), parsed once.
    Its ``$defs`` hold the shared patterns (``repository``, ...) that options given on the
    command line are checked against as well."""
    return json.loads(SCHEMA_PATH.read_text())


Found = list[tuple[tuple, Problem]]  # (path of the value, problem)


class _Taint:
    """The paths that have a problem: a part of the matrix is *clean* when no problem
    sits at it, inside it or around it, so later phases can check it."""

    def __init__(self, found: Found):
        self._at = {path for path, _ in found}
        self._inside = {path[:i] for path in self._at for i in range(len(path))}

    def clean(self, path: tuple) -> bool:
        return path not in self._inside and not any(path[:i] in self._at
                                                    for i in range(len(path) + 1))

    def covers(self, path: tuple) -> bool:
        """True when ``path`` is at or inside a path with a problem."""
        return any(path[:i] in self._at for i in range(len(path) + 1))


def _schema_problems(data: Any, locate: Locator, skip: _Taint) -> Found:
    validator = jsonschema.Draft202012Validator(schema())
    found: Found = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(err.absolute_path)
        if skip.covers(path):  # already reported by the loader, with its reason
            continue
        dotted = ".".join(str(p) for p in path) or "(top level)"
        found.append((_taint_path(err, path), Problem(
            locate(path), f"{dotted}: {schema_message(err)}",
            "see the schema in stagecraft/matrix.schema.json")))
    return found


def _taint_path(err: jsonschema.ValidationError, path: tuple) -> tuple:
    # A missing or unknown key is a problem of that key, not of every sibling: the rest
    # of the mapping can still be checked by later phases.
    if isinstance(err.instance, dict):
        if err.validator == "required":
            missing = [k for k in err.validator_value if k not in err.instance]
            return path + tuple(missing[:1])
        if err.validator == "additionalProperties":
            extra = [k for k in err.instance if k not in err.schema.get("properties", {})]
            return path + tuple(extra[:1])
    return path


def schema_message(err: jsonschema.ValidationError) -> str:
    """A schema error of ``err.instance`` in words (``'x' is not of type 'integer'``,
    ``unknown key ('a' was unexpected)``), the value echoed clipped: the wording of
    matrix.yaml's errors, which lockcheck uses for matrix.lock's as well."""
    # Values are echoed clipped (clip): a 10 MB string is named, not printed.
    value = clip(err.instance, 60)
    if err.validator == "additionalProperties":
        extra = [k for k in err.instance if k not in err.schema.get("properties", {})]
        verb = "was" if len(extra) == 1 else "were"
        return f"unknown key ({', '.join(clip(k, 40) for k in extra[:5])} {verb} unexpected)"
    if err.validator == "pattern":
        return f"{value} is not of the expected form"
    if err.validator in ("exclusiveMinimum", "minimum") and err.validator_value == 0:
        return f"{value} is not a positive number" if err.validator == "exclusiveMinimum" \
            else f"{value} is negative"
    if err.validator in ("maximum", "exclusiveMaximum"):
        return f"{value} is above the limit {err.validator_value}"
    if err.validator == "const":
        return f"must be {err.validator_value!r}, not {value}"
    if err.validator in ("anyOf", "oneOf"):
        return f"{value} is not allowed here"
    if err.validator == "type":
        return f"{value} is not of type {err.validator_value!r}"
    if err.validator == "enum":
        return f"{value} is not one of {', '.join(map(repr, err.validator_value))}"
    if err.validator in ("maxLength", "minLength", "maxItems", "minItems", "uniqueItems",
                         "minProperties", "maxProperties"):
        return f"{value} breaks {err.validator} {err.validator_value}"
    return cut(err.message)


def _d(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list:
    return value if isinstance(value, list) else []


def _exists(root: Path, rel: str) -> bool:
    return (root / rel).exists()


def _symlink_problems(root: Path, rel: str) -> list[str]:
    """What is wrong with symbolic links on a copied path: one on the way that leads
    outside the project, or any inside a copied directory (COPY would copy the link
    itself, not its target, and the content key would miss what it points to)."""
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


def _reference_problems(data: Any, locate: Locator, root: Path, taint: _Taint) -> Found:
    """Names and paths that point nowhere. Parts with a problem of an earlier phase are
    left out (their shape is not known)."""
    found: Found = []
    data = _d(data)
    tables = {t: _d(e) for t, e in _d(data.get("components")).items()}
    stages = _d(data.get("stages"))

    def bad(path: list, what: str, hint: str) -> None:
        found.append((tuple(path), Problem(locate(path), what, hint)))

    for sname, stage in stages.items():
        if not taint.clean(("stages", sname)):
            continue
        tpath = root / "templates" / stage["template"]
        if not tpath.is_file():
            bad(["stages", sname, "template"], f"stage {sname!r}: template "
                f"templates/{stage['template']} does not exist", "create it or fix the name")
        for i, table in enumerate(stage.get("uses", [])):
            if table not in tables:
                bad(["stages", sname, "uses", i], f"stage {sname!r} uses component table "
                    f"{table!r}, which is not under components", f"one of: {', '.join(tables)}")
        for key in ("copies", "tests"):
            for i, rel in enumerate(stage.get(key, [])):
                if not _exists(root, rel):
                    bad(["stages", sname, key, i], f"stage {sname!r}: {key[:-1] if key == 'tests' else 'copied path'} "
                        f"{rel} does not exist", "fix the path (relative to the project root)")
                elif key == "copies":
                    for what in _symlink_problems(root, rel):
                        bad(["stages", sname, key, i], f"stage {sname!r}: copied path {what}",
                            "copy real files: replace the link with what it points to")

    for bname, base in tables.get("base", {}).items():
        if not taint.clean(("components", "base", bname)):
            continue
        src = base["source"]
        if src not in base:
            bad(["components", "base", bname, "source"], f"base {bname!r} has source "
                f"{src!r} but no {src!r} section", f"add components.base.{bname}.{src}")

    def platform_problems(path: list, names: Any, owner: str) -> None:
        for i, name in enumerate(_l(names)):
            if platforms.normalise(str(name)) not in platforms.KNOWN:
                bad(path + [i], f"{owner}: unknown platform {name!r}",
                    f"one of: {', '.join(platforms.KNOWN)}")

    for bname, base in tables.get("base", {}).items():
        if taint.clean(("components", "base", bname)):
            platform_problems(["components", "base", bname, "platforms"],
                              base.get("platforms"), f"base {bname!r}")
    for fname, fw in tables.get("framework", {}).items():
        if not taint.clean(("components", "framework", fname)):
            continue
        platform_problems(["components", "framework", fname, "build", "platforms"],
                          _d(fw.get("build")).get("platforms"), f"framework {fname!r}")
        if fw.get("build", {}).get("fatbins") and "cuobjdump" not in _d(data.get("build_tools")):
            bad(["components", "framework", fname, "build", "fatbins"], f"framework {fname!r} "
                "names build.fatbins to measure, but build_tools.cuobjdump is not set",
                "add build_tools: {cuobjdump: nvidia-cuda-cuobjdump==VERSION}")
        for family, template in _d(fw.get("device_strings")).items():
            for what in devicestring.problems(template):
                bad(["components", "framework", fname, "device_strings", family],
                    f"framework {fname!r}: device_strings.{family} {clip(template, 40)} {what}",
                    "write the framework's own spelling, e.g. 'gpu:{index}'")
        if fw.get("device") == "nvidia":
            build = _d(fw.get("build"))
            missing = [k for k in NVIDIA_FACTS if k not in build]
            if missing:
                bad(["components", "framework", fname] + (["build"] if "build" in fw else []),
                    f"framework {fname!r} (device nvidia) does not declare "
                    + ", ".join(f"build.{k}" for k in missing),
                    "complete data or no claim: list the compute capabilities the wheel ships "
                    "SASS and PTX for (cuobjdump --list-elf/--list-ptx), the libraries it "
                    "dlopens and the binaries the build measures them from (fatbins, relative "
                    "to site-packages); write `unknown` for a fact not known (the entrypoint "
                    "then warns)")
    for tname, entries in _d(tables).items():  # the suites components name (framework, toolkit)
        for ename, entry in _d(entries).items():
            if not taint.clean(("components", tname, ename)):
                continue
            for i, rel in enumerate(_l(_d(entry).get("tests"))):
                if not _exists(root, str(rel)):
                    bad(["components", tname, ename, "tests", i],
                        f"{tname} {ename!r}: test {rel} does not exist", "fix the path")

    named: dict[str, int] = {}
    for gi, group in enumerate(_l(data.get("images"))):
        gpath = ["images", gi]
        if not taint.clean(tuple(gpath)):
            continue
        gname = group["name"]
        axes = group["axes"]
        if gname in named:
            bad(gpath + ["name"], f"image group {gname!r} is defined twice (first at "
                f"{locate(['images', named[gname]])})", "give each group its own name")
        named.setdefault(gname, gi)
        platform_problems(gpath + ["platforms"], group.get("platforms"), f"image group {gname!r}")
        for i, sname in enumerate(group["chain"]):
            if sname not in stages:
                bad(gpath + ["chain", i], f"image group {gname!r}: stage {sname!r} is not "
                    "defined under stages", f"one of: {', '.join(stages)}")
                continue
            for table in stages[sname].get("uses", []) if _stage_shaped(stages[sname]) else []:
                if table not in axes and table in tables:
                    bad(gpath + ["chain", i], f"image group {gname!r}: stage {sname!r} uses "
                        f"{table!r} but the group has no {table!r} axis",
                        f"add axes.{table} or drop the stage from the chain")
        for axis in REQUIRED_AXES:
            if None in axes.get(axis, []):
                bad(gpath + ["axes", axis], f"image group {gname!r}: axis {axis!r} cannot "
                    "be null", "every image needs a base and a framework")
        for axis, values in axes.items():
            if axis not in tables:
                bad(gpath + ["axes", axis], f"image group {gname!r}: axis {axis!r} names no "
                    "component table", f"one of: {', '.join(tables)}")
                continue
            for i, value in enumerate(values):
                if value is not None and value not in tables[axis]:
                    bad(gpath + ["axes", axis, i], f"image group {gname!r}: {axis} "
                        f"{value!r} is not under components.{axis}",
                        _closest_hint(value, tables[axis]))
        for key in ("exclude", "include"):
            for ei, entry in enumerate(group.get(key, [])):
                for axis, value in entry.items():
                    if axis not in axes:
                        bad(gpath + [key, ei, axis], f"image group {gname!r}: {key} names "
                            f"axis {axis!r}, which the group does not have",
                            f"one of: {', '.join(axes)}")
                    elif value is None and axis in REQUIRED_AXES and key == "include":
                        bad(gpath + [key, ei, axis], f"image group {gname!r}: include "
                            f"entry has a null {axis}", "every image needs a base and a framework")
                    elif value is not None and value not in tables.get(axis, {}):
                        bad(gpath + [key, ei, axis], f"image group {gname!r}: {key} value "
                            f"{value!r} is not under components.{axis}",
                            _closest_hint(str(value), tables.get(axis, {})))
                if key == "include":
                    missing = [a for a in axes if a not in entry]
                    if missing:
                        bad(gpath + [key, ei], f"image group {gname!r}: include entry lacks "
                            f"axes {', '.join(missing)}", "an include names a value for every axis")
    return found


# What an NVIDIA framework build must declare (the kernel-set chooser and the CUDA image
# suite read them); each is a list or the word ``unknown`` (fatbins: a list, the binaries
# the runtime stage measures SASS and PTX from).
NVIDIA_FACTS = ("sass", "ptx", "dlopen", "fatbins")


def _closest_hint(value: str, names: dict[str, Any] | list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(value, list(names), n=3, cutoff=0.5)
    return f"did you mean {' or '.join(close)}?" if close else f"one of: {', '.join(names)}"


def load_matrix(path: str | Path) -> Matrix:
    """Load, validate and freeze a matrix file.

    Raises ``InputError`` listing every problem of every phase at once, each with
    ``file:line``: single values (unsafe characters, unsupported YAML tags, duplicate
    keys), the schema, references (templates, suites, copied paths, component names),
    and, for the parts of a broken matrix that are sound, what ``expand.expand`` checks
    (tags, compatibility rules, kernel sets). A matrix that loads still goes through
    ``expand`` for the last phase.
    """
    path = Path(path)
    display = path.name if path.parent.resolve() == Path.cwd().resolve() else str(path)
    doc = read_document(path, display)
    root = path.resolve().parent
    found: Found = list(doc.problems)
    found += _schema_problems(doc.data, doc.locate, _Taint(found))
    found += _reference_problems(doc.data, doc.locate, root, _Taint(found))
    found += matrixrules.problems(doc.data, doc.locate, _Taint(found).clean)
    matrix = _freeze(path, root, doc.data, doc.locate, _Taint(found))
    if not found:
        return matrix
    problems = [p for _, p in found]
    from .expand import expand  # the last phase, on the sound parts only

    try:
        expand(matrix)
    except InputError as exc:
        problems += exc.problems
    raise InputError(problems)


def _freeze(path: Path, root: Path, data: Any, locate: Locator, taint: _Taint) -> Matrix:
    """The ``Matrix`` of the clean parts of ``data`` (all of it when nothing is wrong):
    a group is left out when it, a stage of its chain or a component it names has a
    problem."""
    data = _d(data)
    components = {
        table: {name: {**entry, "name": name} for name, entry in _d(entries).items()
                if isinstance(entry, dict) and taint.clean(("components", table, name))}
        for table, entries in _d(data.get("components")).items()
    }
    stages = {
        name: Stage(name=name, template=s["template"], uses=tuple(s.get("uses", ())),
                    copies=tuple(s.get("copies", ())), tests=tuple(s.get("tests", ())),
                    parents=tuple(s.get("parents", ())))
        for name, s in _d(data.get("stages")).items() if _stage_shaped(s)
    }

    def sound(g: dict[str, Any], i: int) -> bool:
        if not taint.clean(("images", i)):
            return False
        if any(s not in stages for s in g["chain"]):
            return False
        return all(axis in components and all(v is None or v in components[axis] for v in vals)
                   for axis, vals in g["axes"].items())

    groups = tuple(
        Group(name=g["name"], chain=tuple(g["chain"]),
              axes={a: tuple(v) for a, v in g["axes"].items()},
              exclude=tuple(g.get("exclude", ())), include=tuple(g.get("include", ())),
              tag=g["tag"], aliases=tuple(g.get("aliases", ())),
              where=locate(["images", i]), index=i,
              exclude_where=tuple(locate(["images", i, "exclude", e])
                                  for e in range(len(g.get("exclude", ())))),
              platforms=tuple(platforms.normalise(p) for p in g.get("platforms", ())))
        for i, g in enumerate(_l(data.get("images"))) if sound(g, i)
    )
    entrypoint = _d(data.get("entrypoint")) if taint.clean(("entrypoint",)) else {}
    build_tools = _d(data.get("build_tools")) if taint.clean(("build_tools",)) else {}
    return Matrix(path=path, root=root, repository=_text(data, "repository", taint, "invalid"),
                  source=_text(data, "source", taint), vendor=_text(data, "vendor", taint),
                  registry=_text(data, "registry", taint), stages=stages, components=components,
                  groups=groups, entrypoint={"requirements": [], **entrypoint}, locate=locate,
                  build_tools=dict(build_tools))


def _stage_shaped(stage: Any) -> bool:
    # A stage with a missing template or a bad description still tells expand what it
    # uses; only its shape matters there.
    return (isinstance(stage, dict) and isinstance(stage.get("template"), str)
            and all(isinstance(stage.get(k, []), list)
                    and all(isinstance(v, str) for v in stage.get(k, []))
                    for k in ("uses", "copies", "tests", "parents")))


def _text(data: dict[str, Any], key: str, taint: _Taint, default: str = "") -> str:
    value = data.get(key, default)
    return value if isinstance(value, str) and taint.clean((key,)) else default
