"""The start-up report as JSON text, without importing ``json``.

``json`` imports ``re`` (its scanner's and encoder's patterns), and ``re`` imports
``enum``: together 3 to 4 ms of every container start, more than the entrypoint's own
modules (``python -X importtime`` in the CPU image; bench/startup.py, BENCHMARKS.md
"Start-up after issue 22"). The report is written at every start and read far less
often, so the start path writes it here and every reader parses it with ``json``.

``dumps(obj)`` is byte for byte ``json.dumps(obj, indent=1, sort_keys=True)`` for what
JSON holds (``dict`` with ``str`` keys, or ``int``, ``float``, ``bool`` or ``None`` keys
converted as json converts them, ``list``, ``tuple``, ``str``, ``int``, ``float``,
``bool``, ``None``; RFC 8259 with ``ensure_ascii``: every character outside printable
ASCII written as ``\\uXXXX``, a surrogate pair above U+FFFF), held so by
tests/unit/test_jsonout.py against ``json`` itself on generated values. Anything else
raises ``TypeError``, as ``json`` does.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What json's encoder writes for these characters (json.encoder.ESCAPE_DCT).
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
MAX_DEPTH = 500  # nesting written; deeper raises ValueError (json: RecursionError near 1000)


def _string(s: str) -> str:
    s = str.__str__(s)  # a subclass's value, as json reads it (not its __str__ or __format__)
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'  # the common case: nothing to escape
    out = ['"']
    for ch in s:
        n = ord(ch)
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif 0x20 <= n < 0x7F:
            out.append(ch)
        elif n < 0x10000:
            out.append(f"\\u{n:04x}")
        else:  # a surrogate pair, as UTF-16 writes it
            n -= 0x10000
            out.append(f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}")
    out.append('"')
    return "".join(out)


def _float(x: float) -> str:
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)


def _first(item: tuple) -> object:
    return item[0]


def _key(key: object) -> str:
    """A dict key as json writes it: a string, or a scalar converted to one."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _write(obj: Any, level: int, out: list[str]) -> None:
    if level > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(obj, str):
        out.append(_string(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        out.append(_float(obj))
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = "\n" + " " * (level + 1)
        out.append("[")
        for i, item in enumerate(obj):
            out.append(inner if i == 0 else "," + inner)
            _write(item, level + 1, out)
        out.append("\n" + " " * level + "]")
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = "\n" + " " * (level + 1)
        out.append("{")
        # json sorts the items by their keys as they are, then converts the keys
        for i, (key, value) in enumerate(sorted(obj.items(), key=_first)):
            out.append(inner if i == 0 else "," + inner)
            out.append(_string(_key(key)))
            out.append(": ")
            _write(value, level + 1, out)
        out.append("\n" + " " * level + "}")
    else:
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """``obj`` as ``json.dumps(obj, indent=1, sort_keys=True)`` writes it (module
    docstring). Raises ``TypeError`` for a type JSON does not hold, a key of another
    type, or keys that do not sort together (as json does); ``ValueError`` past
    ``MAX_DEPTH`` levels."""
    out: list[str] = []
    _write(obj, 0, out)
    return "".join(out)
