"""One fault trial: change the project, run build.py, inject one fault at a random instant,
check the invariants, run again without the fault, check again.

The five kinds (issue 24), each with its variants chosen at random per trial:

- ``signal``: SIGKILL or SIGINT to build.py's process group (what a CI cancel or
  Ctrl-C sends), or SIGKILL to build.py alone (the OOM killer: its children live on),
  during a ``--test`` build or a ``--push`` build, at an instant drawn over the
  undisturbed run's duration (planning, stage builds and exports, suites, tagging, each
  push step), or in one trial of four as the tag phase begins, or in one of six 0 to
  0.6 s after a stage's ``docker load`` of its layout began.
- ``engine``: the engine's container killed (SIGKILL) mid-build or mid-push, or in one
  trial of four as the tag phase begins, or in one of six during a stage's ``docker
  load``, and started again after 0 to 3 s.
- ``registry``: the registry killed at an instant of the push, or while the proxy holds
  the push's first request carrying a blob's bytes (then forwarded to the registry
  started again), and started again; or, through the proxy, blob uploads answered HTTP 500 (a few times: transient; every time: down),
  held unanswered (hung) for 5 to 20 s, or cut after some bytes.
- ``disk``: the state directory's or the engine's data root's file system filled so
  that 1 KiB to 2 MiB (state) or 1 KiB to 32 MiB (engine) stay free, before the run
  or (half the trials) at an instant drawn over it, so the last bytes go while it
  writes: a stage export, a tag, a state write.
- ``concurrent``: two ``--test`` builds at once on one engine and state directory, of
  the same tag or of the two tags (which share their base stage; the real project has
  one tag: the same tag always), the second started
  0 to D s after the first (struck: the first still ran when the second started).

A share of the trials (``--cold-base``, not the registry kind's) start from a cold base:
the bootstrapped base and the base stage are removed first and the instant is drawn over
the longer run, so faults meet debootstrap, the base's import and the base stage, and
two concurrent runs both find the base missing.

Invariants after every fault (``check_names`` and friends): every name points at its
image before or at a complete new one whose tests passed, never aliases split (except
where the run was SIGKILLed, or its engine died for longer than the tag phase waits, inside
its tag phase: then the state directory's tag record names them, and the next run puts
them back before anything else); every
JSON file of the state directory is whole and no test record claims a pass it did not
have; the registry serves every blob its tags reference; the run that ended said why in
its last line (a Python traceback never). After the recovery run (the same command, no
fault): it exited 0 with no manual step, built no stage that was complete before (the
base stage, where a run had completed it), each tag and its alias point at the complete image its report gives (tested where
it tests), the registry's tag and alias at one digest and what it pushed verifies
(``build.py verify``: signature, SBOM, test record), and no container (any on the
engine), scratch directory or atomic write's temporary file is left. A run the suite
had to kill past the project's run timeout (900 s; the real project's 2400 s) is a
violation whatever fault it met.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stagecraft import statefile
from tests.faults.rig import BASE_NAMES, Rig, Run
from tests.integration.harness import ROOT

KINDS = ("signal", "engine", "registry", "disk", "concurrent")
BASE_STAGE = BASE_NAMES[1]  # the base stage's names (stagecraft-stage/base:<key>)

# Words the last line of a run that a fault ended must hold (one of), per kind.
SAYS = {
    "engine": r"engine",
    # A push run's engine kill takes the registry with it (it runs in the engine's
    # container): the push or its signing then meets a registry that is gone.
    "engine push": r"engine|registry|connection|refused|reset|EOF|unreachable|timed? ?out",
    "registry": r"push|registry|upload|HTTP|blob|500",
    "disk": r"space|ENOSPC|disk|full|write",
}


@dataclass
class Outcome:
    """One trial: what was injected, when, and what the checks found."""

    index: int
    kind: str
    variant: str
    instant: float
    tag: str
    fault_rcs: list = field(default_factory=list)
    fault_last: list = field(default_factory=list)
    recovery_rc: int | None = None
    recovery_last: str = ""
    violations: list = field(default_factory=list)
    seconds: float = 0.0
    struck: bool = True  # False: the run ended before the drawn instant (nothing injected)
    notes: list = field(default_factory=list)
    # Seconds per part of the trial: tidy, fault, checks, recovery (with verify), after.
    phases: dict = field(default_factory=dict)
    # What the run the fault met had said last before the instant it struck (a timed
    # fault that struck; "" otherwise): where in the run the fault fell.
    met: str = ""

    @property
    def recovered(self) -> bool:
        return self.recovery_rc == 0

    def to_json(self) -> dict:
        return {**asdict(self), "recovered": self.recovered}


def command(tag: str, push: bool, rig: Rig, json_out: bool = False, test: bool = True) -> list[str]:
    """The build.py arguments of a trial's run (``--json``: the report on stdout;
    ``--push`` implies ``--test``)."""
    args = ["build", "--tag", tag, *(["--test"] if test or push else []), *(["--json"] if json_out else [])]
    return args + (["--push", "--registry", rig.push_to] if push else [])


def log_tails(err: str, limit: int = 3000) -> str:
    """The last ``limit`` bytes of each stage log a run's stderr names ("log: PATH" in a
    FAILED line), read now: the state directory goes with the rig's ``down``, and the
    step's own output (what a "did not complete successfully" hides) is only there."""
    tails = []
    for path in list(dict.fromkeys(re.findall(r"log: (/\S+\.log)", err)))[:8]:
        try:
            if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block, a device never end
                raise OSError(f"not a regular file: {path}")
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
                tails.append(f"--- {path} (its end)\n" + f.read(limit).decode("utf-8", "replace"))
        except OSError as exc:
            tails.append(f"--- {path}: {exc}")
    return "\n".join(tails)


