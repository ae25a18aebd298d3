"""The commands that show the matrix and its plan without building: ``list``, ``render``,
``plan`` (and ``build --dry-run``), ``probe`` (this host and the tag that fits it) and
``catalog`` (a static site of the tags). ``matrix`` and ``bake`` are in ``exports``. Each returns its exit
status; results go to stdout (or ``-o FILE``), notes to stderr."""

from __future__ import annotations

import sys

from .. import probecmd, sourceinfo
from ..catalog import cli as catalog_cli
from ..errors import EXIT_FAILED, EXIT_OK, InputError
from ..expand import ImageSpec
from ..plan import Plan, full_dockerfile, up_to_stage
from ..platforms import host_platform
from .context import RunContext
from .output import emit_json, say, write_output
from .planning import Wanted, base_for, base_source, choose_platforms, fit_engine, plan_for


def list_tags(ctx: RunContext) -> int:
    """``list``: every tag (or the named ones) with its stage chain and aliases."""
    specs = ctx.specs
    if ctx.opts.tag or ctx.opts.target:  # --list --tag T: just those (an unknown T is an error)
        specs = ctx.select(default_all=True)
    if ctx.opts.json:
        emit_json([{"tag": s.tag, "aliases": list(s.aliases), "group": s.group,
                    "chain": list(s.chain), "selection": dict(s.selection)} for s in specs])
        return EXIT_OK
    width = max(len(s.tag) for s in specs)
    for s in specs:
        aliases = f"  (aliases: {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.tag:<{width}}  {' > '.join(s.chain)}{aliases}")
    return EXIT_OK


def render(ctx: RunContext) -> int:
    """``render``: one tag's complete multi-stage Dockerfile, for one platform (the
    host's, else its first, unless ``--platform`` names one)."""
    ctx.load()
    chosen = ctx.select(default_all=False)
    if len(chosen) != 1:
        raise InputError.one("render", "render takes exactly one tag", "pass one TAG")
    spec = chosen[0]
    platforms = choose_platforms(ctx, [spec])[spec.tag]  # several only without --platform
    if len(platforms) > 1:  # one Dockerfile per platform: the host's, else the first
        every = platforms
        platforms = (host_platform(),) if host_platform() in platforms else platforms[:1]
        say(f"note: {spec.tag} is built for {', '.join(every)}; this is its Dockerfile for "
            f"{platforms[0]} (--platform OS/ARCH for another)")
    base = base_for(ctx, spec, platforms[0], base_source(ctx, spec, pull_by_default=True))
    text = full_dockerfile(ctx.matrix, spec, base, sourceinfo.revision(ctx.matrix.root),
                           sourceinfo.created(ctx.matrix.root))
    if ctx.opts.output:
        write_output("-o", ctx.opts.output, text)
        say(f"wrote {ctx.opts.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def plan(ctx: RunContext) -> int:
    """``plan``: the chosen tags' stages (default: every tag)."""
    ctx.load()
    return show_plan(ctx, ctx.select(default_all=True))


def show_plan(ctx: RunContext, chosen: list[ImageSpec]) -> int:
    """Each base and stage of ``chosen``'s plan (up to ``--stage``), built or to build
    on the engine; ``--json``: bases, stages and images as one document. ``plan`` shows
    the platforms the matrix declares (``--platform`` narrows them); ``build --dry-run``
    those the build would make on this engine, with its notes and checks (``fit_engine``:
    the host's platform where the engine keeps one per tag, emulation set up). The input
    is checked before the engine is asked anything."""
    wanted = choose_platforms(ctx, chosen)
    stage = ctx.opts.stage or ""

    def planned(wanted: Wanted) -> Plan:
        the_plan = plan_for(ctx, chosen, wanted)
        return up_to_stage(the_plan, stage) if stage else the_plan

    the_plan = planned(wanted)  # raises for a --stage some chain lacks
    engine = ctx.engine
    if ctx.opts.dry_run:
        fitted = fit_engine(engine, wanted, bool(ctx.opts.platform), whole_images=not stage)
        if fitted != wanted:
            the_plan = planned(fitted)
    rows = []
    for key, node in the_plan.nodes.items():
        built = engine.image_id(node.image_ref) is not None
        rows.append({"key": key, "stage": node.stage, "image": node.image_ref,
                     "parent": node.parent_key, "built": built, "tags": list(node.tags),
                     "platform": node.base.platform})
    bases = [{"name": b.name, "source": b.source, "ref": b.ref, "platform": b.platform,
              "present": engine.image_id(b.ref) is not None} for b in the_plan.bases]
    if ctx.opts.json:
        emit_json({"bases": bases, "stages": rows,
                   "images": [{"tag": i.spec.tag, "platform": i.platform, "keys": list(i.keys)}
                              for i in the_plan.images]})
        return EXIT_OK
    for b in bases:
        print(f"base   {b['name']:<10} {b['platform']:<12} "
              f"{'present ' if b['present'] else 'to make '} {b['ref']}")
    for i, r in enumerate(rows, 1):
        state = "built   " if r["built"] else "to build"
        print(f"{i:>3}. {r['stage']:<8} {r['platform']:<12} {r['key'][:12]} {state} "
              f"{', '.join(r['tags'])}")
    todo = sum(not r["built"] for r in rows)
    print(f"{len(rows)} stages, {todo} to build, {len(rows) - todo} already built", file=sys.stderr)
    return EXIT_OK


def probe(ctx: RunContext) -> int:
    """``probe``: this host as the entrypoint would see it and the tag of the matrix (or
    of ``--tag``) that suits it best (``stagecraft.probecmd``). Exit 0, or 1 when no
    image can run here."""
    ctx.load()
    result = probecmd.probe(ctx.select(default_all=True), ctx.repository)
    if ctx.opts.json:
        emit_json(result)
    else:
        print(probecmd.format_text(result))
    return EXIT_OK if result["best"]["tag"] else EXIT_FAILED


def catalog(ctx: RunContext) -> int:
    """``catalog``: write the catalog site (``stagecraft.catalog``) for the chosen tags
    (default: all); the catalog reads its own options from the parsed command line."""
    matrix, specs = ctx.load()
    return catalog_cli.run(ctx.args, matrix, ctx.select(default_all=True), specs)
