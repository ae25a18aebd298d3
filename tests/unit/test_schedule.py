"""The stage scheduler (stagecraft/schedule.py) that builder.build_plan runs its stages
with: order, the bound on work at once, what a failure stops, and how an unexpected error
or Ctrl-C (a real SIGINT to this process) ends a run. Real threads; the work is made up.
Events are waited for with generous timeouts that only keep a broken scheduler from
hanging the run; no assertion is on time."""

from __future__ import annotations

import graphlib
import os
import signal
import threading

import pytest

from stagecraft.schedule import Outcome, run

WAIT_S = 30.0  # a bound on a hang, never reached when the scheduler works


class Recorder:
    """Work that records when each node starts and ends (one list, in order)."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.fail = fail or {}

    def __call__(self, node: str) -> str:
        with self.lock:
            self.events.append(("start", node))
        try:
            if node in self.fail:
                raise self.fail[node]
            return node.upper()
        finally:
            with self.lock:
                self.events.append(("end", node))

    def started(self) -> list[str]:
        return [n for what, n in self.events if what == "start"]


def test_each_node_runs_once_after_everything_it_depends_on():
    deps = {"base": (), "cuda": ("base",), "cpu": ("base",), "accel": ("cuda",),
            "runtime": ("accel", "cpu"), "other": ()}
    work = Recorder()
    outcomes = run(deps, work, jobs=3)
    assert sorted(work.started()) == sorted(deps), work.events
    for node, needs in deps.items():
        began = work.events.index(("start", node))
        for need in needs:
            assert work.events.index(("end", need)) < began, (node, need, work.events)
    assert outcomes == {n: Outcome("done", result=n.upper()) for n in deps}


def test_with_one_job_ready_nodes_start_in_the_graphs_order_and_are_numbered():
    deps = {"base": (), "cuda": ("base",), "cpu": ("base",), "other": (), "runtime": ("cpu",)}
    starts: list[tuple[str, int]] = []
    ends: list[str] = []
    run(deps, Recorder(), jobs=1, on_start=lambda n, i: starts.append((n, i)),
        on_end=lambda n, o: ends.append(n))
    assert starts == [("base", 1), ("cuda", 2), ("cpu", 3), ("other", 4), ("runtime", 5)]
    assert ends == ["base", "cuda", "cpu", "other", "runtime"]


@pytest.mark.parametrize("jobs, most", [(3, 3), (1, 1), (0, 1), (-2, 1)])
def test_never_more_than_jobs_at_once(jobs, most):
    lock = threading.Lock()
    now, peak = [0], [0]
    # With 3 jobs, three at once must happen: each waits for two others to be running.
    together = threading.Barrier(3, timeout=WAIT_S) if most == 3 else None

    def work(node: str) -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        try:
            if together is not None:
                together.wait()
        finally:
            with lock:
                now[0] -= 1

    outcomes = run({f"n{i}": () for i in range(6)}, work, jobs=jobs)
    assert all(o.status == "done" for o in outcomes.values()), outcomes
    assert peak[0] == most


def test_a_failure_blocks_what_depends_on_it_and_nothing_else():
    deps = {"base": (), "cuda": ("base",), "accel": ("cuda",), "runtime": ("accel",),
            "cpu-base": (), "cpu-runtime": ("cpu-base",)}
    boom = RuntimeError("cuda stage failed")
    work = Recorder(fail={"cuda": boom})
    ended: list[tuple[str, str]] = []
    outcomes = run(deps, work, jobs=2, failures=(RuntimeError,),
                   on_end=lambda n, o: ended.append((n, o.status)))
    assert outcomes["cuda"] == Outcome("failed", error=boom)
    assert outcomes["accel"] == Outcome("blocked", blocked_by="cuda")
    assert outcomes["runtime"] == Outcome("blocked", blocked_by="accel")
    for node in ("base", "cpu-base", "cpu-runtime"):
        assert outcomes[node] == Outcome("done", result=node.upper()), outcomes
    assert "accel" not in work.started() and "runtime" not in work.started()
    assert ended.index(("cuda", "failed")) < ended.index(("accel", "blocked")) \
        < ended.index(("runtime", "blocked")), ended


def test_blocked_nodes_are_reported_in_the_graphs_order_as_one_scan_meets_them():
    # What build_plan's report lists, in this order: a child right after its parent when
    # it comes next in the plan, not every child first and then the grandchildren.
    deps = {"a": (), "b": ("a",), "c": ("b",), "x": ("a",), "d": ()}
    ended: list[tuple[str, str]] = []
    run(deps, Recorder(fail={"a": RuntimeError("a")}), jobs=1, failures=(RuntimeError,),
        on_end=lambda n, o: ended.append((n, o.status)))
    assert ended == [("a", "failed"), ("b", "blocked"), ("c", "blocked"), ("x", "blocked"),
                     ("d", "done")]


def test_an_error_that_is_no_failure_ends_the_run_after_the_work_in_flight():
    release = threading.Event()
    slow_started = threading.Event()
    finished: list[str] = []
    stops: list[str] = []

    def work(node: str) -> None:
        if node == "bad":
            slow_started.wait(WAIT_S)
            raise KeyError("a bug, not a failed stage")
        slow_started.set()
        release.wait(WAIT_S)  # in flight until the run is told to stop
        finished.append(node)

    def stop() -> None:
        stops.append("stop")
        release.set()

    started: list[str] = []
    with pytest.raises(KeyError):
        run({"bad": (), "slow": (), "later": (), "last": ("bad",)}, work, jobs=2,
            failures=(RuntimeError,), on_start=lambda n, i: started.append(n), stop=stop)
    assert stops == ["stop"]
    assert finished == ["slow"], "the work in flight was not waited for"
    assert started == ["bad", "slow"], "work started after the run was ending"


def test_ctrl_c_stops_the_work_in_flight_and_starts_nothing_more():
    release = threading.Event()
    finished: list[str] = []
    stops: list[str] = []

    def work(node: str) -> None:
        # Ctrl-C as soon as the first work runs: the run may still be handing it in.
        os.kill(os.getpid(), signal.SIGINT)
        release.wait(WAIT_S)
        finished.append(node)

    def stop() -> None:
        stops.append("stop")
        release.set()

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell may ignore it
    try:
        started: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            run({"first": (), "second": ("first",), "third": ()}, work, jobs=1,
                on_start=lambda n, i: started.append(n), stop=stop)
    finally:
        signal.signal(signal.SIGINT, before)
    assert stops == ["stop"] and release.is_set(), "stop() was not called: builds would go on"
    assert finished == ["first"], "the run ended before its work in flight"
    assert started == ["first"]


def test_a_cycle_or_a_dependency_that_is_no_node_is_refused_before_anything_runs():
    work = Recorder()
    with pytest.raises(graphlib.CycleError):
        run({"a": ("c",), "b": ("a",), "c": ("b",), "d": ()}, work, jobs=2)
    with pytest.raises(ValueError, match="no nodes of the graph: 'ghost'"):
        run({"a": ("ghost",), "d": ()}, work, jobs=2)
    assert work.events == []


def test_an_empty_graph_is_an_empty_run():
    assert run({}, Recorder(), jobs=4) == {}
