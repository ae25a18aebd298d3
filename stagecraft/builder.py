"""Build a plan: bases first, then every stage once, in parallel where independent,
then tags, only on images whose every stage built.

A stage whose key is already in the engine is skipped without calling BuildKit. A failed
stage stops its dependants, not unrelated images. Real tags and aliases are applied last,
so a failure or Ctrl-C never leaves a tag on a half-built image, and the next run resumes
from the stages that finished (their images are named by key).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import cache, retry, schedule
from .basecache import share_base, take_base
from .bases import ensure_base
from .buildlog import BuildLog
from .cabundle import SECRET_ID, CABundle
from .engine import Engine
from .errors import BuildError
from .plan import LABEL_STAGE, Plan, StageNode
from .render import index_dockerfile
from .retry import RetryPolicy
from .scratch import claimed_log
from .tagging import TagJournal, apply_tags

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


# Under the state directory: BuildKit's SLSA provenance of each image, by manifest digest.
PROVENANCE_DIR = "provenance"
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "FTP_PROXY", "ALL_PROXY",
              "http_proxy", "https_proxy", "no_proxy", "ftp_proxy", "all_proxy")


@dataclass
class StageResult:
    """What happened to one stage: ``status`` is ``cached`` (key already built),
    ``built``, ``failed`` or ``skipped`` (a stage below it failed); ``seconds`` of build;
    ``run_executed``/``run_cached``: RUN steps BuildKit ran or took from a cache;
    ``cache``: ``written``, ``not written: <why>`` or "" (no ``--cache-to``); ``platform`` it was built for."""

    key: str
    stage: str
    status: str
    image_id: str = ""
    seconds: float = 0.0
    log: str = ""
    error: str = ""
    run_executed: int = 0
    run_cached: int = 0
    cache: str = ""
    platform: str = ""


@dataclass
class ImageResult:
    """One image: ``status`` ``built`` (tagged) or ``failed`` (no tag moved); ``size``
    in bytes as the engine reports it, ``size_kind`` saying what that is: ``unpacked``
    (the classic image store: the layers as extracted) or ``compressed`` (the containerd
    image store: the content it holds, the layers as pushed); ``seconds`` from start of
    the run. ``platforms`` maps each platform built to ``{"image_id", "size", "key"}``;
    with several, the tag is an OCI image index holding them all."""

    tag: str
    ref: str
    aliases: list[str]
    status: str
    image_id: str = ""
    size: int = 0
    size_kind: str = ""
    seconds: float = 0.0
    built_stages: int = 0
    cached_stages: int = 0
    error: str = ""
    platforms: dict[str, dict] = field(default_factory=dict)


@dataclass
class BuildReport:
    """Every stage and image of a run, its wall time in seconds, and ``warnings``
    (caches not read or not written: the images are built all the same)."""

    stages: dict[str, StageResult] = field(default_factory=dict)
    images: list[ImageResult] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every image was tagged."""
        return all(i.status == "built" for i in self.images)


@dataclass(frozen=True)
class BuildOptions:
    """``repository`` for final tags; ``state_dir`` for logs and contexts; ``jobs``
    stages at once; ``ca_bundle`` given to builds as a secret; ``journal`` records what
    the tag phase did to names (for the message of a run that ends early). The caller has
    checked ``cache_from``/``cache_to`` against the engine (``capabilities.
    check_cache_options``: ``build`` does it before anything else touches the engine)."""

    repository: str
    state_dir: Path
    jobs: int = 1
    ca_bundle: CABundle | None = None
    cache_from: cache.CacheSpec | None = None
    cache_to: cache.CacheSpec | None = None
    journal: TagJournal | None = None


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


def index_parts(plan: Plan, images: list) -> dict[str, str]:
    """Platform -> the local image ref of that platform's final stage, for the images
    (``plan.images`` entries) of one multi-platform tag: what its OCI image index holds."""
    return {i.platform: plan.nodes[i.final_key].image_ref for i in images}