# A JUnit report of one suite run is a few kB; a larger one is not read whole.
MAX_REPORT = 1024 * 1024


def suite_failures(state: Path, since: float, limit: int = 8) -> str:
    """What failed in the suite runs whose JUnit reports (``state``/test-reports/*.xml,
    written by stagecraft.testing.run_suites) changed after ``since`` (epoch s): one
    line per failed or erring test case (``stagecraft.suitecases.failed_cases``), ``FILE
    module::name: message`` (its first 300 characters), at most ``limit`` lines; ""
    when none. A run's stderr says only the counts ("1 failed, 9 passed"), and the next
    run overwrites the report. A report larger than ``MAX_REPORT`` bytes, or not XML,
    is named, not read."""
    from stagecraft.suitecases import failed_cases

    lines = []
    reports = state / "test-reports"
    for path in sorted(reports.glob("*.xml")) if reports.is_dir() else []:
        try:
            st = path.lstat()
            if not path.is_file() or path.is_symlink() or st.st_mtime < since:
                continue
            if st.st_size > MAX_REPORT:
                lines.append(f"{path.name}: {st.st_size} bytes, not read")
                continue
            cases = failed_cases(path)
        except (OSError, ValueError) as exc:
            lines.append(f"{path.name}: {exc}")
            continue
        lines += [f"{path.name} {c.test}: {c.message[:300]}" for c in cases]
    return "\n".join(lines[:limit])


