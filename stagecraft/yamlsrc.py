"""YAML with line numbers: every value's source line, addressed by its path.

``read_document(path)`` parses with PyYAML's safe composer and returns the plain data, a
``Locator`` that maps a path such as ``("components", "base", "debian12", "python")`` to
``"matrix.yaml:12"`` (so schema and reference errors point at the line to edit), and the
problems found in single values. Only JSON's kinds of value are built: strings, integers,
finite floats, booleans, null, lists and mappings; every string (keys too) is one line
of printable text (``safetext``). Work is bounded: the file's size, its nesting depth and
the number of values once aliases are expanded, the length of a string.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, Problem
from .safetext import clip, cut, describe, unsafe_positions

PathKey = Sequence[str | int]

MAX_BYTES = 1024 * 1024  # 1 MiB: matrix.yaml is about 15 KiB; parsing 1 MiB takes seconds
MAX_VALUES = 100_000  # values, also once every alias is expanded (matrix.yaml: ~3,000)
MAX_DEPTH = 64  # nesting levels (matrix.yaml uses 8)
MAX_TEXT = 4096  # characters of one string (matrix.yaml's longest is about 100)
MAX_ECHOED = 20  # problems of one kind listed before the rest are counted

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}
_MERGE_TAG = _CORE + "merge"
_KINDS = "strings, numbers, booleans, null, lists and mappings"


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


@dataclass
class Document:
    """A parsed file: ``data``, its ``locate``, and ``problems`` found in single values,
    each as ``(path, Problem)`` (the path of the value, a tuple of keys and indexes)."""

    data: Any
    locate: Locator
    problems: list[tuple[tuple, Problem]] = field(default_factory=list)


class _Builder:
    """Builds plain data from a composed node graph, noting problems instead of
    stopping at the first."""

    def __init__(self, where: str):
        self.where = where
        self.lines: dict[tuple, int] = {}
        self.problems: list[tuple[tuple, Problem]] = []
        # An alias is the same node object as its anchor: build it once (chained aliases
        # would otherwise grow exponentially).
        self.memo: dict[int, Any] = {}

    def bad(self, path: tuple, node: yaml.Node, what: str, hint: str) -> None:
        dotted = ".".join(map(str, path)) or "(top level)"
        self.problems.append((path, Problem(f"{self.where}:{node.start_mark.line + 1}",
                                            f"{dotted}: {what}", hint)))

    def build(self, node: yaml.Node, path: tuple) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in self.memo:
            return self.memo[id(node)]
        if isinstance(node, yaml.MappingNode):
            value: Any = self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            if node.tag != _CORE + "seq":
                self._bad_tag(path, node)
            value = [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        else:
            value = self._scalar(node, path)
        self.memo[id(node)] = value
        return value

    def _bad_tag(self, path: tuple, node: yaml.Node) -> None:
        tag = "!!" + node.tag[len(_CORE):] if node.tag.startswith(_CORE) else node.tag
        self.bad(path, node, f"the YAML tag {clip(tag, 60)} is not supported (values "
                 f"are {_KINDS})", "remove the tag")

    def _mapping(self, node: yaml.MappingNode, path: tuple) -> dict[str, Any]:
        if node.tag != _CORE + "map":
            self._bad_tag(path, node)
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        merge_seen = False
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:  # YAML merge key: <<: *anchor
                if merge_seen:
                    self.problems.append((path, Problem(
                        f"{self.where}:{line}", "a second '<<' merge key in one mapping",
                        "merge several mappings with one key: <<: [*a, *b]")))
                    continue
                merge_seen = True
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for src in sources:
                    value = self.build(src, path)
                    if not isinstance(value, dict):
                        self.problems.append((path, Problem(
                            f"{self.where}:{line}", "'<<' merges only mappings",
                            "merge an anchored mapping")))
                        continue
                    merged = {**value, **merged}
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in _SCALAR_TAGS:
                self.problems.append((path, Problem(f"{self.where}:{line}",
                                                    "a mapping key must be a plain string",
                                                    "write the key as text")))
                continue
            key = key_node.value
            if key in out:
                self.problems.append((path + (key,), Problem(
                    f"{self.where}:{line}", f"duplicate key {clip(key, 60)}", "keep one of them")))
                continue
            self.lines[path + (key,)] = line
            self._check_text(path + (key,), key_node, key, "key")
            out[key] = self.build(value_node, path + (key,))
        return {**merged, **out}

    def _scalar(self, node: yaml.ScalarNode, path: tuple) -> Any:
        if node.tag == _CORE + "timestamp":
            self.bad(path, node, f"{clip(node.value, 60)} reads as a date", "quote it as a string")
            return node.value
        if node.tag not in _SCALAR_TAGS:
            self._bad_tag(path, node)
            return node.value
        # Let the safe constructor resolve ints, bools, nulls and strings.
        loader = yaml.SafeLoader("")
        try:
            value = loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, KeyError, TypeError, OverflowError) as exc:
            # e.g. !!bool maybe, !!int x, an integer of more than 4300 digits
            why = "" if isinstance(exc, KeyError) else f" ({cut(str(exc), 80)})"
            self.bad(path, node, f"{clip(node.value, 60)} is not a valid "
                     f"{node.tag[len(_CORE):]}{why}", "fix the value or quote it as a string")
            return node.value
        finally:
            loader.dispose()
        if isinstance(value, float) and not math.isfinite(value):
            self.bad(path, node, f"{node.value} is not a finite number", "write a number")
            return node.value
        if isinstance(value, str):
            self._check_text(path, node, value, "value")
        return value

    def _check_text(self, path: tuple, node: yaml.Node, text: str, kind: str) -> None:
        if len(text) > MAX_TEXT:
            self.bad(path, node, f"{kind} {clip(text, 40)} is longer than {MAX_TEXT} "
                     "characters", "shorten it")
            return
        found = unsafe_positions(text)
        if found:
            self.bad(path, node, f"{kind} {clip(text, 60)} holds {describe(text[found[0]])}",
                     "values are single lines of printable text (no line breaks, tabs, "
                     "control or format characters)")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [v for _, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _measure(root: yaml.Node, where: str) -> None:
    """Refuse a node graph that is recursive, nests too deeply or expands to too many
    values, before anything is built. Iterative: no recursion limit to hit."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    nodes: dict[int, yaml.Node] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        kids = _children(node)
        if done:
            size[nid] = min(MAX_VALUES + 1, 1 + sum(size[id(k)] for k in kids))
            height[nid] = 1 + max((height[id(k)] for k in kids), default=0)
            on_path.discard(nid)
            continue
        if nid in size:
            continue
        nodes[nid] = node
        on_path.add(nid)
        stack.append((node, True))
        for kid in kids:
            if id(kid) in on_path:
                raise InputError.one(f"{where}:{kid.start_mark.line + 1}", "a recursive alias: "
                                     "the value anchored here holds an alias to itself",
                                     "point the alias at another anchor")
            if id(kid) not in size:
                stack.append((kid, False))

    def worst(measure: dict[int, int], limit: int) -> yaml.Node:
        node = root
        while True:
            kids = [k for k in _children(node) if measure[id(k)] > limit]
            if not kids:
                return node
            node = max(kids, key=lambda k: measure[id(k)])

    if height[id(root)] > MAX_DEPTH:
        deep = worst(height, MAX_DEPTH - 1)
        raise InputError.one(f"{where}:{deep.start_mark.line + 1}", f"nested more than "
                             f"{MAX_DEPTH} levels deep", "flatten the structure")
    if len(nodes) > MAX_VALUES:
        raise InputError.one(where, f"the document has more than {MAX_VALUES} values",
                             "a matrix holds far fewer; check that this is the right file")
    if size[id(root)] > MAX_VALUES:
        big = worst(size, MAX_VALUES // 2)
        raise InputError.one(f"{where}:{big.start_mark.line + 1}", "the document expands to "
                             f"more than {MAX_VALUES} values through aliases of aliases",
                             "use fewer nested aliases")


class _TooMany(Exception):
    pass


class _CountingLoader(yaml.SafeLoader):
    """PyYAML's safe loader that stops composing after ``MAX_VALUES`` nodes: the worst
    file of ``MAX_BYTES`` is refused after a fraction of its parse."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._count = getattr(self, "_count", 0) + 1
        if self._count > MAX_VALUES:
            raise _TooMany
        return super().compose_node(parent, index)


def _read_text(path: Path, where: str) -> str:
    return read_bounded(path, where, MAX_BYTES, "matrix")


def read_bounded(path: Path, where: str, limit: int, kind: str) -> str:
    """The text of the regular file ``path``, at most ``limit`` bytes of UTF-8 (line ends
    as Python's text mode reads them). ``kind`` names the file in hints (``matrix``,
    ``lock``). Raises ``InputError`` (one line, at ``where``) when it is missing,
    unreadable, not a regular file (a FIFO is refused, not waited on), larger than
    ``limit`` (only ``limit + 1`` bytes are read) or not UTF-8."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; fstat
        # then refuses whatever is not a regular file (FIFO, device, directory).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError.one(where, "not a regular file (a FIFO, device or directory)",
                                     f"pass the path of a {kind} file")
            raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise InputError.one(where, "file not found", f"pass an existing {kind} file with --matrix") from None
    except OSError as exc:
        raise InputError.one(where, f"cannot read: {exc.strerror or exc}", "check the file") from None
    if len(raw) > limit:
        raise InputError.one(where, f"larger than {limit // 1024} KiB", f"a {kind} is far "
                             "smaller; check that this is the right file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError.one(f"{where}:{line}", f"not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                             "save the file as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as Python's text mode reads it


def _text_problems(text: str, where: str) -> list[Problem]:
    # YAML reads NEL, U+2028 and U+2029 as line breaks and refuses most controls: either
    # way the line numbers of everything after would not be an editor's. One per line.
    problems: list[Problem] = []
    lines_seen: set[int] = set()
    for i in unsafe_positions(text, allow="\n\t"):
        if i == 0 and text[0] == "\ufeff":  # a byte order mark starts the file
            continue
        line = text.count("\n", 0, i) + 1
        if line in lines_seen:
            continue
        lines_seen.add(line)
        if len(problems) == MAX_ECHOED:
            problems.append(Problem(where, "more lines hold such characters", "remove them"))
            break
        problems.append(Problem(f"{where}:{line}", f"{describe(text[i])} in the file",
                                "matrix.yaml is printable text; remove the character"))
    return problems


def read_document(path: str | Path, display: str | None = None) -> Document:
    """Parse one YAML document from a file of at most ``MAX_BYTES``.

    Returns a ``Document``. Raises ``InputError`` (one line per problem, with
    ``file:line``) when the file is missing, too large, not UTF-8, holds unsafe
    characters outside values, is not valid YAML, or nests or expands too far. Problems
    of single values (a duplicate key, an unsupported tag, an unsafe character) are
    returned in ``Document.problems`` so that a caller can report them with its own.
    """
    path = Path(path)
    where = display or str(path)
    text = _read_text(path, where)
    problems = _text_problems(text, where)
    if problems:
        raise InputError(problems)
    try:
        node = yaml.compose(text, Loader=_CountingLoader)
    except _TooMany:
        raise InputError.one(where, f"the document has more than {MAX_VALUES} values",
                             "a matrix holds far fewer; check that this is the right file") from None
    except RecursionError:
        raise InputError.one(where, "nested too deeply", "flatten the structure") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise InputError.one(f"{where}{line}", f"invalid YAML: {exc.problem or exc.context}",
                             "fix the syntax (indentation, quotes, colons)") from None
    except yaml.YAMLError as exc:  # e.g. a reader error the check above did not foresee
        raise InputError.one(where, f"invalid YAML: {clip(str(exc), 120)}", "fix the file") from None
    if node is None:
        raise InputError.one(where, "the file is empty", "see README.md for the matrix format")
    _measure(node, where)
    builder = _Builder(where)
    data = builder.build(node, ())
    return Document(data, Locator(where, builder.lines), builder.problems)


def load_yaml(path: str | Path, display: str | None = None) -> tuple[Any, Locator]:
    """``read_document`` that also raises for problems of single values.

    Returns ``(data, locator)``; raises ``InputError`` with every problem found.
    """
    doc = read_document(path, display)
    if doc.problems:
        raise InputError([p for _, p in doc.problems])
    return doc.data, doc.locate

