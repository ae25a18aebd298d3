"""matrix.lock's shape: bounded parsing and validation at every load. Pure but for ``read``.

The lock is JSON (``lockfile.dumps``). ``parse(text, where)`` refuses, before parsing,
a text longer than ``MAX_BYTES`` or nested deeper than ``MAX_DEPTH`` (an iterative scan:
no recursion limit to hit) or holding more than ``MAX_VALUES`` values; then parses it as
strict JSON (no NaN or Infinity, no duplicate keys). ``problems(doc, text, where)``
checks a parsed lock against ``lock.schema.json`` (types, required keys, forms of names,
versions, digests, URLs) and what a schema cannot say: Python distribution names in
PEP 503 normalised form (``packaging.utils.canonicalize_name``), versions that parse as
PEP 440 (``packaging.version``), file names that are wheels or sdists of their own
distribution and version, every string one line of printable text (``safetext``).
Each problem names the file, its line and the entry.

Sources: PEP 503 (names), PEP 440 (versions), PEP 427 and the sdist spec (file names),
Debian Policy 5.6.12 (Debian versions: ``[epoch:]upstream[-revision]``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .errors import InputError
from .safetext import clip, cut, describe, first_unsafe
from .yamlsrc import read_bounded

SCHEMA_PATH = Path(__file__).with_name("lock.schema.json")
MAX_BYTES = 8 * 1024 * 1024  # 8 MiB: the committed lock of 23 entries is about 210 KiB
MAX_DEPTH = 16  # nesting levels (a lock uses 6)
MAX_VALUES = 500_000  # strings, brackets and commas (the committed lock: about 40,000)
REGEN = "run `python3 build.py lock` to write it again"

# A JSON string (unrolled: no backtracking state per character, so a string of megabytes
# costs no more than its own size), or one of the structural characters.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _measure(text: str, where: str) -> None:
    """Refuse ``text`` that nests deeper than ``MAX_DEPTH`` or holds more than
    ``MAX_VALUES`` tokens, without parsing it. Strings are skipped as JSON reads them,
    so brackets inside a string do not count."""
    depth = count = 0
    for m in _TOKEN.finditer(text):
        count += 1
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise InputError.one(f"{where}:{line}", f"nested more than {MAX_DEPTH} levels "
                                     "deep: not a lock", REGEN)
        elif tok in "]}":
            depth -= 1
        if count > MAX_VALUES:
            raise InputError.one(where, f"more than {MAX_VALUES} values: not a lock", REGEN)


def parse(text: str, where: str = "matrix.lock") -> Any:
    """The JSON value of ``text``, parsed within bounds. Raises ``InputError`` (one line,
    ``where[:line]``) when it is longer than ``MAX_BYTES`` characters, nests or counts
    too much (``_measure``), or is not strict JSON (truncated, NaN, a duplicate key)."""
    if len(text) > MAX_BYTES:
        raise InputError.one(where, f"larger than {MAX_BYTES // 1024} KiB: not a lock", REGEN)
    _measure(text, where)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Duplicate as exc:
        raise InputError.one(where, f"duplicate key {clip(str(exc), 60)}", REGEN) from None
    except RecursionError:  # not reached after _measure; kept as a guard
        raise InputError.one(where, "nested too deeply: not a lock", REGEN) from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        at = f"{where}:{line}" if line else where
        raise InputError.one(at, "not valid JSON (truncated or edited?)", REGEN) from None


def read(path: Path, where: str) -> str:
    """The text of the lock at ``path``: a regular UTF-8 file of at most ``MAX_BYTES``.
    Raises ``InputError`` otherwise (see ``yamlsrc.read_bounded``)."""
    return read_bounded(path, where, MAX_BYTES, "lock")


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    defs = schema.pop("$defs")

    def inline(node: Any) -> Any:
        # References resolved once: jsonschema's lookups were half of a lock's validation.
        if isinstance(node, dict):
            if "$ref" in node:
                target = inline(defs[node["$ref"].rsplit("/", 1)[1]])
                return {**target, **{k: inline(v) for k, v in node.items() if k != "$ref"}}
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return jsonschema.Draft202012Validator(inline(schema))


def _schema_problems(doc: Any) -> list[tuple[tuple, str]]:
    from .matrix import schema_message  # the matrix's wording for the same validators

    found = []
    for err in _validator().iter_errors(doc):
        key = "key " if "propertyNames" in err.absolute_schema_path else ""
        found.append((tuple(err.absolute_path), key + schema_message(err)))
        if len(found) >= 20:
            break
    return sorted(found, key=lambda f: [str(p) for p in f[0]])


def _strings(doc: Any) -> list[tuple[tuple, str]]:
    """Every string of ``doc`` (keys too) that is not one line of printable text."""
    found: list[tuple[tuple, str]] = []
    stack: list[tuple[tuple, Any]] = [((), doc)]
    while stack and len(found) < 20:
        path, value = stack.pop()
        if isinstance(value, str):
            bad = first_unsafe(value)
            if bad is not None:
                found.append((path, f"{clip(value, 60)} holds {describe(bad)}"))
        elif isinstance(value, dict):
            for key, item in value.items():
                bad = first_unsafe(key)
                if bad is not None:
                    found.append((path + (key,), f"key {clip(key, 60)} holds {describe(bad)}"))
                stack.append((path + (key,), item))
        elif isinstance(value, list):
            stack.extend((path + (i,), item) for i, item in enumerate(value))
    return found


def _file_problem(name: str, version: Version, filename: str) -> str | None:
    # The name as its URL ends (resolve.py): an index may quote it (torch-2.10.0%2Bcu128-...).
    plain = unquote(filename)
    try:
        if plain.endswith(".whl"):
            fname, fversion, _, _ = parse_wheel_filename(plain)
        else:
            fname, fversion = parse_sdist_filename(plain)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion) as exc:
        return f"{clip(filename, 80)} is not a wheel or sdist file name ({clip(str(exc), 60)})"
    if canonicalize_name(fname) != name or fversion != version:
        return f"{clip(filename, 80)} is a file of {fname} {fversion}, not of {name} {version}"
    return None


def _version_problem(version: Version, text: str, entry: dict[str, Any]) -> str | None:
    """Why a distribution's version cannot be what the resolver wrote (issue 22 review),
    or None: uv writes versions in PEP 440 normal form (``02.15.05`` is ``2.15.5``), and
    a local version (``1.0+local``) comes only from the entry's own index: PyPI refuses
    them on upload (PEP 440, "Local version identifiers"; warehouse), so an entry
    resolved on PyPI alone (``index_url`` null) holds none."""
    if str(version) != text:
        return f"{clip(text, 60)} is not in PEP 440 normal form ({str(version)!r})"
    if version.local is not None and not (entry.get("inputs") or {}).get("index_url"):
        return (f"{clip(text, 60)} is a local version, which PyPI does not serve, and this "
                "entry was resolved on PyPI alone (no index_url)")
    return None


def _python_problems(doc: dict[str, Any]) -> list[tuple[tuple, str]]:
    found: list[tuple[tuple, str]] = []
    for key, entry in doc["python"].items():
        for name, rec in entry.get("packages", {}).items():
            at = ("python", key, "packages", name)
            if canonicalize_name(name) != name:
                found.append((at, f"{clip(name, 60)} is not a PEP 503 normalised name "
                                  f"({canonicalize_name(name)!r})"))
                continue
            try:
                version = Version(rec["version"])
            except InvalidVersion:
                found.append((at + ("version",), f"{clip(rec['version'], 60)} is not a PEP 440 version"))
                continue
            what = _version_problem(version, rec["version"], entry)
            if what:
                found.append((at + ("version",), what))
                continue
            for filename in rec["files"]:
                what = _file_problem(name, version, filename)
                if what:
                    found.append((at + ("files", filename), what))
        if not found and "packages" in entry:
            found += _input_problems(key, entry)
    return found


def _input_problems(key: str, entry: dict[str, Any]) -> list[tuple[tuple, str]]:
    """An entry's packages against its own inputs (issue 22 review: a resealed lock whose
    nvidia-nccl-cu11 was 2.15.6 under a requirement ``==2.15.5``, or held no
    nvidia-nccl-cu11 at all, passed ``lock --check`` and rendered): every requirement's
    distribution is locked, and every locked version satisfies each requirement and
    constraint that names it (``packaging.specifiers``, pre-releases allowed)."""
    from packaging.requirements import InvalidRequirement, Requirement

    packages = entry["packages"]
    found: list[tuple[tuple, str]] = []
    for field in ("requirements", "constraints"):
        for i, text in enumerate(entry["inputs"].get(field) or []):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue  # the schema names a line of the wrong form
            name = canonicalize_name(req.name)
            at = ("python", key, "inputs", field, i)
            if name not in packages:
                if field == "requirements":
                    found.append((at, f"{clip(text, 60)} is required but {name} is not locked"))
                continue
            locked = packages[name]["version"]
            if not req.specifier.contains(Version(locked), prereleases=True):
                found.append((("python", key, "packages", name, "version"),
                              f"{clip(locked, 40)} does not satisfy the entry's {field[:-1]} {clip(text, 60)}"))
    return found


def problems(doc: Any) -> list[tuple[tuple, str]]:
    """What is wrong with the parsed lock ``doc``, as ``(path, what)`` pairs (the path of
    the value, keys and indexes; at most about 20); empty when it is sound. Schema
    problems first; the checks in code run on a lock of the right shape only."""
    return _schema_problems(doc) or _strings(doc) or _python_problems(doc)


def validate(doc: Any, text: str, where: str = "matrix.lock") -> None:
    """Raise ``InputError`` with one line when the lock is not sound: the first of
    ``problems`` at ``where:line`` (its line in ``text``, the text ``doc`` was parsed
    from), naming the entry, what is wrong (and how many more problems there are) and
    what to do."""
    found = problems(doc)
    if found:
        path, what = found[0]
        more = f" (and {len(found) - 1} more problem{'s' if len(found) > 2 else ''})" \
            if len(found) > 1 else ""
        raise InputError.one(_where(text, path, where), f"{_entry(path)}: {what}{more}", REGEN)


def _entry(path: tuple) -> str:
    """``python entry 'runtime ...': packages.numpy.version`` for a path of the lock."""
    if len(path) >= 2 and path[0] in ("debian", "python"):
        rest = ".".join(map(str, path[2:]))
        return f"{path[0]} entry {clip(str(path[1]), 100)}" + (f": {cut(rest, 200)}" if rest else "")
    return cut(".".join(map(str, path)), 200) or "(top level)"


def _where(text: str, path: tuple, where: str) -> str:
    line = line_of(text, path)
    return f"{where}:{line}" if line else where


def line_of(text: str, path: tuple) -> int | None:
    """The line (1-based) where the value at ``path`` (keys and list indexes) starts in
    the JSON ``text``: of its key in a mapping, of its opening bracket in a list; the
    nearest enclosing one found when the path goes deeper than the text. None when not
    even the first key is found."""
    best: int | None = None
    stack: list[dict[str, Any]] = []  # frames: {"path", "list", "index", "key"}
    line, pos = 1, 0
    for m in _TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        tok = m.group()
        top = stack[-1] if stack else None
        here: tuple | None = None
        if top is not None:
            here = top["path"] + ((top["index"],) if top["list"] else (top["key"],))
        if tok in "[{":
            path_here = here if here is not None else ()
            if here is not None and path[:len(here)] == here:
                best = line
            stack.append({"path": path_here, "list": tok == "[", "index": 0, "key": None})
        elif tok in "]}":
            if stack:
                stack.pop()
        elif tok == ",":
            if top is not None and top["list"]:
                top["index"] += 1
            elif top is not None:
                top["key"] = None
        elif tok.startswith('"') and top is not None and not top["list"] and top["key"] is None:
            try:
                top["key"] = json.loads(tok)
            except ValueError:
                top["key"] = tok
            key_path = top["path"] + (top["key"],)
            if key_path == path[:len(key_path)]:
                best = line
                if key_path == path:
                    return line
        # a string in a list, or an object's value: nothing to note
    return best