def calibrate(rig: Rig, cold: bool = False) -> dict[str, float]:
    """Seconds of an undisturbed run of each command shape on fresh content (the range
    over which instants are drawn); raises AssertionError when one fails. After the
    warm-up: ``build`` (no tests); ``push`` (``--test --push``), whose first push line
    marks the end of its build, suites and tag phase: the ``test`` shape's span; and
    ``push only`` (``push`` of an image built and tested just before, untimed), the span
    of the registry kind's kill. With ``cold``, also ``base``: the seconds a build from a
    cold base (``Rig.drop_base``: debootstrap, import, base stage) takes beyond ``build``."""
    first = next(iter(rig.project.tags))
    # What an earlier suite run left goes first: the real project's calibration filled
    # its 12 GB data root on top of a stopped run's images (seed 20261374).
    untidy = rig.tidy()
    assert not untidy, f"calibration: the tidy failed: {untidy}"
    since = time.time() - 1
    rig.change()
    warm = rig.run(*command(first, False, rig, test=False))  # the base, once per engine
    assert warm.rc == 0, f"warm-up run failed:\n{warm.err[-3000:]}\n{log_tails(warm.err)}"
    rig.change()
    build = rig.run(*command(first, False, rig, test=False))
    assert build.rc == 0, f"calibration run (build) failed:\n{build.err[-3000:]}\n{log_tails(build.err)}"
    rig.change()
    push, tested = rig.run_marked(*command(first, True, rig), mark="pushing ")
    assert push.rc == 0 and tested, (f"calibration run (push) failed or pushed nothing:\n{push.err[-3000:]}\n"
                                      f"{log_tails(push.err)}\n{suite_failures(rig.state, since)}")
    rig.change()
    pre = rig.run(*command(first, False, rig))
    alone = rig.run("push", "--tag", first, "--registry", rig.push_to)
    assert pre.rc == 0 and alone.rc == 0, (f"calibration run (push only) failed:\n{(pre.err + alone.err)[-3000:]}\n"
                                           f"{suite_failures(rig.state, since)}")
    cal = {"build": build.seconds, "test": tested, "push": push.seconds, "push only": alone.seconds}
    if cold:
        rig.change()
        rig.drop_base()
        first_cold = rig.run(*command(first, False, rig, test=False))
        assert first_cold.rc == 0, (f"calibration run (cold base) failed:\n{first_cold.err[-3000:]}\n"
                                    f"{log_tails(first_cold.err)}")
        cal["base"] = max(0.0, first_cold.seconds - build.seconds)
    return cal


def _wait_then(proc: subprocess.Popen, delay: float) -> bool:
    """Sleep up to ``delay`` s; False when the process ended first."""
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        return True


Injected = tuple[str, float, list[Run]]  # variant, instant (s), the runs the fault met


def _when(rig: Rig, rng: random.Random, proc: subprocess.Popen, span: float,
          logs: dict[Path, int]) -> tuple[str, float, bool]:
    """When a trial's fault strikes: at an instant drawn over ``span`` s; or (one trial in
    four) as the run's tag phase begins, the window where names move; or (one in six)
    0 to 0.6 s after the run's first or second ``docker load`` of a stage's layout began
    (stage logs past their sizes ``logs``, taken before the run started): the load of a
    small stage takes well under a second, a window an instant drawn over the run seldom
    meets. Returns the
    label, the instant (s after the start) and whether the run was still going then."""
    draw = rng.random()
    if draw < 0.25:
        waited = rig.wait_tag_phase(proc, rig.project.run_timeout_s)
        return "at tagging", waited or 0.0, waited is not None
    if draw < 0.25 + 1 / 6:
        nth = rng.choice([1, 2])
        waited = rig.wait_load(proc, logs, rig.project.run_timeout_s, nth)
        delay = rng.uniform(0, 0.6)
        return f"mid-load {nth}", (waited or 0.0) + delay, waited is not None and _wait_then(proc, delay)
    instant = rng.uniform(0, span)
    return "", instant, _wait_then(proc, instant)


def _signal(rig: Rig, rng: random.Random, cal: dict[str, float], tag: str, test: bool) -> Injected:
    sig = rng.choice(["KILL", "INT"])
    # SIGKILL to the process group (a CI cancel) or to build.py alone (the OOM killer):
    # then its children (docker build, docker load, the suites) live on as orphans.
    alone = sig == "KILL" and rng.random() < 0.5
    push = test and rng.random() < 0.5
    shape = "push" if push else "test" if test else "build"
    logs = rig.log_sizes()
    proc, run, t0 = rig.start(rig.argv(*command(tag, push, rig, test=test)))
    at, instant, hit = _when(rig, rng, proc, cal[shape] * 1.05, logs)
    if hit:
        (os.kill if alone else os.killpg)(proc.pid, getattr(signal, f"SIG{sig}"))
        run.signalled = sig
    label = f"SIG{sig}{' build.py alone' if alone else ''} {shape} {at}".strip()
    return label, instant, [rig.finish(proc, run, t0)]


