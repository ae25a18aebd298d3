"""image.json read at start-up without ``json``: its parsed twin.

The build writes ``/etc/stagecraft/image.json`` and then, with the image's own Python,
``image.json.marshal``: ``marshal.dumps((raw, data))``, the file's exact bytes and what
``json.loads`` made of them. At start the entrypoint reads image.json (bounded, as
before) and uses the twin's ``data`` only when the twin's ``raw`` is those same bytes:
an image.json edited after the build (a derived image, a test's STAGECRAFT_IMAGE_JSON),
a twin from another Python (marshal's format may change between versions), a broken or
oversized twin all fall back to ``json``. Parsing image.json costs 3 to 4 ms of every
start for the ``json``, ``re`` and ``enum`` imports (entrypoint/jsonout.py says where
that was measured); ``marshal`` is built in.

The twin is trusted as the byte-compiled modules under /opt/stagecraft are (a ``.pyc``
is marshal data too): written at build time, root's, in the image.

    python -I imagefile.py /etc/stagecraft/image.json   # at build: writes the twin
"""
from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SUFFIX = ".marshal"
MAX_DEPTH = 64  # levels of nesting a twin may have (the build's image.json has 5)


def twin_path(path: str) -> str:
    """Where the twin of the image.json at ``path`` is."""
    return path + SUFFIX


def from_twin(path: str, raw: bytes, limit: int) -> dict[str, Any] | None:
    """The parsed image.json when the twin of ``path`` holds exactly ``raw`` and a JSON
    tree (``_json_tree``); None when there is no such twin (absent, unreadable, not a
    regular file, over ``limit`` bytes, broken, of other bytes or other data). Never
    raises."""
    from probes import fsread

    try:
        blob = fsread.read_file(twin_path(path), limit + 1)
        if blob is None or len(blob) > limit:
            return None
        pair = marshal.loads(blob)
    except Exception:  # noqa: BLE001 - any trouble with the twin: parse the JSON instead
        return None
    if (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], bytes)
            and pair[0] == raw and isinstance(pair[1], dict) and _json_tree(pair[1], len(raw))):
        return pair[1]
    return None


def _json_tree(data: object, size: int) -> bool:
    """Whether ``data`` is what ``json.loads`` of ``size`` bytes can be: only JSON's types
    (``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``float``, ``bool``, None),
    a tree (no container reached twice: marshal can share them, json cannot, and shared
    ones would multiply the report's size), at most ``size`` values, nested at most
    ``MAX_DEPTH`` levels."""
    seen: set[int] = set()
    stack: list[tuple[object, int]] = [(data, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > size or depth > MAX_DEPTH:
            return False
        kind = type(node)
        if kind is dict or kind is list:
            if id(node) in seen:
                return False
            seen.add(id(node))
            if kind is dict:
                if not all(type(k) is str for k in node):  # type: ignore[union-attr]
                    return False
                stack.extend((v, depth + 1) for v in node.values())  # type: ignore[union-attr]
            else:
                stack.extend((v, depth + 1) for v in node)  # type: ignore[union-attr]
        elif kind not in (str, int, float, bool) and node is not None:
            return False
    return True


def write_twin(path: str) -> str:
    """Write the twin of the image.json at ``path`` (the build's step, run by the
    image's Python); returns its path. Raises OSError or ValueError (a broken file: the
    build stops there)."""
    import json

    with open(path, "rb") as f:
        raw = f.read()
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    out = twin_path(path)
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(marshal.dumps((raw, data)))
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: imagefile.py /etc/stagecraft/image.json")
    print(f"wrote {write_twin(sys.argv[1])}")
