"""Load and validate matrix.yaml.

``load_matrix(path)`` parses the file, checks it against ``matrix.schema.json`` and the
referential rules (a stage, template, test, component or axis that points nowhere), and
returns a frozen ``Matrix``. Every problem found is reported at once, each as one line
with ``file:line``, in a single ``InputError``. Nothing here knows any framework: the
framework is data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from .errors import InputError, Problem
from .yamlsrc import Locator, load_yaml

SCHEMA_PATH = Path(__file__).with_name("matrix.schema.json")
# Axes every image group must have: the OS base and the framework.
REQUIRED_AXES = ("base", "framework")


@dataclass(frozen=True)
class Stage:
    """One stage template: ``uses`` names the component tables it renders with,
    ``copies`` the build-context paths it COPYs, ``tests`` its testinfra suites."""

    name: str
    template: str
    uses: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """An image group: the product of its axes, less ``exclude``, plus ``include``.

    ``axes`` maps an axis (a component table) to the entry names it takes; ``None`` is
    an unset optional component. ``where`` is the group's ``file:line``.
    """

    name: str
    chain: tuple[str, ...]
    axes: dict[str, tuple[str | None, ...]]
    exclude: tuple[dict[str, Any], ...]
    include: tuple[dict[str, Any], ...]
    tag: str
    aliases: tuple[str, ...]
    where: str
    index: int


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: ``root`` is the project directory the file's relative paths
    (templates, tests, copies) resolve against."""

    path: Path
    root: Path
    repository: str
    source: str
    vendor: str
    registry: str
    stages: dict[str, Stage]
    components: dict[str, dict[str, dict[str, Any]]]
    groups: tuple[Group, ...]
    entrypoint: dict[str, Any]
    locate: Locator = field(compare=False, repr=False)

    @property
    def templates_dir(self) -> Path:
        """Directory holding the stage templates."""
        return self.root / "templates"

    def component(self, table: str, name: str) -> dict[str, Any]:
        """The entry ``name`` of component table ``table``, with its ``name`` key set."""
        return self.components[table][name]


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _control_problems(data: Any, locate: Locator, path: tuple = ()) -> list[Problem]:
    """Every value and key is one line of printable text: values flow into Dockerfiles
    and shell steps, where a newline would start a new instruction."""
    out: list[Problem] = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        here = (*path, key)
        for text in (key, value):
            if isinstance(text, str) and _CONTROL.search(text):
                dotted = ".".join(map(str, here))
                out.append(Problem(locate(here), f"{dotted}: control character "
                                   f"{_CONTROL.search(text).group()!r} in {text[:40]!r}",
                                   "values are single lines of printable text"))
                break
        else:
            out += _control_problems(value, locate, here)
    return out


def _schema_problems(data: Any, locate: Locator) -> list[Problem]:
    validator = jsonschema.Draft202012Validator(_schema())
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = list(err.absolute_path)
        dotted = ".".join(str(p) for p in path) or "(top level)"
        problems.append(Problem(locate(path), f"{dotted}: {_schema_message(err)}",
                                "see the schema in stagecraft/matrix.schema.json"))
    return problems


def _schema_message(err: jsonschema.ValidationError) -> str:
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are not allowed", "unknown key")
    if err.validator == "pattern":
        return f"{err.instance!r} is not of the expected form"
    if err.validator == "const":
        return f"must be {err.validator_value!r}, not {err.instance!r}"
    if err.validator in ("anyOf", "oneOf"):
        return f"{err.instance!r} is not allowed here"
    return err.message


def _exists(root: Path, rel: str) -> bool:
    return (root / rel).exists()


def _reference_problems(data: dict[str, Any], locate: Locator, root: Path) -> list[Problem]:
    problems: list[Problem] = []
    tables = data["components"]
    stages = data["stages"]

    def bad(path: list, what: str, hint: str) -> None:
        problems.append(Problem(locate(path), what, hint))

    for sname, stage in stages.items():
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

    for bname, base in tables["base"].items():
        src = base["source"]
        if src not in base:
            bad(["components", "base", bname, "source"], f"base {bname!r} has source "
                f"{src!r} but no {src!r} section", f"add components.base.{bname}.{src}")

    for fname, fw in tables["framework"].items():
        for i, rel in enumerate(fw.get("tests", [])):
            if not _exists(root, rel):
                bad(["components", "framework", fname, "tests", i],
                    f"framework {fname!r}: test {rel} does not exist", "fix the path")

    for gi, group in enumerate(data["images"]):
        gpath = ["images", gi]
        gname = group["name"]
        axes = group["axes"]
        for i, sname in enumerate(group["chain"]):
            if sname not in stages:
                bad(gpath + ["chain", i], f"image group {gname!r}: stage {sname!r} is not "
                    "defined under stages", f"one of: {', '.join(stages)}")
                continue
            for table in stages[sname].get("uses", []):
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
                    elif value is not None and value not in tables.get(axis, {}):
                        bad(gpath + [key, ei, axis], f"image group {gname!r}: {key} value "
                            f"{value!r} is not under components.{axis}",
                            _closest_hint(str(value), tables.get(axis, {})))
                if key == "include":
                    missing = [a for a in axes if a not in entry]
                    if missing:
                        bad(gpath + [key, ei], f"image group {gname!r}: include entry lacks "
                            f"axes {', '.join(missing)}", "an include names a value for every axis")
    return problems


def _closest_hint(value: str, names: dict[str, Any] | list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(value, list(names), n=3, cutoff=0.5)
    return f"did you mean {' or '.join(close)}?" if close else f"one of: {', '.join(names)}"


def load_matrix(path: str | Path) -> Matrix:
    """Load, validate and freeze a matrix file.

    Raises ``InputError`` listing every schema and reference problem, each with
    ``file:line``. Compatibility rules between components and tag rendering are checked
    later, by ``expand.expand`` (they need the combinations).
    """
    path = Path(path)
    display = path.name if path.parent.resolve() == Path.cwd().resolve() else str(path)
    data, locate = load_yaml(path, display)
    problems = _control_problems(data, locate) or _schema_problems(data, locate)
    if problems:
        raise InputError(problems)
    root = path.resolve().parent
    problems = _reference_problems(data, locate, root)
    if problems:
        raise InputError(problems)
    components = {
        table: {name: {**entry, "name": name} for name, entry in entries.items()}
        for table, entries in data["components"].items()
    }
    stages = {
        name: Stage(name=name, template=s["template"], uses=tuple(s.get("uses", ())),
                    copies=tuple(s.get("copies", ())), tests=tuple(s.get("tests", ())))
        for name, s in data["stages"].items()
    }
    groups = tuple(
        Group(name=g["name"], chain=tuple(g["chain"]),
              axes={a: tuple(v) for a, v in g["axes"].items()},
              exclude=tuple(g.get("exclude", ())), include=tuple(g.get("include", ())),
              tag=g["tag"], aliases=tuple(g.get("aliases", ())),
              where=locate(["images", i]), index=i)
        for i, g in enumerate(data["images"])
    )
    return Matrix(path=path, root=root, repository=data["repository"],
                  source=data.get("source", ""), vendor=data.get("vendor", ""),
                  registry=data.get("registry", ""), stages=stages, components=components,
                  groups=groups,
                  entrypoint=data.get("entrypoint", {"requirements": []}), locate=locate)