def _engine(rig: Rig, rng: random.Random, cal: dict[str, float], tag: str, test: bool) -> Injected:
    push = test and rng.random() < 0.5
    shape = "push" if push else "test" if test else "build"
    down = rng.uniform(0, 3)
    pid = rig.engine_pid()
    logs = rig.log_sizes()
    proc, run, t0 = rig.start(rig.argv(*command(tag, push, rig, test=test)))
    at, instant, hit = _when(rig, rng, proc, cal[shape], logs)
    if hit:
        rig.kill_engine(pid)
        run.signalled = "engine"
        time.sleep(down)
        rig.restart_engine()
    return f"engine killed {shape}{' ' + at if at else ''}, down {down:.1f}s", instant, [rig.finish(proc, run, t0)]


def _registry(rig: Rig, rng: random.Random, cal: dict[str, float], tag: str, test: bool) -> Injected:
    variant = rng.choice(["kill", "kill mid-upload", "500-transient", "500-down", "hang", "cut"])
    down = rng.uniform(0, 3)  # every draw before any wait or early return: the seed replays a run
    instant = rng.uniform(0, cal["push only"] * 1.05) if variant == "kill" else 0.0
    proxy = {"500-transient": ("error", {"times": rng.randint(1, 3)}), "500-down": ("error", {}),
             "hang": ("hang", {"seconds": rng.uniform(5, 20), "times": 1}),
             "cut": ("cut", {"bytes": rng.randint(0, 4 * 1024 * 1024), "times": rng.randint(1, 3)}),
             # the first request that carries a blob's bytes is held while the registry dies
             "kill mid-upload": ("hold", {"times": 1, "seconds": 30, "match": r"^(PATCH|PUT) .*/blobs/uploads/"})}
    # The image is built and tested first (untimed), so the fault meets the push.
    pre = rig.run(*command(tag, False, rig))
    if pre.rc != 0:
        return f"{variant} (pre-build failed)", 0.0, [pre]
    if variant in proxy:
        rig.set_proxy(proxy[variant][0], **proxy[variant][1])
    logged = rig.proxy_log_size()
    proc, run, t0 = rig.start(rig.argv("push", "--tag", tag, "--registry", rig.push_to))
    if variant == "kill":
        hit = _wait_then(proc, instant)
    elif variant == "kill mid-upload":
        hit = rig.wait_proxy_log(proc, logged, rig.project.run_timeout_s) is not None
    else:
        hit = False
    if hit:
        instant = time.monotonic() - t0
        rig.registry.kill()
        run.signalled = "registry"
        time.sleep(down)
        rig.registry.start()
    if variant == "kill mid-upload":
        rig.set_proxy("pass")  # the held request goes on, to the registry started again
    done = rig.finish(proc, run, t0)
    rig.set_proxy("pass")
    return variant, instant, [done]


def _disk(rig: Rig, rng: random.Random, cal: dict[str, float], tag: str, test: bool) -> Injected:
    where = rng.choice(["state", "engine"])
    leave = int(2 ** rng.uniform(10, 21 if where == "state" else 25))  # 1 KiB to 2 or 32 MiB
    # Half the trials fill it before the run; the others at an instant drawn over the
    # run, so the last bytes go while it writes (a stage export, a tag, a state write).
    mid = rng.random() < 0.5
    instant = rng.uniform(0, cal["test" if test else "build"]) if mid else 0.0
    root = rig.state if where == "state" else rig.data_disk()
    filler = None if mid else rig.fill(root, leave)
    try:
        proc, run, t0 = rig.start(rig.argv(*command(tag, False, rig, test=test)))
        if mid and _wait_then(proc, instant):
            filler = rig.fill(root, leave)
            instant = time.monotonic() - t0  # full from now: filling took its time
            run.signalled = "disk"
        run = rig.finish(proc, run, t0)
    finally:
        if filler is not None:
            filler.unlink(missing_ok=True)
    return f"{where} full{' mid-run' if mid else ''}, {leave} B free", instant, [run]


