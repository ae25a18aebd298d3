"""From chosen images to what is built: the platforms of each tag on this host and
engine, and the plan (stages by content key, bases) for them."""

from __future__ import annotations

from typing import Any

from .. import compat, platforms, sourceinfo
from ..bases import BaseImage, base_image
from ..errors import InputError
from ..expand import ImageSpec
from ..lockfile import base_epoch, base_lock
from ..plan import Plan, make_plan
from .context import RunContext, clip
from .output import say

Wanted = dict[str, tuple[str, ...]]  # tag -> the platforms ("linux/amd64") to build it for


def choose_platforms(ctx: RunContext, chosen: list[ImageSpec]) -> Wanted:
    """Tag -> the platforms to build it for: its declared ones (the host's when none),
    narrowed by ``--platform``. Raises ``InputError`` for an unknown platform, a named
    tag without any of the requested ones, or a compatibility rule the host breaks."""
    host = platforms.host_platform()
    requested: list[str] = []
    for item in filter(None, (ctx.opts.platform or "").split(",")):
        name = platforms.normalise(item)
        if name not in platforms.KNOWN:
            raise InputError.one(f"--platform {clip(item)}", "unknown platform",
                                 f"one of: {', '.join(platforms.KNOWN)}")
        requested.append(name)
    out: Wanted = {}
    for spec in chosen:
        declared = spec.platforms or (host,)
        if not spec.platforms:  # the host's platform: its rules are checked now
            for rule in compat.platform_rules(spec.components, declared):
                raise InputError.one(spec.tag, f"cannot build here: {rule}",
                                     "build it on a host of a platform it supports")
        picked = tuple(p for p in declared if p in requested) if requested else declared
        if not picked:
            if ctx.opts.all:
                say(f"not building {spec.tag}: it is built for {', '.join(declared)} only")
                continue
            raise InputError.one(f"--platform {','.join(requested)}",
                                 f"{spec.tag} is built for {', '.join(declared)} only",
                                 "choose one of those platforms")
        out[spec.tag] = picked
    return out


def fit_engine(engine: Any, wanted: Wanted, explicit: bool, whole_images: bool = True) -> Wanted:
    """The platforms to build per tag on this engine. Where the engine cannot hold several
    platforms under one tag (Docker without the containerd image store, e.g. Debian's
    20.10) and ``--platform`` was not given, a multi-platform tag is built for the host's
    platform only, said in one line; asked for explicitly, that is bad input (exit 2)
    before anything is built. ``whole_images`` false (``--stage``: stage images, no tag
    holds two platforms) keeps every platform. Raises ``InputError`` too when a platform
    needs emulation that is not set up."""
    several = {tag: ps for tag, ps in wanted.items() if len(ps) > 1} if whole_images else {}
    if several:
        why = engine.multi_platform()
        if why and explicit:
            asked = sorted({p for ps in several.values() for p in ps})
            raise InputError.one(f"--platform {','.join(asked)}",
                                 f"{why}: it cannot build {', '.join(asked)} under one tag "
                                 f"({', '.join(several)})", f"pass --platform "
                                 f"{platforms.host_platform()} for one platform, or use an engine "
                                 "with the containerd image store and buildx (Docker 24+)")
        if why:
            host = platforms.host_platform()
            wanted = dict(wanted)
            for tag, ps in several.items():
                one = host if host in ps else ps[0]
                wanted[tag] = (one,)
                say(f"note: {why}: building {tag} for {one} only (its matrix platforms: "
                    f"{', '.join(ps)}; all of them need an engine with the containerd image "
                    "store and buildx)")
    for p in sorted({p for ps in wanted.values() for p in ps}):
        why = platforms.emulation(p)
        if why:
            raise InputError.one(f"--platform {p}", why,
                                 f"run scripts/setup.sh with STAGECRAFT_PLATFORMS={p} (as root: "
                                 "installs qemu-user-static and registers it)")
    return wanted


def base_for(ctx: RunContext, spec: ImageSpec, platform: str, source: str | None) -> BaseImage:
    """The base image of ``spec`` on ``platform`` from ``source`` (None: as the matrix
    says), with its locked digest and SOURCE_DATE_EPOCH from matrix.lock."""
    return base_image(spec.base, source, platform, locked=base_lock(ctx.matrix, spec, platform),
                      source_date_epoch=base_epoch(ctx.matrix, spec, platform))


def base_source(ctx: RunContext, spec: ImageSpec, pull_by_default: bool) -> str | None:
    """Where ``spec``'s base comes from: ``--base-source``, else (``pull_by_default``:
    render, bake and the CI matrix) pulled where the matrix gives a pull reference, else
    None (as the matrix says)."""
    if ctx.opts.base_source or not pull_by_default:
        return ctx.opts.base_source
    return "pull" if "pull" in spec.base else None


def plan_for(ctx: RunContext, specs: list[ImageSpec], wanted: Wanted | None = None) -> Plan:
    """The plan of ``specs`` on the platforms in ``wanted`` (default: ``choose_platforms``;
    a spec missing from it is left out), bases from ``--base-source`` or the matrix,
    final tags in ``--repository`` (none given: the matrix's)."""
    wanted = wanted if wanted is not None else choose_platforms(ctx, specs)
    return _plan(ctx, [s for s in specs if s.tag in wanted], wanted, False, ctx.opts.repository)


def bake_plan(ctx: RunContext, specs: list[ImageSpec]) -> Plan:
    """The plan of the bake file and the CI matrix: every platform each image declares
    (remote builders and native runners build them; nothing is emulated here), bases
    pulled by digest unless ``--base-source`` says otherwise."""
    wanted = {s.tag: s.platforms or (platforms.host_platform(),) for s in specs}
    return _plan(ctx, specs, wanted, True, None)


def _plan(ctx: RunContext, specs: list[ImageSpec], wanted: Wanted, pull_by_default: bool,
          repository: str | None) -> Plan:
    bases: dict[Any, BaseImage] = {
        (s.base["name"], p): base_for(ctx, s, p, base_source(ctx, s, pull_by_default))
        for s in specs for p in wanted[s.tag]}
    return make_plan(ctx.matrix, specs, bases, sourceinfo.revision(ctx.matrix.root),
                     sourceinfo.created(ctx.matrix.root), repository, wanted)
