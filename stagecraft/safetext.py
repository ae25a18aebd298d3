"""The class of characters no matrix value may hold, and bounded echoes of values. Pure.

Values from matrix.yaml flow into Dockerfile lines, labels and shell words. Every tool on
that path splits lines at a different set of characters: Python's ``str.splitlines``
at ``\\n \\r \\v \\f \\x1c \\x1d \\x1e \\x85 \\u2028 \\u2029``; YAML 1.1 at ``\\n \\r
\\x85 \\u2028 \\u2029``; the Dockerfile parser at ``\\n`` (and its words at Go's
``unicode.IsSpace``); a shell at ``\\n`` and, for words, at tabs. So one class closes
them all: the Unicode general categories

- ``Cc`` controls (every C0 and C1 code, ``\\x7f``: tab, newline, NUL, NEL, ...),
- ``Cf`` format characters (zero-width, bidirectional overrides, BOM, ...),
- ``Cs`` surrogates (not encodable as UTF-8),
- ``Zl`` LINE SEPARATOR U+2028 and ``Zp`` PARAGRAPH SEPARATOR U+2029.

Source of the categories: the Unicode Character Database as shipped with Python
(``unicodedata``); of the line boundaries: the Python documentation of
``str.splitlines`` and YAML 1.1 section 4.1.4 (line break characters).
"""

from __future__ import annotations

import re
import unicodedata

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_ASCII_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def is_unsafe(ch: str) -> bool:
    """True when the one character ``ch`` is in the unsafe class."""
    return unicodedata.category(ch) in UNSAFE_CATEGORIES


def unsafe_positions(text: str, allow: str = "") -> list[int]:
    """Indexes (0-based, in code points) of every unsafe character of ``text``, in order;
    characters in ``allow`` are let through (``"\\n\\t"`` for whole files)."""
    found = [m.start() for m in _ASCII_UNSAFE.finditer(text) if m.group() not in allow]
    if not text.isascii():
        found += [m.start() for m in _NON_ASCII.finditer(text)
                  if m.group() not in allow and is_unsafe(m.group())]
        found.sort()
    return found


def first_unsafe(text: str) -> str | None:
    """The first unsafe character of ``text``, or None when it is one line of
    printable text."""
    found = unsafe_positions(text)
    return text[found[0]] if found else None


# Names of the controls (the Unicode database gives them none; these are their ISO 6429
# names, as in the Unicode charts).
_CONTROL_NAMES = {
    "\x00": "NULL", "\x07": "BELL", "\x08": "BACKSPACE", "\t": "TAB", "\n": "LINE FEED",
    "\x0b": "LINE TABULATION", "\x0c": "FORM FEED", "\r": "CARRIAGE RETURN", "\x1b": "ESCAPE",
    "\x1c": "FILE SEPARATOR", "\x1d": "GROUP SEPARATOR", "\x1e": "RECORD SEPARATOR",
    "\x1f": "UNIT SEPARATOR", "\x7f": "DELETE", "\x85": "NEXT LINE",
}


def describe(ch: str) -> str:
    """``"U+2028 (LINE SEPARATOR)"``: a character named so a reader can find it."""
    category = unicodedata.category(ch)
    name = (unicodedata.name(ch, "") or _CONTROL_NAMES.get(ch)
            or {"Cc": "a control character", "Cs": "a surrogate"}.get(category)
            or f"a character of category {category}")
    return f"U+{ord(ch):04X} ({name})"


def clip(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message, at most about ``limit`` characters: a longer
    one is cut and says how long it was. Unsafe characters come out escaped (repr)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, (str, bytes, list, dict)) else "long"
    return f"{text[:limit]}... ({size})"


def cut(text: str, limit: int = 200) -> str:
    """``text`` (a message, not a value) at most about ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}..."


MAX_LINE = 2000


def cut_start(text: str, limit: int = 300) -> str:
    """``text`` at most ``limit`` characters, its end kept: for a Go tool's or engine's
    error, which wraps outward ("creating X: preparing Y: mkdir Z: no space left on
    device"), so the cause is the end."""
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def error_text(exc: BaseException, limit: int = 200) -> str:
    """An exception's first line (its type's name when it says nothing) at most ``limit``
    characters, its end kept (``cut_start``: an engine's error wraps outward)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return cut_start(text, limit)


def cut_middle(text: str, limit: int = 400) -> str:
    """``text`` at most ``limit`` characters, its start (what failed) and end (a wrapped
    error's cause) kept, the middle cut."""
    if len(text) <= limit:
        return text
    head = (limit - 3) // 3
    return text[:head] + "..." + text[-(limit - 3 - head):]


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` as a single bounded line: unsafe characters written as ``\\uXXXX``
    escapes, and at most ``limit`` characters (a cut says so)."""
    positions = unsafe_positions(text)
    if positions:
        parts, last = [], 0
        for i in positions:
            parts += [text[last:i], f"\\u{ord(text[i]):04x}" if ord(text[i]) < 0x10000
                      else f"\\U{ord(text[i]):08x}"]
            last = i + 1
        text = "".join(parts) + text[last:]
    if len(text) > limit:
        text = f"{text[:limit]}... (cut at {limit} characters)"
    return text
