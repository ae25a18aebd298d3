"""How BuildKit's Dockerfile frontend and a POSIX shell read a rendered Dockerfile: a
model for tests, ported from the sources it names, and checked against a real engine
(tests/integration/test_build_behaviour.py::test_labels_carry_the_matrix_text_exactly).

- ``instructions(text)``: lines split at ``\\n`` only (Go's bufio.ScanLines), comment
  lines dropped (also inside a continued instruction), a trailing ``\\`` joins the next
  line. moby/buildkit frontend/dockerfile/parser/parser.go (``Parse``, ``processLine``,
  ``trimContinuationCharacter``).
- ``parse_words(rest)``: the words of ``LABEL``/``ENV`` arguments, split at Unicode
  spaces outside quotes. parser/line_parsers.go (``parseWords``).
- ``process_word(word, env)``: quotes, escapes and ``$`` expansion of one word, as for
  ``LABEL`` keys and values. frontend/dockerfile/shell/lex.go (``processStopOn``,
  ``processSingleQuote``, ``processDoubleQuote``, ``processDollar``).
- ``shell_syntax(command)``: what a POSIX shell (bash, the images' SHELL) treats as
  syntax in a command line outside quotes: operators, expansions, word breaks, comments.
  POSIX.1-2017 XCU 2.2 (quoting), 2.3 (token recognition).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONTINUATION = re.compile(r"\\[ \t]*$")
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                      "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")  # unicode.IsSpace


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (lower case), the rest of its (joined) line and the
    1-based line it starts on."""

    keyword: str
    args: str
    line: int


def _is_comment(line: str) -> bool:
    return line.lstrip("".join(_GO_SPACE)).startswith("#")


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, as BuildKit's parser finds them."""
    lines = text.split("\n")
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        if _is_comment(raw):
            continue
        start = i
        line = raw.lstrip("".join(_GO_SPACE))
        continued = bool(_CONTINUATION.search(line))
        line = _CONTINUATION.sub("", line)
        if not continued and line.strip() == "":
            continue
        while continued and i < len(lines):
            nxt = lines[i]
            i += 1
            if _is_comment(nxt):
                continue
            if nxt.strip(" \t") == "":  # an empty continuation line
                continue
            continued = bool(_CONTINUATION.search(nxt))
            line += _CONTINUATION.sub("", nxt)
        stripped = line.strip("".join(_GO_SPACE))
        keyword, _, rest = _split_command(stripped)
        out.append(Instruction(keyword.lower(), rest, start))
    return out


def _split_command(line: str) -> tuple[str, str, str]:
    parts = re.split(r"[\t\v\f\r ]+", line, maxsplit=1)
    return parts[0], " ", parts[1] if len(parts) > 1 else ""


def parse_words(rest: str) -> list[str]:
    """``parseWords``: words split at spaces outside quotes; quotes and escapes kept."""
    words: list[str] = []
    word = ""
    phase = "spaces"
    quote = ""
    blank_ok = False
    i = 0
    while i <= len(rest):
        ch = rest[i] if i < len(rest) else ""
        if phase == "spaces":
            if i == len(rest):
                break
            if ch in _GO_SPACE:
                i += 1
                continue
            phase = "word"
        if phase in ("word", "quote") and i == len(rest):
            if blank_ok or word:
                words.append(word)
            break
        if phase == "word":
            if ch in _GO_SPACE:
                phase = "spaces"
                if blank_ok or word:
                    words.append(word)
                word = ""
                blank_ok = False
                i += 1
                continue
            if ch in "'\"":
                quote = ch
                blank_ok = True
                phase = "quote"
            if ch == "\\":
                if i + 1 == len(rest):
                    i += 1
                    continue
                word += ch
                i += 1
                ch = rest[i]
            word += ch
            i += 1
            continue
        if phase == "quote":
            if ch == quote:
                phase = "word"
            if ch == "\\" and quote != "'":
                if i + 1 == len(rest):
                    phase = "word"
                    i += 1
                    continue
                word += ch
                i += 1
                ch = rest[i]
            word += ch
            i += 1
    return words


