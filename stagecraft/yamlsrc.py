"""YAML with line numbers: every value's source line, addressed by its path.

``load_yaml(path)`` parses with PyYAML's safe composer and returns the plain data plus a
``Locator`` that maps a path such as ``("components", "base", "debian12", "python")`` to
``"matrix.yaml:12"``, so schema and reference errors can point at the line to edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError

PathKey = Sequence[str | int]


class Locator:
    """Maps a data path to ``file:line`` (1-based). Unknown paths fall back to the nearest
    known parent, then to the file name."""

    def __init__(self, filename: str, lines: dict[tuple, int]):
        self.filename = filename
        self._lines = lines

    def __call__(self, path: PathKey = ()) -> str:
        key = tuple(path)
        while key not in self._lines and key:
            key = key[:-1]
        line = self._lines.get(key)
        return f"{self.filename}:{line}" if line else self.filename


def _construct(node: yaml.Node, path: tuple, lines: dict[tuple, int], where: str,
               memo: dict[int, Any] | None = None) -> Any:
    # An alias is the same node object as its anchor: build it once (chained aliases
    # would otherwise grow exponentially).
    memo = {} if memo is None else memo
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in memo:
        return memo[id(node)]
    value = _construct_new(node, path, lines, where, memo)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        memo[id(node)] = value
    return value


def _construct_new(node: yaml.Node, path: tuple, lines: dict[tuple, int], where: str,
                   memo: dict[int, Any]) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # YAML merge key: <<: *anchor
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for src in sources:
                    value = _construct(src, path, lines, where, memo)
                    if not isinstance(value, dict):
                        raise InputError.one(f"{where}:{key_node.start_mark.line + 1}",
                                             "'<<' merges only mappings", "merge an anchored mapping")
                    merged = {**value, **merged}
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise InputError.one(f"{where}:{key_node.start_mark.line + 1}",
                                     "a mapping key must be a plain string",
                                     "write the key as text")
            key = key_node.value
            if key in out:
                raise InputError.one(f"{where}:{key_node.start_mark.line + 1}",
                                     f"duplicate key {key!r}", "keep one of them")
            lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, path + (key,), lines, where, memo)
        return {**merged, **out}
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, path + (i,), lines, where, memo) for i, item in enumerate(node.value)]
    # Scalars: let the safe constructor resolve ints, bools, nulls and strings.
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


MAX_VALUES = 200_000


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """How many values the document has once every alias is expanded (memoised per node,
    so an alias bomb is measured without being expanded)."""
    if id(node) in memo:
        return memo[id(node)]
    if depth > 500:
        return MAX_VALUES + 1
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(v, memo, depth + 1) for _, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(v, memo, depth + 1) for v in node.value)
    else:
        size = 1
    memo[id(node)] = size
    return size


def load_yaml(path: str | Path, display: str | None = None) -> tuple[Any, Locator]:
    """Parse one YAML document.

    Returns ``(data, locator)``. Raises ``InputError`` (one line with ``file:line``) when
    the file is missing, is not valid YAML, or repeats a key. Anchors and aliases work;
    only YAML's safe types are built.
    """
    path = Path(path)
    where = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one(where, "file not found", "pass an existing matrix file with --matrix") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.one(where, f"cannot read: {exc}", "check the file") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise InputError.one(where, "nested too deeply", "flatten the structure") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise InputError.one(f"{where}{line}", f"invalid YAML: {exc.problem}",
                             "fix the syntax (indentation, quotes, colons)") from None
    if node is None:
        raise InputError.one(where, "the file is empty", "see README.md for the matrix format")
    sizes: dict[int, int] = {}
    if _expanded_size(node, sizes) > MAX_VALUES:
        worst = node
        while isinstance(worst, (yaml.MappingNode, yaml.SequenceNode)) and worst.value:
            kids = [v for _, v in worst.value] if isinstance(worst, yaml.MappingNode) else worst.value
            big = max(kids, key=lambda k: sizes.get(id(k), 1))
            if sizes.get(id(big), 1) <= MAX_VALUES // 2:
                break
            worst = big
        raise InputError.one(f"{where}:{worst.start_mark.line + 1}", f"the document expands to "
                             f"more than {MAX_VALUES} values (aliases of aliases)",
                             "use fewer nested aliases")
    lines: dict[tuple, int] = {}
    try:
        data = _construct(node, (), lines, where)
    except RecursionError:
        raise InputError.one(where, "nested too deeply", "flatten the structure") from None
    except ValueError as exc:  # e.g. an integer too long to convert
        raise InputError.one(where, f"a value cannot be read: {str(exc)[:120]}",
                             "quote it as a string") from None
    return data, Locator(where, lines)
