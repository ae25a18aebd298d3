"""Run work over a dependency graph, several at a time: each node once, after everything
it depends on, on ``graphlib.TopologicalSorter`` and a thread pool.

A node whose work fails (raises one of ``failures``) stops its dependants: they are not
run but reported ``blocked``, and so are theirs; unrelated nodes go on. Any other
exception, and Ctrl-C, ends the run: ``stop`` is called (to cut short the work in
flight), nothing more starts, the work in flight is waited for, and the exception goes
on. Pure apart from the threads: what a node means is the caller's.
"""

from __future__ import annotations

import bisect
import graphlib
import threading
from collections.abc import Callable, Collection, Hashable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

N = TypeVar("N", bound=Hashable)


@dataclass(frozen=True)
class Outcome(Generic[N]):
    """How one node ended: ``status`` ``done`` (``result`` is what its work returned),
    ``failed`` (``error`` is what its work raised) or ``blocked`` (not run:
    ``blocked_by`` is the dependency that failed or was blocked itself)."""

    status: str
    result: Any = None
    error: BaseException | None = None
    blocked_by: N | None = None


def _no_start(node: Any, number: int) -> None:
    pass


def _no_end(node: Any, outcome: Outcome) -> None:
    pass


def _no_stop() -> None:
    pass


def run(deps: Mapping[N, Collection[N]], work: Callable[[N], Any], jobs: int, *,
        failures: tuple[type[BaseException], ...] = (Exception,),
        on_start: Callable[[N, int], None] = _no_start,
        on_end: Callable[[N, Outcome[N]], None] = _no_end,
        stop: Callable[[], None] = _no_stop) -> dict[N, Outcome[N]]:
    """Run ``work(node)`` for every node of ``deps`` (node -> the nodes it depends on),
    at most ``jobs`` at once (at least one), each after its dependencies are done. Of
    the nodes ready, the first in ``deps``' order starts first, and a scan in that order
    stops at the first that finds no free worker (the order build_plan has always had).

    ``on_start(node, number)`` is called just before a node's work is handed to the pool
    (``number``: 1 for the first node started); ``on_end(node, outcome)`` when its work
    ends, and when a node is found blocked. Both are called from this thread, one at a
    time. Returns {node: Outcome}, in the order they ended.

    Raises ValueError (``graphlib.CycleError`` among them) when a dependency is no node
    of ``deps`` or the graph has a cycle, before anything runs; an exception from
    ``work`` that is not one of ``failures``, an exception from a callback, and
    KeyboardInterrupt, after ``stop()`` and after the work in flight has ended.
    """
    unknown = sorted({repr(d) for ds in deps.values() for d in ds if d not in deps})
    if unknown:
        raise ValueError(f"dependencies that are no nodes of the graph: {', '.join(unknown)}")
    sorter = graphlib.TopologicalSorter(deps)
    sorter.prepare()
    state = _Run(deps, sorter, work, max(1, jobs), failures, on_start, on_end)
    workers = max(1, min(state.jobs, len(deps)))
    pool = ThreadPoolExecutor(max_workers=workers)
    # Every worker thread is started before any work: ThreadPoolExecutor starts them as
    # work is handed in, and a Ctrl-C while it waits for one to start leaves that thread
    # out of what shutdown() waits for (it is recorded after it has started).
    gate = threading.Barrier(workers + 1)
    try:
        for _ in range(workers):
            pool.submit(gate.wait)
        gate.wait()
        while state.start_what_may_start(pool):
            finished, _ = wait(state.running, return_when=FIRST_COMPLETED)
            state.finish(finished)
    except BaseException:
        gate.abort()
        pool.shutdown(wait=False, cancel_futures=True)  # nothing more starts; then stop
        stop()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return state.outcomes


class _Run(Generic[N]):
    """The state of one ``run``: what is ready, running and ended."""

    def __init__(self, deps: Mapping[N, Collection[N]], sorter: graphlib.TopologicalSorter,
                 work: Callable[[N], Any], jobs: int, failures: tuple[type[BaseException], ...],
                 on_start: Callable[[N, int], None],
                 on_end: Callable[[N, Outcome[N]], None]) -> None:
        self.deps, self.sorter, self.work = deps, sorter, work
        self.jobs, self.failures = jobs, failures
        self.on_start, self.on_end = on_start, on_end
        self.rank = {node: i for i, node in enumerate(deps)}
        self.outcomes: dict[N, Outcome[N]] = {}
        self.ready: list[N] = []
        self.running: dict[Future, N] = {}
        self.started = 0

    def start_what_may_start(self, pool: ThreadPoolExecutor) -> bool:
        """One scan of the ready nodes in ``deps``' order: block a node whose dependency
        failed or was blocked (its dependants join the scan at their place), start one
        while a worker is free, stop at the first that finds none. True while work is
        in flight."""
        queue = sorted([*self.ready, *self.sorter.get_ready()], key=self.rank.__getitem__)
        while queue:
            node = queue[0]
            cause = next((d for d in self.deps[node]
                          if self.outcomes[d].status in ("failed", "blocked")), None)
            if cause is not None:
                queue.pop(0)
                self._end(node, Outcome("blocked", blocked_by=cause))
                for new in self.sorter.get_ready():
                    bisect.insort(queue, new, key=self.rank.__getitem__)
            elif len(self.running) < self.jobs:
                queue.pop(0)
                self.started += 1
                self.on_start(node, self.started)
                self.running[pool.submit(self.work, node)] = node
            else:
                break
        self.ready = queue
        return bool(self.running)

    def finish(self, finished: set[Future]) -> None:
        """Record the work that ended, in ``deps``' order."""
        for future in sorted(finished, key=lambda f: self.rank[self.running[f]]):
            node = self.running.pop(future)
            try:
                outcome: Outcome[N] = Outcome("done", result=future.result())
            except self.failures as exc:
                outcome = Outcome("failed", error=exc)
            self._end(node, outcome)

    def _end(self, node: N, outcome: Outcome[N]) -> None:
        self.outcomes[node] = outcome
        self.sorter.done(node)
        self.on_end(node, outcome)