class LexError(ValueError):
    """The shell lexer of BuildKit refuses the word (an unterminated quote, a bad ${})."""


@dataclass
class Word:
    """A processed word: its ``text`` and whether a ``$`` expanded a variable."""

    text: str
    expanded: bool


def process_word(word: str, env: dict[str, str] | None = None) -> Word:
    """``ProcessWord``: quotes removed, escapes applied, ``$NAME``/``${NAME}`` expanded."""
    env = env or {}
    out: list[str] = []
    expanded = False
    i = 0
    n = len(word)

    def dollar(i: int) -> tuple[str, int]:
        nonlocal expanded
        # word[i] == "$"
        if i + 1 >= n:
            return "$", i + 1
        ch = word[i + 1]
        if ch == "{":
            end = word.find("}", i + 2)
            if end < 0:
                raise LexError("missing '}'")
            expanded = True
            name = re.match(r"[A-Za-z0-9_]*", word[i + 2:end]).group()
            return env.get(name, ""), end + 1
        name = re.match(r"[A-Za-z0-9_]*", word[i + 1:]).group()
        if not name:
            return "$", i + 1
        expanded = True
        return env.get(name, ""), i + 1 + len(name)

    while i < n:
        ch = word[i]
        if ch == "'":
            end = word.find("'", i + 1)
            if end < 0:
                raise LexError("unexpected end of statement while looking for matching single-quote")
            out.append(word[i + 1:end])
            i = end + 1
        elif ch == '"':
            i += 1
            while True:
                if i >= n:
                    raise LexError("unexpected end of statement while looking for matching double-quote")
                ch = word[i]
                if ch == '"':
                    i += 1
                    break
                if ch == "$":
                    text, i = dollar(i)
                    out.append(text)
                    continue
                i += 1
                if ch == "\\":
                    if i >= n:
                        continue
                    if word[i] in '"$\\':
                        ch = word[i]
                        i += 1
                out.append(ch)
        elif ch == "$":
            text, i = dollar(i)
            out.append(text)
        else:
            i += 1
            if ch == "\\":
                if i >= n:
                    break
                ch = word[i]
                i += 1
            out.append(ch)
    return Word("".join(out), expanded)


def labels(args: str, env: dict[str, str] | None = None) -> dict[str, Word]:
    """The labels of one ``LABEL`` instruction's arguments (``k=v`` words)."""
    out: dict[str, Word] = {}
    for word in parse_words(args):
        if "=" not in word:
            raise LexError(f"can't find = in {word!r}")
        key, value = word.split("=", 1)
        out[process_word(key, env).text] = process_word(value, env)
    return out


_OPERATORS = set(";&|<>()")


def shell_syntax(command: str) -> list[str]:
    """The syntax a POSIX shell sees in ``command``, in order: each word break,
    operator character, ``$``/backquote expansion, ``#`` comment start, backslash escape
    and quote change outside quotes, and each ``$``/backquote inside double quotes.
    Literal text (quoted or plain) is left out, so two commands that differ only in
    quoted or plain text give the same list."""
    out: list[str] = []
    i, n = 0, len(command)
    word_start = True
    while i < n:
        ch = command[i]
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                out.append("unterminated '")
                return out
            out.append("'...'")
            i = end + 1
            word_start = False
        elif ch == '"':
            out.append('"')
            i += 1
            while i < n and command[i] != '"':
                if command[i] == "\\" and i + 1 < n:
                    i += 2
                    continue
                if command[i] in "$`":
                    out.append(f'"{command[i]}')
                i += 1
            if i >= n:
                out.append('unterminated "')
                return out
            out.append('"')
            i += 1
            word_start = False
        elif ch == "\\":
            out.append("\\")
            i += 2
            word_start = False
        elif ch in " \t\n":
            if not word_start:
                out.append(" ")
            word_start = True
            i += 1
        elif ch in _OPERATORS or ch in "$`" or (ch == "#" and word_start):
            out.append(ch)
            word_start = ch in _OPERATORS
            i += 1
        else:
            word_start = False
            i += 1
    return out
