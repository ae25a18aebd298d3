"""Building the stages of a plan (``builder.build_plan``): each stage once, in a fresh
context, skipped when its key is already in the engine, engine transport errors tried
again, a build that failed with its cache run again without it, a failed cache export
tried once more, and the result of each in a ``StageResult``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from . import cache, retry, schedule
from .buildlog import BuildLog
from .buildreport import StageResult
from .engine import Engine
from .errors import BuildError, NameTaken
from .plan import LABEL_STAGE, Plan, StageNode
from .retry import RetryPolicy
from .scratch import claimed_log

# Engine-side transport failures that say nothing about the Dockerfile; BuildKit reports
# them under load (moby/buildkit#4305, docker/buildx#2064). Such a build is tried again.
TRANSIENT_RE = re.compile(r"rpc error: code = (Internal|Unavailable) desc = .*(EOF|transport)")
TRANSIENT_TRIES = 3
ENGINE_RETRY = RetryPolicy(attempts=TRANSIENT_TRIES, base_s=0)  # builds again at once


class CacheCostBuild(BuildError):
    """A stage build that ran with cache arguments failed, and so did its cache import
    or export (``failure``: the first such line); the builder runs it again without."""

    def __init__(self, message: str, failure: str):
        super().__init__(message)
        self.failure = failure


def transient_engine_error(exc: BaseException) -> bool:
    """Whether a failed build is worth running again: a ``BuildError`` (not one that
    the cache cost) whose text is BuildKit's gRPC transport error (``TRANSIENT_RE``)."""
    return (isinstance(exc, BuildError) and not isinstance(exc, CacheCostBuild)
            and bool(TRANSIENT_RE.search(str(exc))))


PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "FTP_PROXY", "ALL_PROXY",
              "http_proxy", "https_proxy", "no_proxy", "ftp_proxy", "all_proxy")


def proxy_args() -> dict[str, str]:
    """Docker's predefined proxy build arguments set in this environment (they stay out
    of the image history)."""
    return {k: os.environ[k] for k in PROXY_ARGS if os.environ.get(k)}


def _stage_context(node: StageNode, root: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for f in node.files:
        dst = into / f.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f.path, dst)
        os.chmod(dst, f.mode)
    (into / "Dockerfile").write_text(node.dockerfile)
    return into


def build_node_image(engine: Engine, node: StageNode, root: Path, log_path: Path,
                     secrets: dict[str, Path], build_args: dict[str, str],
                     extra_args: list[str] | tuple[str, ...] = (), progress: BuildLog | None = None,
                     on_step: Callable[[str], None] | None = None,
                     provenance_dir: Path | None = None) -> str:
    """One BuildKit build of ``node`` in a fresh context (its Dockerfile and the files it
    copies from ``root``), for its base's platform, with its base's SOURCE_DATE_EPOCH;
    returns the image id. A label stage (an image's last) keeps BuildKit's provenance in
    ``provenance_dir`` where the engine makes it (``Engine.build``). Raises ``BuildError``."""
    with tempfile.TemporaryDirectory(prefix="stagecraft-ctx-") as tmp:
        ctx = _stage_context(node, root, Path(tmp) / "context")
        platform_args = ["--platform", node.base.platform] if node.base.foreign else []
        return engine.build(ctx / "Dockerfile", ctx, log_path, Path(tmp) / "iid", secrets,
                            on_step=on_step, build_args=build_args,
                            extra_args=[*platform_args, *extra_args], progress=progress,
                            source_date_epoch=node.base.source_date_epoch,
                            provenance_dir=provenance_dir if node.stage == LABEL_STAGE else None)


def _link_line(spec: cache.CacheSpec, node: StageNode) -> None:
    """Point the stage's line scope (a symbolic link) at the key's local cache, which
    was just written: the next key of this line imports it."""
    line = Path(spec.line_scope(node.stage, node.line))
    target = Path(spec.scope(node.stage, node.key))
    tmp = line.with_name(line.name + ".new")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target.name)
    tmp.replace(line)


