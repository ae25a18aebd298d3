"""Paths into a parsed document (dicts and lists), for the fuzzers that mutate one node of
a matrix or a lock at a time (test_fuzz.py, test_lock_fuzz.py)."""
from __future__ import annotations

from typing import Any


def paths(data: Any, path: tuple = ()) -> list[tuple]:
    """Every node's path in ``data``, the root's ``()`` first: keys for dicts, indexes
    for lists, depth first in document order."""
    out = [path]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths(v, path + (i,))
    return out


def get(data: Any, path: tuple) -> Any:
    """The node at ``path`` (as ``paths`` gives it). Raises KeyError/IndexError when the
    path is not in ``data``."""
    for p in path:
        data = data[p]
    return data
