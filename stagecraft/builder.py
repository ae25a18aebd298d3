"""Build a plan: bases first, then every stage once, in parallel where independent,
then tags, only on images whose every stage built.

A stage whose key is already in the engine is skipped without calling BuildKit. A failed
stage stops its dependants, not unrelated images. Real tags and aliases are applied last,
so a failure or Ctrl-C never leaves a tag on a half-built image, and the next run resumes
from the stages that finished (their images are named by key). The stages themselves:
``stagebuild``; what the run did: ``buildreport``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import cache, runlocks, tagrecovery
from .basecache import share_base, take_base
from .bases import BaseImage, ensure_base
from .buildreport import BuildReport, ImageResult
from .cabundle import SECRET_ID, CABundle
from .engine import Engine
from .errors import BuildError, NameTaken
from .plan import Plan
from .render import index_dockerfile
from .stagebuild import StageRun, proxy_args
from .tagging import TagJournal, apply_tags

# Under the state directory: BuildKit's SLSA provenance of each image, by manifest digest.
PROVENANCE_DIR = "provenance"
# The locks bootstrapped bases are made under (runlocks.py), one per engine and base for
# the whole host (two checkouts or state directories share an engine): /run/lock is the
# FHS place for lock files, and bootstrapping needs root.
BASE_LOCKS = Path("/run/lock/stagecraft")


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
    before_tags: Callable[[BuildReport], dict[str, bool]] | None = None


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

    engine_key = engine.identity()
    if opts.state_dir.is_dir():  # a run that died inside its tag phase: its names first
        tagrecovery.recover_now(engine, opts.state_dir, engine_key, say)
    cache_to = _usable_cache_to(opts, warn)
    _ensure_bases(engine, plan, opts.cache_from, cache_to, say, warn, (BASE_LOCKS, engine_key))
    build_args = proxy_args()
    # BuildKit's provenance records the build arguments; proxy settings may carry
    # credentials, so a run that passes them keeps no provenance.
    provenance_dir = None if build_args else opts.state_dir / PROVENANCE_DIR
    if build_args and engine.rewrites_timestamps:
        warn(f"no provenance kept: the proxy settings ({', '.join(sorted(build_args))}) would be "
             "recorded in it")
    stages = StageRun(engine, plan, root, logs=opts.state_dir / "logs",
                      secrets={SECRET_ID: opts.ca_bundle.path} if opts.ca_bundle else {},
                      build_args=build_args, provenance_dir=provenance_dir,
                      cache_from=opts.cache_from, cache_to=cache_to, say=say, warn=warn)
    report.stages = stages.results
    stages.run(opts.jobs)
    moves: list[tuple[str, str]] = []
    by_tag: dict[str, list] = {}
    for img in plan.images:
        by_tag.setdefault(img.spec.tag, []).append(img)
    for tag, imgs in by_tag.items():
        report.images.append(_image_result(engine, plan, report, tag, imgs, opts, start, say)[0])
    # With --test the suites run on the built images before any name moves: a name
    # points at its old image or at a new one whose tests passed (issue 24).
    verdicts = opts.before_tags(report) if opts.before_tags else {}
    for res in report.images:
        if res.status == "built" and verdicts.get(res.tag, True):
            res.tagged = True
            moves += [(f"{opts.repository}:{name}", res.image_id) for name in [res.tag, *res.aliases]]
    # Every name of the run at once, or none (signals held, names put back on failure),
    # recorded in the state directory first so that a killed run's names are put back.
    apply_tags(engine, moves, opts.journal or TagJournal(),
               sum(i.tagged for i in report.images), say, (opts.state_dir, engine_key))
    report.seconds = time.monotonic() - start
    return report


@contextmanager
def _base_lock(base: BaseImage, locks: tuple[Path, str] | None, say: Callable[[str], None]) -> Iterator[None]:
    """The lock a bootstrapped ``base`` is made under (``_ensure_bases``), or none: a
    pulled base (the same digest gives the same image), no ``locks``, or a lock file that
    cannot be made."""
    with ExitStack() as stack:
        if base.source == "bootstrap" and locks is not None:
            path = runlocks.lock_path(locks[0], locks[1], base.ref)
            try:
                stack.enter_context(runlocks.held(path, f"another run to make or find base {base.name}", say))
            except OSError as exc:
                say(f"base {base.name}: no lock against another run making it at the same time "
                    f"({path}: {exc.strerror or exc}); going on without")
        yield


def _usable_cache_to(opts: BuildOptions, warn: Callable[[str], None]) -> cache.CacheSpec | None:
    """``opts.cache_to``, or None when a local cache directory cannot be made (warned).
    The caller has checked it against the engine (see ``BuildOptions``)."""
    cache_to = opts.cache_to
    if cache_to is not None and cache_to.kind == "local":
        try:
            Path(cache_to.location).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            warn(f"cache not written: cannot make {cache_to.location} ({exc.strerror or exc})")
            cache_to = None
    return cache_to


def _ensure_bases(engine: Engine, plan: Plan, cache_from: cache.CacheSpec | None,
                  cache_to: cache.CacheSpec | None, say: Callable[[str], None],
                  warn: Callable[[str], None], locks: tuple[Path, str] | None = None) -> None:
    """Every base of ``plan`` in the engine: taken from ``cache_from`` where it is not
    there yet, else pulled or made (``ensure_base``), then shared through ``cache_to``.
    ``locks`` (a folder, the engine's identity): a bootstrapped base is looked for and
    made under a lock of that folder (runlocks.py), so that a second run on the engine
    from this host waits for the first one's bootstrap and reuses it; where the lock
    file cannot be made (not root, a read-only /run), the base is made without it, and
    the run says so.
    Raises ``InputError``/``BuildError`` from ``ensure_base``."""
    for base in plan.bases:
        with _base_lock(base, locks, say):
            if cache_from is not None and engine.image_id(base.ref) is None:
                why = take_base(engine, base, cache_from, say)
                if why and base.source == "bootstrap":
                    say(f"base {base.name}: not taken from the cache ({why}); making it here")
            ensure_base(engine, base, say)
        if cache_to is not None:
            why = share_base(engine, base, cache_to, say)
            if why:
                warn(f"base {base.name} not shared through the cache: {why}")


def _image_result(engine: Engine, plan: Plan, report: BuildReport, tag: str, imgs: list,
                  opts: BuildOptions, start: float, say: Callable[[str], None]
                  ) -> tuple[ImageResult, str]:
    """The result of ``tag`` (its ``plan.images`` entries ``imgs``, one per platform) and
    the image id its names are to move to: ``failed`` when a stage of it did not build
    or its OCI image index could not be assembled, else ``built``, sized."""
    spec = imgs[0].spec
    results = [report.stages[k] for img in imgs for k in img.keys]
    res = ImageResult(tag=tag, ref=f"{opts.repository}:{tag}", aliases=list(spec.aliases),
                      status="failed", seconds=time.monotonic() - start,
                      built_stages=sum(r.status == "built" for r in results),
                      cached_stages=sum(r.status == "cached" for r in results))
    bad = next((r for r in results if r.status in ("failed", "skipped")), None)
    if bad:
        res.error = bad.error if bad.status == "failed" else f"stage {bad.stage}: {bad.error}"
        return res, ""
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
            ref = index_ref(parts)
            try:
                image_id = engine.assemble_index(ref, index_dockerfile(parts), parts,
                                                 opts.state_dir / "logs" / f"index-{tag}.log")
            except NameTaken as exc:  # another run assembled the same parts at the same time
                image_id = engine.image_id(ref) if exc.ref == ref else None
                if image_id is None:
                    raise
                say(f"  {tag}: another run assembling the same index named it first; using that index")
    except BuildError as exc:
        res.error = str(exc)
        say(f"  {tag} FAILED: {exc}")
        return res, ""
    res.status, res.image_id = "built", image_id
    res.size = sum(p["size"] for p in res.platforms.values())
    res.size_kind = "compressed" if engine.containerd_store else "unpacked"
    return res, image_id