def _concurrent(rig: Rig, rng: random.Random, cal: dict[str, float], tag: str, test: bool) -> Injected:
    other = rng.choice([tag, *[t for t in rig.project.tags if t != tag]])
    instant = rng.uniform(0, cal["test" if test else "build"])
    p1, r1, t1 = rig.start(rig.argv(*command(tag, False, rig, test=test)))
    overlap = _wait_then(p1, instant)
    p2, r2, t2 = rig.start(rig.argv(*command(other, False, rig, test=test)))
    r2.signalled = "overlap" if overlap and p1.poll() is None else ""  # the first still ran
    return ("same tag" if other == tag else "two tags", instant,
            [rig.finish(p1, r1, t1), rig.finish(p2, r2, t2)])


INJECT = {"signal": _signal, "engine": _engine, "registry": _registry, "disk": _disk,
          "concurrent": _concurrent}


def recorded_names(rig: Rig) -> set[str]:
    """The names of the tag records left in the state directory (``tagrecovery``: a run
    that died inside its tag phase; every build and push puts them back first)."""
    names: set[str] = set()
    for path in (rig.state / "tags").glob("pending-*.json"):
        try:
            doc = statefile.read_json(path) or {}
        except (statefile.Unreadable, OSError):
            continue  # check_state says so
        names |= {m[0] for m in doc.get("moves") or [] if isinstance(m, list) and m}
    return names


def check_names(rig: Rig, before: dict[str, str | None], tested: bool,
                deferred: frozenset = frozenset()) -> list[str]:
    """Every name at its old image or at a complete, tested new one; aliases with their
    tag. Names in ``deferred`` (a tag record the next run puts back: the run died inside
    its tag phase, where no handler runs) may be split or missing until then."""
    now = rig.names()
    bad = []
    repository = rig.project.repository
    for tag, alias in rig.project.tags.items():
        t, a = f"{repository}:{tag}", f"{repository}:{alias}"
        held = t in deferred and a in deferred
        if now[t] != now[a] and not held:
            bad.append(f"names split: {tag} -> {str(now[t])[7:19]}, {alias} -> {str(now[a])[7:19]}")
        for ref in (t, a):
            if now[ref] == before[ref]:
                continue
            if now[ref] is None and not held:
                bad.append(f"{ref} removed (was {str(before[ref])[7:19]})")
            elif now[ref] is None:
                continue
            elif not rig.image_complete(now[ref]):
                bad.append(f"{ref} -> incomplete image {now[ref][7:19]}")
            elif tested:
                try:
                    rec = rig.record(now[ref])
                except (statefile.Unreadable, OSError) as exc:
                    rec = {"error": str(exc)}
                if not rec or rec.get("passed") is not True:
                    bad.append(f"{ref} -> {now[ref][7:19]} without a passed test record")
    return bad


def check_state(rig: Rig, since: float = 0.0) -> list[str]:
    """Every JSON file of the state directory written since ``since`` (a time.time())
    whole; no test record claims what it did not have."""
    bad = []
    for path in rig.state_files():
        if path.suffix != ".json" or path.name.startswith("."):
            continue
        try:
            if path.stat().st_mtime < since:
                continue  # an earlier trial's: judged there
        except OSError:
            continue
        try:
            doc = statefile.read_json(path)
        except (statefile.Unreadable, OSError) as exc:
            bad.append(f"state file unreadable: {path.relative_to(rig.state)} ({exc})")
            continue
        if doc and doc.get("passed") is True:
            counts = doc.get("counts") or {}
            if counts.get("failed") or counts.get("error") or not counts.get("passed"):
                bad.append(f"test record {path.name} claims a pass with counts {counts}")
    return bad


