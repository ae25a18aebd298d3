"""Pushing one name (a tag or an alias) of an image and verifying what the registry
serves, with retries: the step ``publish`` repeats for every canonical tag, then every
alias. The daemon is reached through ``Daemon`` (``publish.EngineDaemon``; tests give a
fake), the registry through ``registry.Registry`` (skopeo).

Transient failures (HTTP 5xx, connection reset or refused, timeouts, EOF) are retried
with exponential backoff (``RetryPolicy``, ``retry``); authentication and authorization
failures are not (retrying a wrong password only locks accounts).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from . import retry
from .registry import Registry, RegistryError, classify
from .retry import RetryPolicy
from .runmanifest import NamePush

# One class for every push or verification failure, whichever client met it (the
# daemon's push here, skopeo in ``registry``): ``kind`` is auth, transient, digest, fatal.
PublishError = RegistryError
DEFAULT_POLICY = RetryPolicy()  # 4 attempts, 1 s, 2 s, 4 s apart (--retries 3)


def with_retries(fn: Callable[[], Any], policy: RetryPolicy, what: str,
                 say: Callable[[str], None], sleep: Callable[[float], None] = time.sleep
                 ) -> tuple[Any, int]:
    """Call ``fn`` until it returns; returns ``(result, attempts used)`` (``retry.call``).

    ``fn`` raises ``PublishError``: kind ``transient`` is retried after the policy's
    delays, each retry said as ``  WHAT: ERROR; retrying in N s (n/attempts)``; any other
    kind is raised at once; a transient one after the last attempt is raised with
    ``(gave up after N attempts)`` added when there were retries.
    """
    def said(exc: BaseException, attempt: int, delay: float) -> None:
        say(f"  {what}: {exc}; retrying in {delay:.0f} s ({attempt}/{policy.attempts})")

    try:
        return retry.call(fn, policy,
                          lambda e: isinstance(e, PublishError) and e.kind == "transient",
                          said, sleep)
    except PublishError as exc:
        if exc.kind == "transient" and policy.attempts > 1:
            raise PublishError(f"{exc} (gave up after {policy.attempts} attempts)",
                               "transient", exc.detail) from None
        raise


def manifest_size(body: bytes) -> int:
    """Bytes the image takes in the registry: config plus layers (compressed), from an
    image manifest; 0 for an index."""
    try:
        doc = json.loads(body)
    except ValueError:
        return 0
    return int(doc.get("config", {}).get("size", 0)) + sum(int(lay.get("size", 0))
                                                            for lay in doc.get("layers", []))



class Daemon(Protocol):
    """What publishing needs of the engine (``EngineDaemon``; tests give a fake)."""

    def image_id(self, ref: str) -> str | None: ...
    def tag(self, image_id: str, repository: str, tag: str) -> None: ...
    def push(self, repository: str, tag: str) -> Iterable[dict[str, Any]]: ...
    def repo_digests(self, image_id: str) -> list[str]: ...
    def labels(self, image_id: str) -> dict[str, str]: ...
    def size(self, image_id: str) -> int: ...
    def insecure(self, registry: str) -> bool: ...
    def credentials(self, registry: str) -> dict[str, Any] | None: ...



_DIGEST_STATUS = re.compile(r"^\S+: digest: (sha256:[0-9a-f]{64}) size: \d+$")


def push_once(daemon: Daemon, remote: str, name: str, progress: Callable[[str], None]
               ) -> tuple[str, int, int]:
    """Push ``remote:name`` once (the daemon's push stream, each uploaded layer said to
    ``progress``); returns (manifest digest, layers pushed, layers already there).
    Raises ``PublishError`` classified from the daemon's error, or transient when it
    reported no digest."""
    digest, pushed, existed = "", 0, 0
    for ev in daemon.push(remote, name):
        if "errorDetail" in ev or "error" in ev:
            text = (ev.get("errorDetail") or {}).get("message") or str(ev.get("error"))
            raise PublishError(f"push of {remote}:{name}: {text}", classify(text))
        status = str(ev.get("status", ""))
        if status == "Pushed":
            pushed += 1
            progress(f"layer {ev.get('id', '')} pushed")
        elif status == "Layer already exists" or status.startswith("Mounted from "):
            existed += 1  # in the registry already (a cross-repository mount included)
        aux = ev.get("aux")
        if isinstance(aux, dict) and aux.get("Digest"):
            digest = str(aux["Digest"])
        # Docker with the containerd image store (26) sends no aux event: the digest comes
        # only in the closing status line, `<tag>: digest: sha256:... size: N`.
        found = _DIGEST_STATUS.match(status)
        if found and not digest:
            digest = found.group(1)
    if not digest:
        raise PublishError(f"push of {remote}:{name}: the daemon reported no digest", "transient")
    return digest, pushed, existed


def push_name(daemon: Daemon, registry_client: Registry, image_id: str, remote: str,
              repository: str, name: str, policy: RetryPolicy, say: Callable[[str], None],
              sleep: Callable[[float], None] = time.sleep) -> NamePush:
    """Tag ``image_id`` as ``remote:name``, push it and verify the registry's digest.

    Returns a ``NamePush`` with status ``pushed`` (verified); raises ``PublishError``
    after the policy's retries, or at once for an auth or digest error.
    """
    out = NamePush(name=name, ref=f"{remote}:{name}")
    t0 = time.monotonic()
    daemon.tag(image_id, remote, name)

    def attempt() -> tuple[str, int, int, str, int]:
        digest, pushed, existed = push_once(daemon, remote, name, lambda s: say(f"  {s}"))
        registry_digest, body, _ = registry_client.manifest(repository, name)
        return digest, pushed, existed, registry_digest, manifest_size(body)

    (digest, pushed, existed, registry_digest, size), attempts = with_retries(
        attempt, policy, f"{remote}:{name}", say, sleep)
    out.digest, out.registry_digest, out.size = digest, registry_digest, size
    out.layers_pushed, out.layers_existed, out.attempts = pushed, existed, attempts
    out.seconds = time.monotonic() - t0
    if registry_digest != digest:
        raise PublishError(f"{remote}:{name}: pushed {digest} but the registry serves "
                           f"{registry_digest}", "digest")
    out.verified, out.status = True, "pushed"
    return out


def auth_message(registry: str, exc: PublishError) -> str:
    """The one line a user reads when ``registry`` refuses the credentials."""
    reason = str(exc).rsplit(": ", 2)[-2:] if ": " in str(exc) else [str(exc)]
    return (f"{registry} refused the credentials ({': '.join(reason)}); nothing further was "
            f"pushed and no alias moved; log in with `docker login {registry}` (read from "
            "$DOCKER_CONFIG or ~/.docker/config.json, credential helpers included)")
