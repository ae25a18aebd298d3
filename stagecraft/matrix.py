"""Load and validate matrix.yaml.

``load_matrix(path)`` parses the file, checks it against ``matrix.schema.json``, the
referential rules (``matrixrefs``: a stage, template, test, component or axis that points
nowhere) and the rules no schema states (``matrixrules``), and returns a frozen
``Matrix``. Every problem found is reported at once, each as one line with ``file:line``,
in a single ``InputError``. Nothing here knows any framework: the framework is data.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from . import matrixrefs, matrixrules, platforms
from .errors import InputError, Problem
from .matrixrefs import Found, stage_shaped
from .model import Group, Matrix, Stage
from .safetext import clip, cut
from .yamlsrc import Locator, read_document

SCHEMA_PATH = Path(__file__).with_name("matrix.schema.json")


@cache
def schema() -> dict[str, Any]:
    """matrix.yaml's JSON schema (``matrix.schema.json`` beside this module), parsed once.
    Its ``$defs`` hold the shared patterns (``repository``, ...) that options given on the
    command line are checked against as well."""
    return json.loads(SCHEMA_PATH.read_text())


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
    found += matrixrefs.problems(doc.data, doc.locate, root, _Taint(found).clean)
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
        for name, s in _d(data.get("stages")).items() if stage_shaped(s)
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


def _text(data: dict[str, Any], key: str, taint: _Taint, default: str = "") -> str:
    value = data.get(key, default)
    return value if isinstance(value, str) and taint.clean((key,)) else default
