"""Stage chains in the order stages build on each other. Pure.

Each stage of matrix.yaml names its ``parents``: the stages it may be built on, one of
which is the stage just below it in a chain. A stage with no ``parents`` is built on the
OS base image itself (bootstrapped or pulled): it can only start a chain, and every
chain starts with such a stage. So ``chain: [runtime, base]`` (the base built on a
runtime) and ``chain: [runtime]`` (a runtime on the bare OS, without the base stage's
Python and tini) are refused at load time, from the data alone: nothing here names a
stage.

A group's chain is checked as written and, since an image skips the stages whose
components it leaves unset (``expand``), as each image builds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def chain_problem(chain: Sequence[str], parents: Mapping[str, Sequence[str]]) -> tuple[int, str] | None:
    """The first place where ``chain`` (stage names, bottom first) breaks the stages'
    ``parents`` (stage -> the stages it may be built on; empty: on the OS base image),
    as ``(index in chain, what is wrong)``; None when every stage sits on one of its
    parents and the chain starts with a stage built on the OS base image. Every name
    must be a key of ``parents``."""
    for i, stage in enumerate(chain):
        allowed = list(parents[stage])
        if i == 0:
            if allowed:
                return 0, (f"the chain starts with stage {stage!r}, which is built on "
                           f"{_one_of(allowed)}, not on the OS base image")
            continue
        below = chain[i - 1]
        if not allowed:
            return i, (f"stage {stage!r} is built on the OS base image (it names no parents), "
                       f"but the chain puts it on {below!r}")
        if below not in allowed:
            return i, (f"stage {stage!r} is built on {_one_of(allowed)}, but the chain puts "
                       f"it on {below!r}")
    return None


def hint(parents: Mapping[str, Sequence[str]]) -> str:
    """What to do, naming the stages that start a chain."""
    roots = [s for s, p in parents.items() if not p]
    first = f"start with {_one_of(roots)} and " if roots else ""
    return (f"{first}list each stage after one of its parents (stages.NAME.parents in "
            "matrix.yaml)")


def cycle(parents: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of stages each naming the next as a parent (no chain could hold them), as
    the list of names with the first repeated at the end; None when there is none.
    Names that are not keys of ``parents`` are left out."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in parents:
        if state.get(start):
            continue
        path: list[str] = [start]
        iters = [iter(parents[start])]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
                continue
            if nxt not in parents:
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(parents[nxt]))
    return None


def _one_of(names: Sequence[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else "one of " + ", ".join(quoted)
