"""``build``: check the input, plan, build, then (``--test``, ``--push``) test and push
what built, and end with a summary. Also ``build --stage`` (chains up to one stage) and
the summary table every build prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import cache, sourceinfo
from ..builder import BuildOptions, BuildReport, build_plan
from ..cabundle import CABundle, find_ca_bundle
from ..capabilities import check_cache_options
from ..errors import EXIT_FAILED, EXIT_OK, BuildError, InputError
from ..expand import ImageSpec
from ..plan import Plan, up_to_stage
from ..preflight import missing_wheels, unreachable, wheel_pins
from ..publish import resolve_registry
from ..reproduce import verify_plan
from ..safetext import cut_middle, one_line
from ..summary import summary_notes
from ..testing import check_tools
from . import pushrun, testrun, views
from .context import RunContext
from .output import emit_json, human_size, say
from .planning import choose_platforms, fit_engine, plan_for


@dataclass(frozen=True)
class BuildInput:
    """What ``build`` checked before any work: the ``chosen`` images, the CA ``bundle``
    for pip (None: none), the parsed ``--cache-from``/``--cache-to``, and whether the
    suites run after the build (``--test``, or ``--push``, which pushes only what passed)."""

    chosen: list[ImageSpec]
    bundle: CABundle | None
    cache_from: cache.CacheSpec | None
    cache_to: cache.CacheSpec | None
    test: bool


def build(ctx: RunContext) -> int:
    """``build``: exit 0 when every chosen image built (and passed its tests and was
    pushed, with ``--test``/``--push``), 1 when one failed. Raises ``InputError`` for bad
    input before anything is built, ``BuildError`` when nothing is left to build."""
    ctx.load()
    if ctx.opts.list:
        return views.list_tags(ctx)
    given = check_input(ctx)
    if ctx.opts.dry_run:
        return views.show_plan(ctx, given.chosen)
    if ctx.opts.stage:
        return build_stages(ctx, given.chosen, given.bundle)
    chosen, skipped, plan = prepare(ctx, given)
    engine = ctx.engine
    say(f"stagecraft: {len(chosen)} image(s), {len(plan.nodes)} stage(s); BuildKit via "
        f"{engine.builder.describe()}; CA bundle: "
        f"{f'{given.bundle.path} ({given.bundle.origin})' if given.bundle else 'none'}")
    tests: dict[str, Any] = {}

    def suites(built: BuildReport) -> dict[str, bool]:  # before any name moves
        tests.update(testrun.suites_after_build(ctx, built, chosen))
        return {tag: t.passed for tag, t in tests.items()}

    report = build_plan(engine, plan, ctx.matrix.root,
                        BuildOptions(ctx.repository, ctx.state_dir(), ctx.opts.jobs, given.bundle,
                                     given.cache_from, given.cache_to, ctx.journal,
                                     suites if given.test else None), say)
    ok = report.ok and all(t.passed for t in tests.values())
    ok = ok and (ctx.opts.skip_unreachable or not skipped)
    extra: dict[str, Any] = {"skipped": skipped} if skipped else {}
    if ctx.opts.push:
        extra["push"] = None
        if ok:
            run = pushrun.push(ctx, chosen)
            extra["push"], ok = run.to_json(), run.ok
        else:
            say("not pushed: a build or its tests failed; nothing was moved")
            ok = False
    summary(report, tests, ctx.opts.json, extra or None)
    if skipped and not ctx.opts.skip_unreachable:
        say(f"{len(skipped)} image(s) not built here (unreachable index); --skip-unreachable "
            "makes that a success")
    line = "" if ok else failure_line(report, tests, extra.get("push"))
    if line:  # the last line: the first cause
        say(line)
    return EXIT_OK if ok else EXIT_FAILED


def failure_line(report: BuildReport, tests: dict[str, Any], push: dict[str, Any] | None) -> str:
    """The last line of a build that failed: the first cause, and what the names are;
    "" when the only cause is images skipped for an unreachable index (said already)."""
    names = "no name of it was moved"
    for i in report.images:
        if i.status != "built":
            return f"failed: {i.tag}: {one_line(cut_middle(i.error, 300))}; {names}"  # the last line: one
    for tag, t in tests.items():
        if not t.passed:
            return f"failed: the suites of {tag} did not pass ({t.counts}); {names}"
    if push is not None:
        return f"failed: {push_cause(push)}; run push again to resume"
    return ""  # only images skipped for an unreachable index: said above


def push_cause(push: dict[str, Any]) -> str:
    """The first cause of a push run that did not finish, from its manifest
    (``RunManifest.to_json``): the run's own error (signing, an interrupted run), else
    the first reference, tag before alias, that failed, with its error."""
    if push.get("error"):
        return cut_middle(str(push["error"]))
    for img in push.get("images") or []:
        for ref in [img.get("push") or {}, *(img.get("aliases") or [])]:
            if ref.get("status") != "pushed" and ref.get("error"):
                return f"{ref.get('ref', '?')}: {cut_middle(str(ref['error']))}"
    return "the push did not finish (above: which reference and why)"


def check_input(ctx: RunContext) -> BuildInput:
    """Every check ``build`` makes before it plans: the choice, ``--jobs``,
    SOURCE_DATE_EPOCH, the state directory, the CA bundle, the cache options (against
    the engine), the registry of ``--push`` and the tools the suites need. Raises
    ``InputError``; creates nothing."""
    opts = ctx.opts
    chosen = ctx.select(default_all=False)
    if opts.jobs < 1:
        raise InputError.one(f"--jobs {opts.jobs}", "must be at least 1", "pass --jobs 1 or more")
    sourceinfo.created(ctx.matrix.root)  # a malformed SOURCE_DATE_EPOCH stops here, before any work
    if not opts.dry_run:  # checked now; made once every check has passed
        ctx.state_dir(create=False)
    bundle = find_ca_bundle(opts.ca_bundle, opts.no_ca_bundle)
    cache_from = cache.parse(opts.cache_from, "--cache-from") if opts.cache_from else None
    cache_to = cache.parse(opts.cache_to, "--cache-to") if opts.cache_to else None
    if opts.push:  # pushes only what passed its tests: check the registry before building
        resolve_registry(opts.registry, ctx.matrix.registry)
    if cache_from or cache_to:  # what this engine cannot do is bad input: exit 2 at once
        check_cache_options(ctx.engine.facts(), opts.cache_from, opts.cache_to)
    test = opts.test or opts.push
    if test and not opts.dry_run:  # the tools the suites run on, before building
        check_tools()
    return BuildInput(chosen, bundle, cache_from, cache_to, test)


def prepare(ctx: RunContext, given: BuildInput) -> tuple[list[ImageSpec], dict[str, str], Plan]:
    """The images left to build (those whose package index this host reaches), the
    skipped ones (tag -> why) and the plan, its NVIDIA wheel pins checked. Raises
    ``InputError`` (platforms, wheels) or ``BuildError`` (nothing left)."""
    wanted = choose_platforms(ctx, given.chosen)  # --platform against the tags, before the network
    skipped = unreachable(given.chosen, given.bundle)
    for tag, why in skipped.items():
        say(f"{'skipping' if ctx.opts.skip_unreachable else 'cannot build'} {tag}: {why}")
    chosen = [s for s in given.chosen if s.tag not in skipped]
    if not chosen:
        raise BuildError("nothing left to build on this host (see above)")
    wanted = {tag: ps for tag, ps in wanted.items() if tag not in skipped}
    wanted = fit_engine(ctx.engine, wanted, bool(ctx.opts.platform))
    plan = plan_for(ctx, chosen, wanted)
    check_wheels(ctx, plan, given.bundle)
    return [s for s in chosen if s.tag in wanted], skipped, plan


def build_stages(ctx: RunContext, chosen: list[ImageSpec], bundle: CABundle | None) -> int:
    """``build --stage STAGE``: the chosen tags' chains up to STAGE, no tag moved; stage
    images on stdout (``--json``: the build report)."""
    wanted = choose_platforms(ctx, chosen)
    plan = up_to_stage(plan_for(ctx, chosen, wanted), ctx.opts.stage or "")  # the input first
    fit_engine(ctx.engine, wanted, bool(ctx.opts.platform), whole_images=False)  # emulation
    check_wheels(ctx, plan, bundle, stages_of=chosen)
    say(f"stagecraft: {len(plan.nodes)} stage(s) up to {ctx.opts.stage} for "
        f"{', '.join(s.tag for s in chosen)}")
    report = build_plan(ctx.engine, plan, ctx.matrix.root,
                        BuildOptions(ctx.repository, ctx.state_dir(), ctx.opts.jobs, bundle), say)
    ok = all(s.status in ("built", "cached") for s in report.stages.values())
    if ctx.opts.json:
        emit_json({"seconds": round(report.seconds, 1), "stages": [
            {**asdict(s), "image": plan.nodes[s.key].image_ref} for s in report.stages.values()]})
    else:
        for key, node in plan.nodes.items():
            if report.stages[key].status in ("built", "cached"):
                print(node.image_ref)
    return EXIT_OK if ok else EXIT_FAILED


def check_wheels(ctx: RunContext, plan: Plan, bundle: CABundle | None,
                 stages_of: list[ImageSpec] | None = None) -> None:
    """Every NVIDIA wheel pin of a stage still to build exists on PyPI; raises
    ``InputError`` naming each one that does not (see ``preflight``)."""
    engine = ctx.engine
    if stages_of is not None:  # a plan without images (--stage): its nodes, for each spec
        todo = [(spec, node.stage) for spec in stages_of for node in plan.nodes.values()
                if spec.tag in node.tags and engine.image_id(node.image_ref) is None]
    else:
        todo = [(img.spec, img.spec.chain[i]) for img in plan.images
                for i, key in enumerate(img.keys[:len(img.spec.chain)])
                if engine.image_id(plan.nodes[key].image_ref) is None]
    pins = wheel_pins(ctx.matrix, todo)
    if not pins:
        return
    problems, notes = missing_wheels(ctx.matrix, pins, bundle)
    for note in notes:
        say(note)
    if problems:
        raise InputError(problems)


def summary(report: BuildReport, tests: dict[str, Any], as_json: bool,
            extra: dict[str, Any] | None = None) -> None:
    """The build's summary: ``--json`` the report on stdout; always a table on stderr
    (tag, image id, size in GB/MB, stages built/cached, seconds); without ``--json`` each
    built tag and alias as ``repo:name`` on stdout."""
    if as_json:
        emit_json({"seconds": round(report.seconds, 1),
                   "images": [{**asdict(i), **({"test": asdict(tests[i.tag])} if i.tag in tests else {})}
                              for i in report.images],
                   "stages": [asdict(s) for s in report.stages.values()],
                   "warnings": list(report.warnings), **(extra or {})})
    built = sum(s.status == "built" for s in report.stages.values())
    cached = sum(s.status == "cached" for s in report.stages.values())
    kinds = {i.size_kind for i in report.images if i.status == "built"}
    size_head = "size*" if kinds else "size"
    say(f"\n{'tag':<32} {'image id':<19} {size_head:>9} {'stages':>14} {'time':>8}")
    for i in report.images:
        stages = f"{i.built_stages} built/{i.cached_stages} cached"
        if i.status == "built":
            t = tests.get(i.tag)
            note = "" if t is None else ("  tests passed" if t.passed else "  TESTS FAILED, not tagged")
            say(f"{i.tag:<32} {i.image_id[7:19]:<19} {human_size(i.size):>9} {stages:>14} "
                f"{i.seconds:>7.1f}s{note}")
        else:
            say(f"{i.tag:<32} FAILED: {i.error}")
    say(f"{len(report.images)} image(s): {built} stage(s) built, {cached} already built, "
        f"{report.seconds:.1f} s" + ("; nothing to build" if built == 0 and report.ok else ""))
    for line in summary_notes(report):
        say(line)
    if not as_json:
        for i in report.images:
            if i.tagged:
                for name in [i.tag, *i.aliases]:
                    print(f"{i.ref.rsplit(':', 1)[0]}:{name}")


def verify_reproducible(ctx: RunContext) -> int:
    """``verify-reproducible``: build TAG (reusing what is built), then rebuild each of
    its stages, and its bootstrapped base, with no cache on the same parent, and compare
    digests (``reproduce.verify_plan``). Exit 0 when every stage gives the same image, 1
    when one differs (the report names the files); raises ``InputError`` for bad input
    or an engine that cannot rewrite timestamps (Docker 20.10: ``doctor`` says why)."""
    ctx.load()
    chosen = ctx.select(default_all=False)
    if len(chosen) != 1:
        raise InputError.one("verify-reproducible", "takes one tag", "pass TAG or --tag TAG")
    tag = chosen[0].tag
    bundle = find_ca_bundle(ctx.opts.ca_bundle, ctx.opts.no_ca_bundle)
    wanted = choose_platforms(ctx, chosen)  # the input first, then the engine
    engine = ctx.engine
    why = engine.reproducible()
    if why:
        raise InputError.one(f"verify-reproducible {tag}", f"impossible here: {why}",
                             "run it on Docker 25+ with buildx and the containerd image store")
    plan = plan_for(ctx, chosen, fit_engine(engine, wanted, bool(ctx.opts.platform)))
    if any(not b.source_date_epoch for b in plan.bases):
        say("warning: no matrix.lock entry for this base, so no SOURCE_DATE_EPOCH: file times "
            "and the image config's dates are the build's and will differ (run `build.py lock`)")
    state = ctx.state_dir()
    report = build_plan(engine, plan, ctx.matrix.root,
                        BuildOptions(ctx.repository, state, ctx.opts.jobs, bundle), say)
    if not report.ok:
        say(f"not checked: {tag} did not build ({report.images[0].error[:200]})")
        return EXIT_FAILED
    checked = verify_plan(engine, plan, ctx.matrix.root, state, say, bundle)
    if ctx.opts.json:
        emit_json({"tag": tag, "reproducible": checked.ok, "seconds": round(checked.seconds, 1),
                   "stages": [{**asdict(c), "same": c.same} for c in checked.checks]})
    differ = [c for c in checked.checks if not c.same]
    say(f"{tag}: " + ("reproducible: every stage rebuilt to the same digest "
                      f"({len(checked.checks)} checked, {checked.seconds:.0f} s)"
                      if not differ else
                      f"NOT reproducible: {', '.join(c.stage for c in differ)} differ"))
    return EXIT_OK if checked.ok else EXIT_FAILED