class StageRun:
    """The stage builds of one run, with what they share: the ``engine``, the ``plan``
    and its files under ``root``, the caches (``cache_from``/``cache_to``, ``None`` for
    none), ``secrets`` (id -> file), ``build_args``, where logs go (``logs``) and
    provenance (``provenance_dir``, None: none kept). ``say`` gets progress lines,
    ``warn`` the warnings of the report. ``results``: key -> ``StageResult``, filled by
    ``run``."""

    def __init__(self, engine: Engine, plan: Plan, root: Path, *, logs: Path,
                 secrets: dict[str, Path], build_args: dict[str, str],
                 provenance_dir: Path | None, cache_from: cache.CacheSpec | None,
                 cache_to: cache.CacheSpec | None, say: Callable[[str], None],
                 warn: Callable[[str], None]):
        self.engine, self.plan, self.root, self.logs = engine, plan, root, logs
        self.secrets, self.build_args, self.provenance_dir = secrets, build_args, provenance_dir
        self.cache_from, self.cache_to = cache_from, cache_to
        self.say, self.warn = say, warn
        self.results: dict[str, StageResult] = {}

    def run(self, jobs: int) -> dict[str, StageResult]:
        """Build every stage not built yet, ``jobs`` at once, parents first; a failed
        stage stops its dependants. Ctrl-C or SIGTERM (a KeyboardInterrupt here) stops
        the builds in flight. Returns ``results``, each with its platform."""
        plan = self.plan
        parents = {key: (node.parent_key,) if node.parent_key else () for key, node in plan.nodes.items()}
        orphans = [key for key, ps in parents.items() if any(p not in plan.nodes for p in ps)]
        if orphans:  # cannot happen with a plan from plan.py
            raise BuildError(f"stages wait on parents not in the plan: {orphans}")
        schedule.run(parents, lambda key: self.run_node(plan.nodes[key]), jobs,
                     failures=(BuildError,), on_start=self._started, on_end=self._ended,
                     stop=self.engine.stop_builds)
        for key, result in self.results.items():
            result.platform = plan.nodes[key].base.platform
        return self.results

    def run_node(self, node: StageNode) -> StageResult:
        """``node``'s result: ``cached`` when its key is in the engine, else built; also
        ``cached`` when the engine would not name this build's image because another run
        building the same key named it first (``NameTaken``: with the containerd image
        store two exports of one name at once both create it). Raises ``BuildError``."""
        found = self.engine.image_id(node.image_ref)
        if found:
            return StageResult(node.key, node.stage, "cached", found)
        # Another run building this stage now keeps its log; this one writes beside it.
        with claimed_log(self.logs / f"{node.stage}-{node.key[:12]}.log") as log_path:
            try:
                return self.build_node(node, log_path)
            except NameTaken as exc:
                taken = self.engine.image_id(node.image_ref) if exc.ref == node.image_ref else None
                if taken is None:
                    raise
                self.say(f"  {node.stage}@{node.key[:12]}: another run building it at the same time named "
                         "it first; using that image")
                return StageResult(node.key, node.stage, "cached", taken)

    def build_node(self, node: StageNode, log_path: Path) -> StageResult:
        """Build ``node`` (its cache export tried once more when it failed), name the
        image by its key, and say what became of its caches. Raises ``BuildError``."""
        t0 = time.monotonic()
        short = node.key[:12]
        cache_args = cache.stage_args(self.cache_from, self.cache_to, node.stage, node.key, node.line)
        image_id, progress, cache_args = self.build_stage(node, log_path, cache_args)
        counts = progress  # what ran is the first complete build's: an export retry runs nothing
        if cache_args and self.cache_to is not None and progress.cache_export_errors:
            # Exports fail transiently (a registry answering 500 to two uploads of one blob
            # at once, docker/buildx#4057); once more, every step from the engine's cache.
            self.say(f"  {node.stage}@{short} cache export failed "
                     f"({progress.cache_export_errors[0][:120]}); exporting it again")
            retry_log = log_path.with_name(f"{log_path.stem}.export-again.log")
            try:
                image_id, progress, cache_args = self.build_stage(node, retry_log, cache_args)
            except BuildError as exc:  # the first build's image stands; its cache is not written
                self.warn(f"{node.stage}@{short}: exporting the cache again failed ({str(exc)[:160]})")
        self.engine.tag(image_id, node.image_ref)
        for failure in counts.cache_import_errors:
            self.warn(f"{node.stage}@{short}: cache not read from {failure[:200]}")
        state = self._cache_state(node, progress, cache_args)
        return StageResult(node.key, node.stage, "built", image_id, time.monotonic() - t0,
                           str(log_path), run_executed=counts.run_executed,
                           run_cached=counts.run_cached, cache=state)

    def _cache_state(self, node: StageNode, progress: BuildLog, cache_args: tuple[str, ...]) -> str:
        """``written``, ``not written: <why>`` or "" (no ``--cache-to``, or a stage of no
        line); a local cache written is linked as its line's latest."""
        if self.cache_to is None or not node.line:
            return ""
        short = node.key[:12]
        failures = progress.cache_export_errors if cache_args else ["the build ran without its cache"]
        state = f"not written: {failures[0][:300]}" if failures else "written"
        if failures:
            self.warn(f"{node.stage}@{short}: cache {state}")
        elif self.cache_to.kind == "local":
            try:
                _link_line(self.cache_to, node)
            except OSError as exc:
                self.warn(f"{node.stage}@{short}: cache line not linked ({exc})")
        return state

    def build_stage(self, node: StageNode, log_path: Path,
                    cache_args: tuple[str, ...]) -> tuple[str, BuildLog, tuple[str, ...]]:
        """One stage built, engine errors tried again: ``(image id, its progress, the
        cache arguments it ran with)``, those ``()`` when the build failed with its cache
        and was run again without. Raises ``BuildError``."""
        try:
            return (*self.build_tried(node, log_path, cache_args), cache_args)
        except CacheCostBuild as exc:  # a cache must never cost the image
            self.warn(f"{node.stage}@{node.key[:12]}: the build failed with its cache ({exc.failure[:160]}); "
                      "building it again without")
            return (*self.build_tried(node, log_path, ()), ())

    def build_tried(self, node: StageNode, log_path: Path,
                    cache_args: tuple[str, ...]) -> tuple[str, BuildLog]:
        """``(image id, progress)`` of the stage, transient engine errors tried again up
        to ``TRANSIENT_TRIES`` builds in all (``retry.call``). Raises ``CacheCostBuild``
        when a build with cache arguments failed and its cache did, else ``BuildError``."""
        short = node.key[:12]

        def once() -> tuple[str, BuildLog]:
            progress = BuildLog()
            try:
                return build_node_image(
                    self.engine, node, self.root, log_path, self.secrets, self.build_args,
                    [*cache_args, "-t", node.image_ref], progress,
                    on_step=lambda s: self.say(f"  {node.stage}@{short} {s[:110]}"),
                    provenance_dir=self.provenance_dir), progress
            except BuildError as exc:
                failed_cache = progress.cache_export_errors + progress.cache_import_errors
                if cache_args and failed_cache:
                    raise CacheCostBuild(str(exc), failed_cache[0]) from exc
                raise

        def said(exc: BaseException, attempt: int, _delay: float) -> None:
            self.say(f"  {node.stage}@{short} engine error, trying again ({attempt}/{TRANSIENT_TRIES}): "
                     f"{str(exc)[:120]}")

        return retry.call(once, ENGINE_RETRY, transient_engine_error, said)[0]

    def _started(self, key: str, number: int) -> None:
        node = self.plan.nodes[key]
        self.say(f"[{number}/{len(self.plan.nodes)}] {node.stage}@{key[:12]} for {', '.join(node.tags)}")

    def _ended(self, key: str, outcome: schedule.Outcome) -> None:
        node = self.plan.nodes[key]
        if outcome.status == "blocked":
            self.results[key] = StageResult(key, node.stage, "skipped",
                                            error=f"{self.plan.nodes[outcome.blocked_by].stage} failed")
            return
        result = outcome.result
        if outcome.status == "failed":
            result = StageResult(key, node.stage, "failed", error=str(outcome.error),
                                 log=str(self.logs / f"{node.stage}-{key[:12]}.log"))
            self.say(f"  {node.stage}@{key[:12]} FAILED: {outcome.error}")
        self.results[key] = result
        if result.status == "built":
            self.say(f"  {node.stage}@{key[:12]} built in {result.seconds:.1f} s")
        elif result.status == "cached":
            self.say(f"  {node.stage}@{key[:12]} already built")
