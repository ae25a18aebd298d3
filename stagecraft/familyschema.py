"""The device-family enums of both JSON schemas, derived from the family records.

``probes/kernel_sets.schema.json`` (the kernel sets an image carries) and
``stagecraft/matrix.schema.json`` (a framework's ``device`` and ``device_strings``) list
the device families. Those lists are derived from probes.families: ``derive`` returns a
schema with them filled in, a unit test holds the checked-in files equal to it, and

    python -m stagecraft.familyschema          # rewrite both files from the records

brings them in line after a family is added. The files stay plain JSON artifacts (what
jsonschema loads, and what a reader opens); nothing reads the records at load time.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from probes.families import Family, records

ROOT = Path(__file__).resolve().parent.parent
KERNEL_SETS = ROOT / "probes" / "kernel_sets.schema.json"
MATRIX = ROOT / "stagecraft" / "matrix.schema.json"


def _all(fams: tuple[Family, ...]) -> list[str]:
    """Every family in probe order (cpu last): the kernel sets' ``device``."""
    return [f.name for f in fams]


def _cpu_first(fams: tuple[Family, ...]) -> list[str]:
    """cpu, then the accelerators in probe order: matrix.yaml's ``device`` lists."""
    return [f.name for f in fams if f.name == "cpu"] + [f.name for f in fams if f.name != "cpu"]


def _accel(fams: tuple[Family, ...]) -> list[str]:
    """Families whose kernel sets state device arch globs and min_driver (requires_accel)."""
    return [f.name for f in fams if f.requires == "accel"]


# file -> [(path of the enum inside the schema, what fills it)]
ENUMS = {
    KERNEL_SETS: [
        (("$defs", "kernel_set", "properties", "device", "enum"), _all),
        (("$defs", "kernel_set", "allOf", 2, "if", "properties", "device", "enum"), _accel),
    ],
    MATRIX: [
        (("$defs", "framework", "properties", "device", "enum"), _cpu_first),
        (("$defs", "framework", "properties", "device_strings", "propertyNames", "enum"), _cpu_first),
    ],
}


def derive(path: Path, schema: dict[str, Any], fams: tuple[Family, ...] | None = None) -> dict[str, Any]:
    """A copy of ``schema`` (the parsed file at ``path``, one of ENUMS' keys) with its
    family enums filled from ``fams`` (default: the registered records). Raises KeyError
    when ``path`` is not one of the two schemas, or the schema lacks an enum's place."""
    fams = records() if fams is None else fams
    out = copy.deepcopy(schema)
    for where, fill in ENUMS[path]:
        node = out
        for key in where[:-1]:
            node = node[key]
        if where[-1] not in node:
            raise KeyError(f"{path.name}: no {'/'.join(map(str, where))}")
        node[where[-1]] = fill(fams)
    return out


def rewritten(path: Path, text: str, fams: tuple[Family, ...] | None = None) -> str:
    """The file's new text: ``json.dumps(indent=2)`` when the file is written that way
    (matrix.schema.json), else each enum's one-line list replaced in place, so a
    hand-formatted file (kernel_sets.schema.json) keeps its layout. Raises ValueError
    when an enum cannot be found in the text (edit the file by hand then)."""
    old = json.loads(text)
    new = derive(path, old, fams)
    if text == json.dumps(old, indent=2) + "\n":
        return json.dumps(new, indent=2) + "\n"
    for where, _ in ENUMS[path]:
        before, after = _at(old, where), _at(new, where)
        if before != after:
            if json.dumps(before) not in text:
                raise ValueError(f"{path}: the list {json.dumps(before)} is not on one line; edit it by hand")
            text = text.replace(json.dumps(before), json.dumps(after), 1)
    if json.loads(text) != new:
        raise ValueError(f"{path}: the enums could not be replaced in place; edit them by hand to {new}")
    return text


def _at(schema: dict[str, Any], where: tuple[Any, ...]) -> Any:
    node: Any = schema
    for key in where:
        node = node[key]
    return node


def main(argv: list[str] | None = None) -> int:
    """Rewrite both schema files from the records; ``--check``: exit 1 (and say which
    file) when one differs, write nothing. Bad arguments, or a file whose enums cannot
    be rewritten in place: one line on stderr, exit 2, nothing written."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(f"familyschema: unknown arguments {' '.join(args)!r}; usage: "
              "python -m stagecraft.familyschema [--check]", file=sys.stderr)
        return 2
    new: dict[Path, str] = {}
    for path in ENUMS:
        text = path.read_text(encoding="utf-8")
        try:
            out = rewritten(path, text)
        except (ValueError, KeyError) as exc:
            print(f"familyschema: {exc}", file=sys.stderr)
            return 2
        if out != text:
            new[path] = out
    for path, text in new.items():
        if not args:
            path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {'stale' if args else 'rewritten'} (family enums from probes/families.py)")
    return 1 if new and args else 0


if __name__ == "__main__":
    sys.exit(main())
