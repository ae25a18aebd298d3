"""What a BuildKit build did, and why a failed one failed (``failure_reason``), read from
its plain progress output (``--progress=plain``), line by line. Pure.

BuildKit numbers each vertex of the solve (``#6 [2/3] RUN ...``) and reports its end
with ``#6 CACHED``, ``#6 DONE 1.2s`` or ``#6 ERROR: ...``. Cache imports show as
``importing cache manifest from REF`` vertices; a registry that does not answer is an
``ERROR`` there, and the build goes on without that cache. Cache exports show as
``exporting cache to registry`` / ``exporting cache to client directory``; with
``ignore-error=true`` an ``ERROR`` there leaves the build's result intact (moby/buildkit
#3430). A local cache that does not exist yet is a ``WARNING: local cache import at PATH
not found`` line from buildx. Same format on BuildKit 0.8 (Docker 20.10) and 0.13.

A step whose result comes from an imported cache is not always reported ``CACHED``:
BuildKit 0.13 fetches such a result lazily, when a later step or the image exporter needs
its files, and reports that fetch as the step completing again: ``CACHED`` then ``DONE``,
or two ``DONE`` lines, or (the last step of a stage, fetched while the image is unpacked)
one ``DONE`` after ``exporting to image`` has begun. The plain printer redraws on a
timer and prints each vertex's latest state, so when the fetch starts in the same
redraw as the cached completion (the last step, fetched the moment the exporter starts),
the ``CACHED`` line is never printed: the step shows its name before the exporter and its
only ``DONE`` after it (what explains a CI run on Docker 26.1 that counted one base step
as run while the image had the cached layers byte for byte). A step that really ran
completes once, before the exporter starts (the exporter needs its result). So a RUN step
counts as run only when it was never reported ``CACHED``, completed once, and was first reported and
completed before the exporter began, and no layer was transferred for it. A fetched step
shows its layer's transfer under its own number (``#7 sha256:<digest> 160.88MB / 160.88MB
1.9s done``) whatever the printer dropped; a step that runs transfers nothing (in the
stage logs of this project's cache tests and of a benchmark runner examined here, every
fetched step had that line and no step that ran had it). BuildKit 0.8 reports plain ``CACHED``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .safetext import cut_middle

_VERTEX = re.compile(r"^#(\d+) (.*)$")
# A layer transferred for a vertex: its result fetched from a cache, not made here.
_TRANSFER = re.compile(r"^sha256:[0-9a-f]{64} ")
_STEP = re.compile(r"^\[[^\]]*\d+/\d+\] (RUN|COPY|ADD) ")
# A cache that is simply not there yet (the first build of a key): not a failure.
_MISSING = re.compile(r"not found|manifest unknown|name unknown|no such file", re.IGNORECASE)


@dataclass
class _Vertex:
    name: str
    cached: bool = False
    dones: int = 0
    error: str = ""
    late: bool = False  # first reported, or completed, after the exporter began: lazily loaded
    fetched: bool = False  # a layer was transferred for it

    @property
    def ran(self) -> bool:
        """Executed, not taken from a cache (see the module docstring)."""
        return bool(self.error) or (not self.cached and self.dones == 1 and not self.late
                                    and not self.fetched)


@dataclass
class BuildLog:
    """Feed it every output line (``feed``); then ``run_executed`` / ``run_cached``
    count the RUN steps BuildKit ran or took from its cache, ``cache_export_errors``
    the cache exports that failed (the cache was not written) and
    ``cache_import_errors`` the imports that failed for another reason than a cache
    that is not there yet."""

    vertices: dict[int, _Vertex] = field(default_factory=dict)
    exporting: bool = False

    def reset(self) -> None:
        """Forget every line read (the build runs again from its start)."""
        self.vertices.clear()
        self.exporting = False

    def feed(self, line: str) -> None:
        """Read one line of plain progress output."""
        m = _VERTEX.match(line.rstrip("\n"))
        if not m:
            return
        num, rest = int(m.group(1)), m.group(2)
        v = self.vertices.get(num)
        if v is None:
            self.vertices[num] = _Vertex(rest, late=self.exporting)
            if rest.startswith(("exporting to image", "exporting to oci image")):
                self.exporting = True
            return
        if rest == "CACHED":
            v.cached = True
        elif rest.startswith("DONE"):
            v.dones += 1
            v.late = v.late or self.exporting
        elif _TRANSFER.match(rest):
            v.fetched = True
        elif rest.startswith("ERROR:") and not v.error:
            v.error = rest[len("ERROR:"):].strip()

    def _steps(self, kind: str) -> list[_Vertex]:
        return [v for v in self.vertices.values()
                if (m := _STEP.match(v.name)) and m.group(1) == kind]

    @property
    def run_executed(self) -> int:
        """RUN steps that ran (not taken from a cache)."""
        return sum(1 for v in self._steps("RUN") if v.ran)

    @property
    def run_cached(self) -> int:
        """RUN steps taken from a cache (local or imported)."""
        return sum(1 for v in self._steps("RUN") if not v.ran and (v.cached or v.dones))

    @property
    def cache_export_errors(self) -> list[str]:
        """``destination kind: error`` of each cache export that failed."""
        return [f"{v.name.removeprefix('exporting cache to ')}: {v.error}"
                for v in self.vertices.values()
                if v.name.startswith("exporting cache") and v.error]

    @property
    def cache_import_errors(self) -> list[str]:
        """``REF: error`` of each cache import that failed other than by being absent."""
        return [f"{v.name.removeprefix('importing cache manifest from ')}: {v.error}"
                for v in self.vertices.values()
                if v.name.startswith("importing cache manifest") and v.error
                and not _MISSING.search(v.error)]


# Why a build failed, from the tail of its output.

# The docker client's words when its connection to the daemon broke during a build or a
# load (docker/cli: "cannot write <iidfile> because server did not provide an image ID";
# "error during connect: Post ...": the request could not be sent or was cut).
LOST_RE = re.compile(r"server did not provide an image ID|error reading from server: EOF|"
                     r"Cannot connect to the Docker daemon|error during connect")
STEP_RE = re.compile(r"^#\d+ \[([^\]]+)\] (.*)$")


def step_started(line: str) -> str | None:
    """``[stage 2/5] RUN ...`` when the output ``line`` is a step's first line (not its
    ``DONE`` or ``CACHED`` report), else None."""
    m = STEP_RE.match(line)
    if m and not m.group(2).startswith(("DONE", "CACHED")):
        return f"[{m.group(1)}] {m.group(2)}"
    return None


_STEP_OUTPUT = re.compile(r"^#(\d+) \d+\.\d+ (.*)$")
_STEP_ERROR = re.compile(r"(^|\b)(ERROR|Error|error|E:|fatal|Traceback)\b")


# ENOSPC and EDQUOT as strerror(3) words them (errno(3)), and as Go's syscall package
# does, in lower case (BuildKit's and the daemon's own errors: "mkdir ...: no space left
# on device").
_NO_SPACE = re.compile(r"no space left on device|disk quota exceeded", re.I)
# BuildKit's error for a failed step quotes the step's whole command, then the cause:
# 'ERROR: failed to solve: process "/bin/bash -o pipefail -c ..." did not complete
# successfully: exit code: 1'. A reason longer than REASON_CHARS keeps its start and its
# end, where that cause is (safetext.cut_middle).
REASON_CHARS = 300
# Python's tempfile raises FileNotFoundError "No usable temporary directory found in
# [...]" when it can write a test file in none of the places it tries (TMPDIR, /tmp,
# /var/tmp, /usr/tmp, the working directory), and the OSError under it (ENOSPC, EROFS)
# is never printed (CPython Lib/tempfile.py, ``_get_default_tempdir``). In a build step
# every one of them is on the engine's storage: ensurepip said only this when the engine's
# disk filled during a venv's creation (the fault suite, seed 20261392, issue 24).
_NO_TEMP_DIR = re.compile(r"No usable temporary directory found in (.*)$")
# The first line of a Python traceback; its exception is its first unindented line after
# it (the "  File ..." lines and their source lines are indented).
_TRACEBACK = "Traceback (most recent call last):"


def failure_reason(lines: list[str]) -> str:
    """The most telling line of a failed build's plain-progress output: a full disk
    wherever a line says so (or Python's tempfile found no directory it could write in),
    else the last error line printed by the failing step itself (pip's, apt's; a Python
    traceback's exception line, not its first), else BuildKit's own error, without the
    step prefix; at most ``REASON_CHARS`` characters, a longer line's middle left out."""
    full = next((ln for ln in reversed(lines) if _NO_SPACE.search(ln)), None)
    if full is not None:  # the cause under whatever the step printed first (compileall's, ...)
        return (f"no space left on device during the build (the engine's storage, most often) "
                f"({cut_middle(full.strip(), 200)}); free space (build.py prune, docker system prune) and run again")
    marked = [(m.group(1), m.group(2)) for m in map(_STEP_OUTPUT.match, lines) if m]
    out = [text for _, text in marked]
    no_temp = next((m for m in map(_NO_TEMP_DIR.search, reversed(out)) if m), None)
    if no_temp is not None:
        return (f"no usable temporary directory in the build step: Python could write a file in "
                f"none of {cut_middle(no_temp.group(1).strip(), 120)} (the engine's storage full, "
                f"most often); free space (build.py prune, docker system prune) and run again")
    mismatch = _pip_hash_mismatch(out) or _pip_unreachable(out)
    if mismatch:
        return mismatch
    ours = [ln.strip() for ln in out if ln.lstrip().startswith("stagecraft: ")]
    if ours:  # a check of our own templates said what failed (a locked hash or version)
        return ours[-1][:300]
    own = _step_errors(marked)
    if own:
        return cut_middle(own[-1], REASON_CHARS)
    kit = [ln for ln in lines if "ERROR" in ln or "error" in ln]
    return cut_middle((kit[-1] if kit else lines[-1] if lines else "no output").strip(), REASON_CHARS)


def _step_errors(marked: list[tuple[str, str]]) -> list[str]:
    """The error lines of the steps' output (``(step, text)`` pairs, in order), stripped:
    the lines ``_STEP_ERROR`` matches, and for each Python traceback its exception line
    alone: the first line of the same step after its header indented no deeper than the
    header (its "File ..." frames and their source lines, deeper, are never the reason,
    whatever words they hold), or a sentence saying the output ends inside it."""
    errors: list[str] = []
    frames: set[int] = set()
    for i, (step, text) in enumerate(marked):
        if i in frames:
            continue
        if text.lstrip().startswith(_TRACEBACK):
            depth, exc = _indent(text), None
            for j in range(i + 1, len(marked)):
                if marked[j][0] != step or not marked[j][1].strip():
                    continue
                frames.add(j)
                if _indent(marked[j][1]) <= depth:
                    exc = marked[j][1].strip()
                    break
            errors.append(exc or "a Python traceback whose exception line never came (the output ends inside it)")
        elif _STEP_ERROR.search(text):
            errors.append(text.strip())
    return errors


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


# BuildKit runs a step that two builds ask for at once as one, with one build's session
# (its secrets, its context files); when that build's client goes away (a run killed
# while its buildx client lived on, then died), the other build fails with "no active
# sessions" though nothing of its own went wrong (moby/buildkit#1432). Built again, the
# step is its own. Seen by the fault suite (seed 20261373, trial 56).
# BuildKit's own words only: a step's output ("#7 0.41 ...", which BuildKit's error
# trailer repeats) saying the same is the step's business.
_SESSION_LOST = re.compile(r"^(#\d+ )?(ERROR: )?failed to solve: (.*: )?no active sessions?\b")


def session_lost(lines: list[str]) -> bool:
    """Whether one of a failed build's last 20 output lines is BuildKit's "failed to
    solve: no active sessions": the build's own session is not the cause
    (``_SESSION_LOST``)."""
    return any(_SESSION_LOST.search(ln.strip()) for ln in lines[-20:])


# BuildKit's image exporter on the containerd image store creates the image's name, and
# a second build exporting the same name at once fails on it (moby's image service:
# 'image "docker.io/stagecraft-stage/runtime:...": already exists'), though its image
# was built whole. Seen by the fault suite (seed 20261393, trial 24: two runs of one tag).
_NAME_TAKEN = re.compile(r'^(?:#\d+ )?(?:ERROR: )?(?:failed to solve: )?image "(?:docker\.io/)?(?:library/)?'
                         r'([^"\s]+)": already exists\s*$')


def name_taken(lines: list[str]) -> str | None:
    """The name a failed build's exporter could not create because another build had
    just created it, from BuildKit's own error among the output's last 20 ``lines``
    (``_NAME_TAKEN``; a step's output saying the same is the step's business); else None."""
    for ln in reversed(lines[-20:]):
        m = _NAME_TAKEN.match(ln.strip())
        if m:
            return m.group(1)
    return None


_PIP_RETRY = re.compile(r"Retrying \(Retry\(.*?\)\) after connection broken by '(.+)': (\S+)\s*$")
_PIP_NOT_FOUND = ("Could not find a version", "No matching distribution", "ResolutionImpossible")


def _pip_unreachable(out: list[str]) -> str | None:
    """pip's "no version found" when pip never reached the index (a dead proxy, no
    route): the connection error of its retries is the cause, not the requirement.
    pip prints ``WARNING: Retrying (Retry(total=4, ...)) after connection broken by
    'ProxyError('Cannot connect to proxy.', NewConnectionError('<...object at 0x...>:
    Failed to establish a new connection: [Errno 111] Connection refused'))': /simple/six/``
    before ``ERROR: Could not find a version that satisfies the requirement ...``.
    None when the output shows no such retries."""
    retries = [m for m in map(_PIP_RETRY.search, out) if m]
    if not retries or not any(word in ln for ln in out for word in _PIP_NOT_FOUND):
        return None
    cause = re.sub(r"<[^<>]*object at 0x[0-9a-f]+>: ", "", retries[-1].group(1))
    return (f"pip could not reach the package index ({cause[:200]}; {len(retries)} "
            f"attempt(s) at {retries[-1].group(2)[:80]}); check HTTPS_PROXY/HTTP_PROXY and "
            "the network")


def _pip_hash_mismatch(out: list[str]) -> str | None:
    """pip's report of a file whose hash is not the locked one, as one line naming the
    package and both hashes; None when the output has none. pip prints::

        ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. ...
            numpy==1.26.4 from https://.../numpy-1.26.4-cp311-...whl:
                Expected sha256 0000...
                     Got        666d...
    """
    start = next((i for i, ln in enumerate(out) if "DO NOT MATCH THE HASHES" in ln), None)
    if start is None:
        return None
    name = expected = got = None
    for ln in out[start + 1:start + 12]:
        text = ln.strip()
        if name is None and " from " in text:
            name = text.split(" from ", 1)[0]
        elif text.startswith("Expected sha256 "):
            expected = text.split()[-1]
        elif text.startswith("Got ") and expected:
            got = text.split()[-1]
            break
    if not (name and expected and got):
        return None
    return (f"hash mismatch for {name}: lock sha256:{expected}, downloaded sha256:{got} "
            "(a file that is not the locked one; run `build.py lock --upgrade` only if the "
            "change is expected)")
