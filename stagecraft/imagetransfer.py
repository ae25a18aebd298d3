"""Moving an image between the engine and a registry or an archive, through the docker
SDK: a pull (by tag or by digest), the registry's digest for a tag, ``docker save`` and
``docker load`` of an archive, a push. The bases (``bases``: a pulled base) and the base
cache (``basecache``) use them. What an engine's crash leaves costs one request more: a
pull or load that met a directory at a new snapshot's id (``stalesnapshot``), a load that
met an interrupted load's ``index.json`` (``staleingest``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import docker.errors
import docker.utils

from . import retry, staleingest, stalesnapshot
from .errors import BuildError
from .safetext import cut_start
from .safetext import error_text as _short

if TYPE_CHECKING:
    from .engine import Engine


def pull(client: Any, repository: str, tag: str, what: str) -> None:
    """Pull ``repository`` at ``tag`` (a tag, or a ``sha256:`` digest) through the engine's
    progress stream, read to its end; made once more where the stream ended in the
    snapshotter's words for a directory at a new snapshot's id (``stalesnapshot``: the
    SDK's ``images.pull`` reads past an error in the stream, so it is read here). Raises
    ``BuildError`` ("cannot pull ``what``: ...") for the stream's error or the engine's
    refusal."""

    def once() -> None:
        for event in client.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                error = str(event["error"])
                if stalesnapshot.said(error):  # the stream's error: asked once more, as an answer's
                    raise docker.errors.APIError(error)
                raise BuildError(f"cannot pull {what}: {cut_start(error, 200)}")

    try:
        stalesnapshot.once_more(once)
    except docker.errors.DockerException as exc:
        raise BuildError(f"cannot pull {what}: {_short(exc)}") from None


def pull_ref(engine: Engine, ref: str) -> str:
    """Pull ``ref`` (a base, pinned by digest; ``pull``); returns the image id. Raises
    BuildError, saying what to do on a host without registry access."""
    repository, tag = docker.utils.parse_repository_tag(ref)
    try:
        pull(engine.client, repository, tag or "latest", ref)
        return engine.client.images.get(ref).id
    except docker.errors.DockerException as exc:
        said = f"cannot pull {ref}: {_short(exc)}"
    except BuildError as exc:
        said = str(exc)
    raise BuildError(f"{said}; on a host without registry access use --base-source bootstrap")


def pull_by_digest(engine: Engine, repository: str, digest: str) -> str:
    """Pull ``repository@digest`` (``pull``); returns the local image id. The image is
    looked up by its pinned reference, else by the digest itself (the containerd image
    store names images by manifest digest), a few times (the store may answer a moment
    after the pull ends). Raises BuildError."""
    pinned = f"{repository}@{digest}"
    pull(engine.client, repository, digest, pinned)
    found = retry.poll(lambda: engine.image_id(pinned) or engine.image_id(digest),
                       tries=10, interval_s=0.5)
    if found:
        return found
    raise BuildError(f"pulled {pinned}, but the engine does not list it")


def registry_digest(engine: Engine, ref: str) -> str | None:
    """The digest the registry gives for ``ref`` (asked by the daemon, from its own
    network), or None when the registry has no such tag or does not answer."""
    try:
        return engine.client.images.get_registry_data(ref).id
    except docker.errors.DockerException:
        return None


def save_image(engine: Engine, ref: str, path: Path) -> None:
    """``docker save`` of ``ref`` into the archive ``path`` (written to a temporary
    name, then renamed). Raises BuildError."""
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as out:
            for chunk in engine.client.images.get(ref).save(named=True):
                out.write(chunk)
        tmp.replace(path)
    except docker.errors.DockerException as exc:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"cannot save {ref}: {_short(exc)}") from None


def load_image(engine: Engine, path: Path) -> None:
    """``docker load`` of the archive ``path`` (``docker save``'s), made once more where
    the engine refused it for what its crash left, for each of the two leftovers at most
    once: a directory at a new snapshot's id (``stalesnapshot``), an interrupted load's
    ``index.json`` (``staleingest``: after a load that consumes it). Raises BuildError."""
    seen: set[str] = set()
    while True:
        try:
            with open(path, "rb") as data:
                engine.client.images.load(data)
            return
        except docker.errors.DockerException as exc:
            kind = staleingest.leftover(str(exc), staleingest.archive_index_digest(path), seen)
            if not kind:
                raise BuildError(f"cannot load {path}: {_short(exc)}") from None
            if kind == "ingest":
                try:  # refused as no image by design: it is there to consume the ingest
                    engine.client.images.load(staleingest.flush_tar())
                except docker.errors.DockerException:
                    pass
        except OSError as exc:
            raise BuildError(f"cannot load {path}: {exc.strerror or exc}") from None


def push_image(engine: Engine, ref: str) -> None:
    """Push ``ref`` with the credentials of the Docker config. Raises BuildError with
    the registry's message (never the credentials)."""
    repo, tag = ref.rsplit(":", 1)
    try:
        for event in engine.client.api.push(repo, tag, stream=True, decode=True):
            if "error" in event:
                raise BuildError(f"push of {ref} failed: {event['error']}")
    except docker.errors.DockerException as exc:
        raise BuildError(f"push of {ref} failed: {_short(exc)}") from None
