"""How the pipeline prints: progress and logs to stderr, results to stdout (one JSON
document with ``--json``), files the user names written whole or not at all."""

from __future__ import annotations

import json
import sys
from typing import Any

from .. import outfile
from ..argcheck import clip
from ..errors import InputError


def emit_json(obj: Any) -> None:
    """``obj`` as indented JSON with sorted keys on stdout (values JSON lacks: ``str``)."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def say(line: str) -> None:
    """One progress or log line on stderr, flushed at once."""
    print(line, file=sys.stderr, flush=True)


def counts(found: dict[str, int]) -> str:
    """pytest's counts as words: ``20 passed, 1 failed``."""
    return ", ".join(f"{n} {word}" for word, n in found.items()) or "no tests"


def human_size(n: int) -> str:
    """``n`` bytes as decimal GB (two places) from 1e9 bytes up, else whole MB."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def write_output(option: str, path: str, text: str) -> None:
    """Write ``text`` to the file the user named with ``option`` (``-o``), whole or not
    at all, only over a regular file or nothing (``outfile``; ``argcheck`` refused
    anything else before the command ran). Raises ``InputError`` (exit 2) when it cannot
    be written there: the path is the user's."""
    try:
        outfile.write_text(path, text)
    except OSError as exc:
        raise InputError.one(f"{option} {clip(path)}", f"cannot write ({exc.strerror or exc})",
                             "name a regular file in a directory you can write") from None