def index_ref(parts: dict[str, str]) -> str:
    """The local name of the OCI image index of ``parts`` (``index_parts``): named by
    its parts, not by the tag (the tag moves with the run's other names), so the same
    parts always give the same name, and a tag is that index exactly when their image
    ids agree."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    return f"stagecraft-stage/index:{digest[:24]}"


def build_plan(engine: Engine, plan: Plan, root: Path, opts: BuildOptions,
               say: Callable[[str], None]) -> BuildReport:
    """Build every node of ``plan`` that is not built yet, then tag the images.

    ``say`` receives progress lines (for stderr). Raises ``InputError``/``BuildError``
    only for problems before any stage (bases), and ``BuildError`` when tagging fails
    (every name put back: ``tagging.apply_tags``); stage failures are in the report.
    """
    start = time.monotonic()
    report = BuildReport()

    def warn(text: str) -> None:
        report.warnings.append(text)
        say(f"warning: {text}")

    cache_from, cache_to = opts.cache_from, opts.cache_to
    if cache_to is not None and cache_to.kind == "local":
        try:
            Path(cache_to.location).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            warn(f"cache not written: cannot make {cache_to.location} ({exc.strerror or exc})")
            cache_to = None
    for base in plan.bases:
        if cache_from is not None and engine.image_id(base.ref) is None:
            why = take_base(engine, base, cache_from, say)
            if why and base.source == "bootstrap":
                say(f"base {base.name}: not taken from the cache ({why}); making it here")
        ensure_base(engine, base, say)
        if cache_to is not None:
            why = share_base(engine, base, cache_to, say)
            if why:
                warn(f"base {base.name} not shared through the cache: {why}")
    logs = opts.state_dir / "logs"
    secrets = {SECRET_ID: opts.ca_bundle.path} if opts.ca_bundle else {}
    build_args = proxy_args()
    # BuildKit's provenance records the build arguments; proxy settings may carry
    # credentials, so a run that passes them keeps no provenance.
    provenance_dir = None if build_args else opts.state_dir / PROVENANCE_DIR
    if build_args and engine.rewrites_timestamps:
        warn(f"no provenance kept: the proxy settings ({', '.join(sorted(build_args))}) would be "
             "recorded in it")
    total = len(plan.nodes)

    def run_node(node: StageNode) -> StageResult:
        found = engine.image_id(node.image_ref)
        if found:
            return StageResult(node.key, node.stage, "cached", found)
        # Another run building this stage now keeps its log; this one writes beside it.
        with claimed_log(logs / f"{node.stage}-{node.key[:12]}.log") as log_path:
            return build_node(node, log_path)

    def build_node(node: StageNode, log_path: Path) -> StageResult:
        t0 = time.monotonic()
        short = node.key[:12]
        cache_args = cache.stage_args(cache_from, cache_to, node.stage, node.key, node.line)
        image_id, progress, cache_args = build_stage(node, log_path, cache_args)
        counts = progress  # what ran is the first complete build's: an export retry runs nothing
        if cache_args and cache_to is not None and progress.cache_export_errors:
            # Exports fail transiently (a registry answering 500 to two uploads of one blob
            # at once, docker/buildx#4057); once more, every step from the engine's cache.
            say(f"  {node.stage}@{short} cache export failed "
                f"({progress.cache_export_errors[0][:120]}); exporting it again")
            retry_log = log_path.with_name(f"{log_path.stem}.export-again.log")
            try:
                image_id, progress, cache_args = build_stage(node, retry_log, cache_args)
            except BuildError as exc:  # the first build's image stands; its cache is not written
                warn(f"{node.stage}@{short}: exporting the cache again failed ({str(exc)[:160]})")
        engine.tag(image_id, node.image_ref)
        for failure in counts.cache_import_errors:
            warn(f"{node.stage}@{short}: cache not read from {failure[:200]}")
        state = ""
        if cache_to is not None and node.line:
            failures = progress.cache_export_errors if cache_args else ["the build ran without its cache"]
            state = f"not written: {failures[0][:300]}" if failures else "written"
            if failures:
                warn(f"{node.stage}@{short}: cache {state}")
            elif cache_to.kind == "local":
                try:
                    _link_line(cache_to, node)
                except OSError as exc:
                    warn(f"{node.stage}@{short}: cache line not linked ({exc})")
        return StageResult(node.key, node.stage, "built", image_id, time.monotonic() - t0,
                           str(log_path), run_executed=counts.run_executed,
                           run_cached=counts.run_cached, cache=state)

    def build_stage(node: StageNode, log_path: Path,
                    cache_args: tuple[str, ...]) -> tuple[str, BuildLog, tuple[str, ...]]:
        """One stage built, engine errors tried again: ``(image id, its progress, the
        cache arguments it ran with)``, those ``()`` when the build failed with its cache
        and was run again without. Raises ``BuildError``."""
        try:
            return (*build_tried(node, log_path, cache_args), cache_args)
        except CacheCostBuild as exc:  # a cache must never cost the image
            warn(f"{node.stage}@{node.key[:12]}: the build failed with its cache ({exc.failure[:160]}); "
                 "building it again without")
            return (*build_tried(node, log_path, ()), ())

    def build_tried(node: StageNode, log_path: Path,
                    cache_args: tuple[str, ...]) -> tuple[str, BuildLog]:
        """``(image id, progress)`` of the stage, transient engine errors tried again up
        to ``TRANSIENT_TRIES`` builds in all (``retry.call``). Raises ``CacheCostBuild``
        when a build with cache arguments failed and its cache did, else ``BuildError``."""
        short = node.key[:12]

        def once() -> tuple[str, BuildLog]:
            progress = BuildLog()
            try:
                return build_node_image(
                    engine, node, root, log_path, secrets, build_args,
                    [*cache_args, "-t", node.image_ref], progress,
                    on_step=lambda s: say(f"  {node.stage}@{short} {s[:110]}"),
                    provenance_dir=provenance_dir), progress
            except BuildError as exc:
                failed_cache = progress.cache_export_errors + progress.cache_import_errors
                if cache_args and failed_cache:
                    raise CacheCostBuild(str(exc), failed_cache[0]) from exc
                raise

        def said(exc: BaseException, attempt: int, _delay: float) -> None:
            say(f"  {node.stage}@{short} engine error, trying again ({attempt}/{TRANSIENT_TRIES}): "
                f"{str(exc)[:120]}")

        return retry.call(once, ENGINE_RETRY, transient_engine_error, said)[0]

    def started(key: str, number: int) -> None:
        node = plan.nodes[key]
        say(f"[{number}/{total}] {node.stage}@{key[:12]} for {', '.join(node.tags)}")

    def ended(key: str, outcome: schedule.Outcome) -> None:
        node = plan.nodes[key]
        if outcome.status == "blocked":
            report.stages[key] = StageResult(key, node.stage, "skipped",
                                             error=f"{plan.nodes[outcome.blocked_by].stage} failed")
            return
        result = outcome.result
        if outcome.status == "failed":
            result = StageResult(key, node.stage, "failed", error=str(outcome.error),
                                 log=str(logs / f"{node.stage}-{key[:12]}.log"))
            say(f"  {node.stage}@{key[:12]} FAILED: {outcome.error}")
        report.stages[key] = result
        if result.status == "built":
            say(f"  {node.stage}@{key[:12]} built in {result.seconds:.1f} s")
        elif result.status == "cached":
            say(f"  {node.stage}@{key[:12]} already built")

    parents = {key: (node.parent_key,) if node.parent_key else () for key, node in plan.nodes.items()}
    orphans = [key for key, ps in parents.items() if any(p not in plan.nodes for p in ps)]
    if orphans:  # cannot happen with a plan from plan.py
        raise BuildError(f"stages wait on parents not in the plan: {orphans}")
    # Ctrl-C or SIGTERM (a KeyboardInterrupt here): stop the builds in flight, name nothing.
    schedule.run(parents, lambda key: run_node(plan.nodes[key]), opts.jobs, failures=(BuildError,),
                 on_start=started, on_end=ended, stop=engine.stop_builds)
    for key, result in report.stages.items():
        result.platform = plan.nodes[key].base.platform
    by_tag: dict[str, list] = {}
    moves: list[tuple[str, str]] = []
    for img in plan.images:
        by_tag.setdefault(img.spec.tag, []).append(img)
    for tag, imgs in by_tag.items():
        spec = imgs[0].spec
        results = [report.stages[k] for img in imgs for k in img.keys]
        ref = f"{opts.repository}:{tag}"
        res = ImageResult(tag=tag, ref=ref, aliases=list(spec.aliases),
                          status="failed", seconds=time.monotonic() - start,
                          built_stages=sum(r.status == "built" for r in results),
                          cached_stages=sum(r.status == "cached" for r in results))
        bad = next((r for r in results if r.status in ("failed", "skipped")), None)
        if bad:
            res.error = bad.error if bad.status == "failed" else f"stage {bad.stage}: {bad.error}"
            report.images.append(res)
            continue
        for img in imgs:
            final = report.stages[img.final_key]
            res.platforms[img.platform] = {"image_id": final.image_id, "key": img.final_key,
                                           "size": int(engine.inspect(final.image_id).get("Size", 0))}
        try:
            if len(imgs) == 1:
                image_id = report.stages[imgs[0].final_key].image_id
            else:
                say(f"{tag}: OCI image index of {', '.join(i.platform for i in imgs)}")
                parts = index_parts(plan, imgs)
                image_id = engine.assemble_index(index_ref(parts), index_dockerfile(parts),
                                                 parts, logs / f"index-{tag}.log")
        except BuildError as exc:
            res.error = str(exc)
            say(f"  {tag} FAILED: {exc}")
            report.images.append(res)
            continue
        moves += [(f"{opts.repository}:{name}", image_id) for name in spec.names]
        res.status, res.image_id = "built", image_id
        res.size = sum(p["size"] for p in res.platforms.values())
        res.size_kind = "compressed" if engine.containerd_store else "unpacked"
        report.images.append(res)
    # Every name of the run at once, or none (signals held, names put back on failure).
    apply_tags(engine, moves, opts.journal or TagJournal(),
               sum(i.status == "built" for i in report.images), say)
    report.seconds = time.monotonic() - start
    return report