def interpreter_start(run: Run) -> bool:
    """Whether ``run`` met its SIGINT inside the Python interpreter's own start, before
    build.py's first line: CPython's KeyboardInterrupt traceback with no frame of this
    checkout but build.py's line 0 (Python installs its handler before it imports site
    and os, and the module's first bytecode checks for signals before any try; no
    program can catch that). tests/unit/test_start_interrupt.py holds build.py to the rest.
    Earlier still, before the interpreter has set its handler, the signal's default action
    ends the process: it dies of SIGINT (exit -2) with nothing on stderr (seed 20261402,
    trial 54: 0.06 s after its start; an uncaught KeyboardInterrupt that Python turns into
    the same exit prints its traceback first)."""
    if run.signalled == "INT" and run.rc == -signal.SIGINT and not run.err.strip():
        return True
    line_0 = f'  File "{ROOT / "build.py"}", line 0, in <module>'  # its first bytecode's check
    frames = [ln for ln in run.err.splitlines() if ln.startswith('  File "') and ln != line_0]
    return (run.signalled == "INT" and run.err.rstrip().endswith("KeyboardInterrupt")
            and not any(str(ROOT) in ln for ln in frames))


def check_message(kind: str, runs: list[Run]) -> list[str]:
    """A run a fault ended says why in its last line; no traceback (but CPython's own,
    ``interpreter_start``); two runs at once (``concurrent``, no fault) both succeed."""
    bad = []
    for run in runs:
        if "Traceback (most recent call last)" in run.err:
            if not interpreter_start(run):
                bad.append(f"traceback: {run.err.strip().splitlines()[-1][:160]}")
            continue
        if run.timed_out:
            bad.append(f"did not end within {run.seconds:.0f} s (killed by the suite)")
            continue
        if kind == "concurrent" and run.rc not in (0, None):
            # No fault met it: two runs at once must both succeed (one waits for the other
            # where they share work), as the seed 20261393 trial 24's did not.
            bad.append(f"one of two runs at once failed (exit {run.rc}): {run.last_line()[:160]}")
            continue
        if run.rc in (0, None) or run.signalled == "KILL" or interpreter_start(run):
            continue  # a SIGKILLed run says nothing, nor one the signal met before Python: the next run does
        last = run.last_line()
        if not last:
            bad.append(f"exit {run.rc} with nothing on stderr")
        elif run.signalled == "INT" and not last.startswith("interrupted") and run.rc != 0:
            if not re.search(r"interrupt", run.err[-2000:], re.I):
                bad.append(f"SIGINT, last line does not say so: {last[:160]}")
        elif kind in SAYS and run.signalled != "INT" and not re.search(
                SAYS["engine push" if kind == "engine" and "--push" in run.argv else kind], last, re.I):
            bad.append(f"last line does not name the fault: {last[:160]}")
    return bad


