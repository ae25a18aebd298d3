"""The base image through the build cache location, so every runner builds on the same
base layers (``stagecraft.cache``: why that matters).

``take_base`` (before bootstrapping): when the base is not in the engine, get it from
``--cache-from``: the registry's digest for the base's tag, then a pull by that digest;
or ``docker load`` of the saved archive. ``share_base`` (once the base is in the engine):
put it at ``--cache-to`` when it is not there yet (push, or ``docker save``). Neither
fails the build: a cache location that does not answer is a warning, returned as text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import imagetransfer
from .bases import BaseImage
from .cache import CacheSpec
from .errors import BuildError

if TYPE_CHECKING:
    from .engine import Engine


def take_base(engine: Engine, base: BaseImage, spec: CacheSpec,
              say: Callable[[str], None]) -> str:
    """Make ``base`` present from the cache location ``spec``; returns "" when it is
    there now, else why not (the caller bootstraps or pulls as usual)."""
    where = spec.base_location(base)
    if spec.kind == "local":
        path = Path(where)
        if not path.is_file():
            return f"no base at {where}"
        try:
            imagetransfer.load_image(engine, path)
        except BuildError as exc:
            return str(exc)
    else:
        digest = imagetransfer.registry_digest(engine, where)
        if digest is None:
            return f"{where} is not in the registry, or the registry does not answer"
        repository = where.rsplit(":", 1)[0]
        pinned = f"{repository}@{digest}"
        try:
            engine.tag(imagetransfer.pull_by_digest(engine, repository, digest), base.ref)
        except BuildError as exc:
            return str(exc)
        say(f"base {base.name}: pulled {pinned} (shared by the runner that made it)")
    if engine.image_id(base.ref) is None:
        return f"{where} did not hold {base.ref}"
    if spec.kind == "local":
        say(f"base {base.name}: loaded {where} (shared by the runner that made it)")
    return ""


def share_base(engine: Engine, base: BaseImage, spec: CacheSpec,
               say: Callable[[str], None]) -> str:
    """Put ``base`` (present in the engine) at the cache location ``spec`` unless it is
    there already; returns "" or why it could not."""
    where = spec.base_location(base)
    if spec.kind == "local":
        path = Path(where)
        if path.is_file():
            return ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            imagetransfer.save_image(engine, base.ref, path)
        except (OSError, BuildError) as exc:
            return f"cannot save the base to {where}: {exc}"
        say(f"base {base.name}: saved to {where} for other runners")
        return ""
    if imagetransfer.registry_digest(engine, where) is not None:
        return ""
    engine.tag(base.ref, where)
    try:
        imagetransfer.push_image(engine, where)
    except BuildError as exc:
        return str(exc)
    finally:
        try:
            engine.untag(where)  # the base keeps its own name
        except BuildError:
            pass
    say(f"base {base.name}: pushed to {where} for other runners")
    return ""
