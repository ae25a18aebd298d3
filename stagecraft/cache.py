"""Build cache shared across machines, scoped per stage key.

``--cache-from``/``--cache-to`` take ``type=local,dir=PATH`` or ``type=registry,ref=REPO``.
Each stage reads and writes its own scope, named by its content key
(``PATH/<stage>-<key24>`` or ``REPO:<stage>-<key24>``), so CI runners building different
matrix cells share work instead of overwriting one cache (the common single-scope
problem, docker/build-push-action#252). With buildx these become BuildKit's cache
importers/exporters (https://docs.docker.com/build/cache/backends/); a classic client
(``DOCKER_BUILDKIT=1``) can only import registry caches and export an inline cache in
the stage image itself, which the builder then pushes to the cache reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class CacheSpec:
    """A cache location: ``kind`` is ``local`` (a directory) or ``registry`` (a
    repository reference without tag)."""

    kind: str
    location: str

    def scope(self, stage: str, key: str) -> str:
        """The location of one stage's cache."""
        sep = "/" if self.kind == "local" else ":"
        return f"{self.location}{sep}{stage}-{key[:24]}"


def parse(text: str, option: str) -> CacheSpec:
    """Parse ``type=local,dir=PATH`` or ``type=registry,ref=REPO``.

    Raises ``InputError`` naming the option and the accepted forms."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    kind = fields.get("type")
    loc = fields.get("dir") if kind == "local" else fields.get("ref") if kind == "registry" else None
    if not loc or len(fields) != 2:
        raise InputError.one(f"{option} {text}", "not a cache location",
                             "use type=local,dir=PATH or type=registry,ref=HOST/REPO")
    if kind == "registry" and ":" in loc.rsplit("/", 1)[-1]:
        raise InputError.one(f"{option} {text}", "ref takes a repository without a tag",
                             "stagecraft adds one tag per stage key")
    return CacheSpec(kind, loc)


@dataclass(frozen=True)
class CacheArgs:
    """What one stage's build gets: CLI ``args``, ``build_args``, and ``push_ref``, the
    reference the stage image is pushed to after building (classic inline cache)."""

    args: tuple[str, ...] = ()
    build_args: tuple[tuple[str, str], ...] = ()
    push_ref: str = ""


def stage_args(uses_buildx: bool, cache_from: CacheSpec | None, cache_to: CacheSpec | None,
               stage: str, key: str) -> CacheArgs:
    """Cache options for one stage build. Raises ``InputError`` for a combination the
    host's BuildKit path cannot do (a local cache without buildx)."""
    args: list[str] = []
    build_args: list[tuple[str, str]] = []
    push_ref = ""
    for spec, direction in ((cache_from, "from"), (cache_to, "to")):
        if spec is None:
            continue
        scope = spec.scope(stage, key)
        if uses_buildx:
            if direction == "from":
                args.append(f"--cache-from=type={spec.kind},{'src' if spec.kind == 'local' else 'ref'}={scope}")
            else:
                args.append(f"--cache-to=type={spec.kind},{'dest' if spec.kind == 'local' else 'ref'}={scope},mode=max")
            continue
        if spec.kind == "local":
            raise InputError.one(f"--cache-{direction} type=local", "a local cache needs buildx",
                                 "install the buildx plugin, or use type=registry,ref=HOST/REPO")
        if direction == "from":
            args.append(f"--cache-from={scope}")
        else:
            build_args.append(("BUILDKIT_INLINE_CACHE", "1"))
            push_ref = scope
    return CacheArgs(tuple(args), tuple(build_args), push_ref)
