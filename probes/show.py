"""Values from outside (environment variables, tool output) shown safely in one line.

A value a user or a container runtime put in the environment may hold anything: a
newline, a carriage return, an escape sequence, a Unicode line separator (U+2028), or
megabytes. Echoed raw it would split our one-line messages, forge lines, or flood the
log. ``shown`` quotes and escapes a value and bounds its length; ``one_line`` escapes
whatever a terminal or ``str.splitlines`` would take as a line break or control sequence
in a message we print.
"""
from __future__ import annotations

LIMIT = 80  # characters of a value shown before it is cut
LINE_LIMIT = 2000  # characters of one printed message

# Every character str.splitlines() breaks on (\n \v \f \r \x1c-\x1e \x85 U+2028 U+2029),
# the rest of C0 except tab, DEL and C1: shown as Python escapes.
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
            for c in [*range(0x00, 0x09), *range(0x0a, 0x20), *range(0x7f, 0xa0), 0x2028, 0x2029]}


def shown(value: object, limit: int = LIMIT) -> str:
    """``value`` as one quoted, escaped, bounded word for a message.

    Python's ``repr`` escapes control characters, line and paragraph separators and
    other non-printable characters, so the result is one line whatever the value holds.
    Values longer than ``limit`` characters are cut and say their full length, e.g.
    ``'0,1,2...' (10485760 characters)``. Never raises."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` with every line break and control character escaped (``\\n`` becomes the
    two characters ``\\`` ``n``), cut at ``limit`` characters: safe to print as one line."""
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text)} characters)"
    return text.translate(_ESCAPES)