def trial(rig: Rig, index: int, kind: str, rng: random.Random, cal: dict[str, float],
          cold: bool = False) -> Outcome:
    """One trial of ``kind`` (module docstring): returns its outcome. ``cold`` (never for
    the registry kind, whose fault meets a push): a cold base trial, the base removed
    first (``Rig.drop_base``) and the instants drawn over the longer run (``cal["base"]``
    s more), so most fall in the bootstrap (debootstrap, the import) and the base stage
    (whose steps BuildKit's cache may still hold). ``rng`` draws the same numbers
    either way, so a seed replays its trials with or without cold ones."""
    t0 = time.monotonic()
    tag = rng.choice(sorted(rig.project.tags))
    repository, aliases = rig.project.repository, rig.project.tags
    test = kind == "registry" or rng.random() < 0.35
    cold = cold and kind != "registry"
    untidy = rig.tidy()
    retries = rig.suite_retries
    marks = [("tidy", time.monotonic())]
    rig.change()
    if cold:
        rig.drop_base()
        cal = {shape: span + cal["base"] for shape, span in cal.items()}
    before = rig.names()
    images_before = rig.images()
    started = time.time() - 1  # file times have a coarse clock on some file systems
    containers_before, dirs_before = set(rig.containers()), set(rig.scratch_dirs())
    temps_before = set(rig.state_temps())
    variant, instant, runs = INJECT[kind](rig, rng, cal, tag, test)
    variant += " (cold base)" if cold else ""
    marks.append(("fault", time.monotonic()))
    failed = suite_failures(rig.state, started)  # read now: the recovery run's suites overwrite it
    variant += "" if test or kind == "registry" else " (no --test)"
    out = Outcome(index, kind, variant, round(instant, 3), tag,
                  [r.rc for r in runs], [r.last_line()[:200] for r in runs])
    if untidy:
        out.violations.append(f"before the trial, {untidy}")
    # Whether the fault met a run: a timed one only when the run still went at its
    # instant; two runs only when the second started before the first ended.
    timed = kind in ("signal", "engine", "concurrent") or variant.startswith("kill") or "mid-run" in variant
    out.struck = not timed or any(r.signalled for r in runs)
    if timed and out.struck:
        out.met = runs[0].said_before(instant)[:160] or "(nothing said yet)"
    if rig.engine_down():
        rig.restart_engine()
    # Only a run that could not act (SIGKILL, or an engine gone past the wait) may leave
    # its names to the record; the checks after the recovery run are strict.
    deferred = frozenset(recorded_names(rig))
    if deferred and not any(r.signalled in ("KILL", "engine") for r in runs):
        out.violations.append(f"a tag record was left by a run that was not killed: {sorted(deferred)}")
    out.violations += check_names(rig, before, tested=test, deferred=deferred)
    out.violations += check_state(rig, started)
    out.violations += [f"registry: {m}" for m in rig.missing_blobs()]
    unsaid = check_message(kind, runs)
    out.violations += unsaid
    if unsaid:  # what the failed step printed, for the diagnosis (gone with the state dir)
        out.notes += [f"stage logs of the faulted run:\n{tails}" for tails in map(log_tails, (r.err for r in runs)) if tails]
    out.notes += ["SIGINT inside the Python interpreter's start (its own traceback, or none: before its handler), nothing begun"
                  for r in runs if interpreter_start(r)]
    marks.append(("checks", time.monotonic()))
    # The next plain run, with no manual step.
    push = kind == "registry" or any("--push" in r.argv for r in runs)
    tags = sorted({tag, *[r.argv[r.argv.index("--tag") + 1] for r in runs]})
    expected: set = set()
    recovered: dict[str, str | None] = {}  # tag -> the image the recovery run reports for it
    for t in tags:
        rec_started = time.time() - 1
        # The base stage may be built again only where no run before completed it (a
        # cold base trial's fault, or an earlier trial's failed recovery).
        base_whole = any(n.startswith(BASE_STAGE) for n in rig.base_images())
        rec = rig.run(*command(t, push, rig, json_out=True, test=test))
        out.recovery_rc = rec.rc if out.recovery_rc in (None, 0) else out.recovery_rc
        out.recovery_last = rec.last_line()[:200]
        if rec.rc != 0:
            out.violations.append(f"recovery run of {t} exited {rec.rc}: {rec.last_line()[:200]}")
            out.notes.append(f"stage logs of the recovery run of {t}:\n{log_tails(rec.err)}")
            out.notes.append(f"its failed suite cases:\n{suite_failures(rig.state, rec_started)}")
            missing = re.search(r"content digest (sha256:[0-9a-f]{64}): not found", rec.err[-4000:])
            if missing:  # seed 20261398, trial 46: what the engine holds, and whether a run heals
                out.notes.append(f"the engine of {missing[1]}:\n{rig.content_evidence(missing[1])}")
                again = rig.run(*command(t, push, rig, json_out=True, test=test))
                out.notes.append(f"the same command once more: exit {again.rc}: {again.last_line()[:300]}")
            continue
        report = json.loads(rec.out)
        recovered[t] = next((i.get("image_id") for i in report.get("images", []) if i.get("tag") == t), None)
        stages = report.get("stages") or []
        stages = list(stages.values()) if isinstance(stages, dict) else stages
        expected |= {v.get("image_id") for v in stages} | {i.get("image_id") for i in report.get("images", [])}
        rebuilt = [v.get("stage") for v in stages if v.get("stage") == "base" and v.get("status") == "built"]
        if rebuilt and base_whole:  # only the runtime stage (and its label stage) had new content
            out.violations.append("recovery built the base stage again: a complete stage was not reused")
    if push and out.recovery_rc == 0:  # what was pushed is signed and attested whole
        for t in tags:
            v = rig.verify(t)
            if v.rc != 0:
                said = [ln for ln in (v.out + v.err).splitlines() if ln.strip()]
                out.violations.append(f"after recovery {t} does not verify (exit {v.rc}): "
                                      f"{'; '.join(said[-3:])[:300]}")
    marks.append(("recovery", time.monotonic()))
    expected |= set(rig.base_images().values())  # a base a run bootstrapped (cold base)
    after = rig.names()
    for t, image_id in recovered.items():  # the names at what the recovery run made, whole
        for ref in (f"{repository}:{t}", f"{repository}:{aliases[t]}"):
            if after[ref] != image_id:
                out.violations.append(f"after recovery {ref} -> {str(after[ref])[7:19]}, not the "
                                      f"recovery run's image {str(image_id)[7:19]}")
        if image_id and not rig.image_complete(image_id):
            out.violations.append(f"after recovery {t} -> incomplete image {image_id[7:19]}")
    if push and out.recovery_rc == 0:  # in the registry too, a tag and its alias together
        pushed = rig.registry_tags()
        for t in tags:
            tag_ref, alias_ref = f"{repository}:{t}", f"{repository}:{aliases[t]}"
            if pushed.get(tag_ref) != pushed.get(alias_ref) or not pushed.get(tag_ref, "").startswith("sha256:"):
                out.violations.append(f"after recovery the registry has {tag_ref} -> {pushed.get(tag_ref)}, "
                                      f"{alias_ref} -> {pushed.get(alias_ref)}")
    for t in tags:
        img = after[f"{repository}:{t}"]
        try:
            rec_doc = rig.record(img) if img else None
        except (statefile.Unreadable, OSError):
            rec_doc = None
        if test and out.recovered and not (rec_doc and rec_doc.get("passed")):
            out.violations.append(f"after recovery {t} is not at a tested image")
    out.violations += [v + " (after recovery)" for v in check_state(rig, started) + check_names(rig, after, test)]
    if recorded_names(rig):
        out.violations.append("a tag record is left after the recovery run")
    out.violations += [f"registry after recovery: {m}" for m in rig.missing_blobs()]
    extra = rig.images() - images_before - expected
    if extra and out.recovered:
        out.violations.append(f"{len(extra)} image(s) left that no name and no stage of the next run uses")
    left = sorted(set(rig.containers()) - containers_before)
    if left:
        out.violations.append(f"containers left after recovery: {left}")
    temps = sorted(set(rig.state_temps()) - temps_before)
    if temps:
        out.violations.append(f"temporary files left in the state directory after recovery: {temps}")
    dirs = sorted(set(rig.scratch_dirs()) - dirs_before)
    if dirs:
        out.violations.append(f"scratch directories left after recovery: {dirs}")
    if out.violations:  # what the runs said, for the one who looks into it
        out.notes += [f"stderr of {' '.join(r.argv[2:4])}: ...{r.err[-1500:]}" for r in runs]
        if failed:
            out.notes.append(f"suite cases that failed in the fault's runs:\n{failed}")
    if rig.suite_retries > retries:
        out.notes.append(f"the engine failed a suite check in {rig.suite_retries - retries} suite run(s) of "
                         "this trial's runs, each of which said it would run those suites again in a new "
                         "container")
    marks.append(("after", time.monotonic()))
    out.phases = {name: round(t - prev, 1) for (name, t), prev in zip(marks, [t0] + [t for _, t in marks[:-1]], strict=True)}
    out.seconds = round(time.monotonic() - t0, 1)
    return out
