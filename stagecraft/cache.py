"""Build caches shared across machines (CI runners), per stage. Pure.

``--cache-from``/``--cache-to`` take ``type=local,dir=PATH`` or ``type=registry,ref=REPO``
and become BuildKit's cache importers/exporters
(https://docs.docker.com/build/cache/backends/), which need buildx, and for export an
engine with the containerd image store or a builder with its own BuildKit
(``stagecraft.capabilities``). What goes where:

- Each stage key has its own scope (``PATH/<stage>-<key24>``, ``REPO:<stage>-<key24>``),
  so runners building different matrix cells share work instead of overwriting one
  cache (the single-scope problem, docker/build-push-action#252).
- Each stage also has a *line* scope (``<stage>-line-<hash16>`` of ``StageNode.line``:
  the stage and the components it is built from, not its text). A build imports both, so
  after a template edit or a new pin the stage's new key still takes its unchanged steps
  (those before the edit) from the previous key's cache. The registry gets both exports
  (blobs are stored once); a local line scope is a symbolic link to the key's directory.
- Exports carry ``ignore-error=true``: a registry that does not answer costs the cache,
  never the image (moby/buildkit#3430). The builder reads BuildKit's output
  (``stagecraft.buildlog``) to say which caches were not written.
- The base image is shared too, since every key below it hashes the base's identity but
  BuildKit's cache matches its layers: a bootstrapped base differs per debootstrap run.
  ``base_location`` names where the first runner puts it (``REPO:base-image-<hash24>``
  pushed, or ``PATH/base-image-<hash24>.tar`` saved) and the next ones take it (pulled
  by the digest the registry gives for that tag, or loaded), so every runner builds on
  the same layers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .bases import BaseImage
from .errors import InputError


@dataclass(frozen=True)
class CacheSpec:
    """A cache location: ``kind`` is ``local`` (a directory) or ``registry`` (a
    repository reference without tag)."""

    kind: str
    location: str

    @property
    def text(self) -> str:
        """The option's text: ``type=local,dir=PATH`` or ``type=registry,ref=REPO``."""
        return f"type={self.kind},{'dir' if self.kind == 'local' else 'ref'}={self.location}"

    def scope(self, stage: str, key: str) -> str:
        """The location of one stage key's cache."""
        return self._at(f"{stage}-{key[:24]}")

    def line_scope(self, stage: str, line: str) -> str:
        """The location of the cache of a stage's line (any key of it)."""
        return self._at(line_name(stage, line))

    def base_location(self, base: BaseImage) -> str:
        """Where the base image ``base`` is shared: a tagged reference in the registry,
        or a ``docker save`` archive in the directory."""
        name = "base-image-" + hashlib.sha256(base.identity.encode()).hexdigest()[:24]
        return self._at(name + ".tar" if self.kind == "local" else name)

    def _at(self, name: str) -> str:
        return f"{self.location}{'/' if self.kind == 'local' else ':'}{name}"


def line_name(stage: str, line: str) -> str:
    """The scope name of a stage's line: ``<stage>-line-<sha256(line)[:16]>``."""
    return f"{stage}-line-{hashlib.sha256(line.encode()).hexdigest()[:16]}"


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


# Options of every cache export, build.py's and bake files': all of a stage's steps
# (mode=max), and a cache that cannot be written costs the cache, never the image.
EXPORT_OPTS = ",mode=max,ignore-error=true"


def _entry(spec: CacheSpec, location: str, export: bool) -> str:
    if spec.kind == "local":
        where = f"dest={location}" if export else f"src={location}"
    else:
        where = f"ref={location}"
    return f"type={spec.kind},{where}" + (EXPORT_OPTS if export else "")


def stage_args(cache_from: CacheSpec | None, cache_to: CacheSpec | None,
               stage: str, key: str, line: str) -> tuple[str, ...]:
    """``--cache-from``/``--cache-to`` options of one stage's build (buildx): import the
    key's scope and the line's, export to the key's scope (and, to a registry, the
    line's: a local line is a link the builder makes after the build). A stage without
    a line (the label stage: no steps worth caching) gets none."""
    if not line:
        return ()
    args: list[str] = []
    if cache_from is not None:
        for loc in (cache_from.scope(stage, key), cache_from.line_scope(stage, line)):
            args.append("--cache-from=" + _entry(cache_from, loc, export=False))
    if cache_to is not None:
        args.append("--cache-to=" + _entry(cache_to, cache_to.scope(stage, key), export=True))
        if cache_to.kind == "registry":
            args.append("--cache-to=" + _entry(cache_to, cache_to.line_scope(stage, line), export=True))
    return tuple(args)
