"""Publish tested images to a registry: canonical tags first, verified, then aliases.

``python build.py push --tag 2.6.2-cpu --registry HOST[:PORT][/NAMESPACE]`` (or ``--push``
on a build) goes through four steps, each of which can stop the run. The images go to
``HOST[:PORT]/<repository>``, or with a namespace to ``HOST[:PORT]/NAMESPACE/<name>``
where ``<name>`` is the last component of the repository (``remote_repository``).

1. **Gate.** Every chosen tag must be built (``<repository>:<tag>`` in the engine) and
   its *current image id* must have a passing test record
   (``<state>/test-records/<image id>.json``, written by ``python build.py test``).
   Otherwise nothing is pushed and ``InputError`` is raised: one line per refused tag,
   exit status 2, since the user fixes it by running the tests (as ``test`` treats an
   image that is not built).
2. **Canonical tags.** Each image is tagged ``<registry>/<repository>:<tag>`` in the
   engine and pushed by the daemon (``POST /images/{name}/push``). The daemon's stream
   ends with ``aux: {"Tag", "Digest", "Size"}``: the digest of the manifest it uploaded.
3. **Verification.** The registry's own manifest is fetched by tag with skopeo
   (``skopeo inspect --raw``, ``registry.Registry``): the SHA-256 of the bytes served,
   the digest the daemon reported and the image's local ``RepoDigests`` entry must all
   be equal.
4. **Aliases.** Only once every canonical tag an alias points to is pushed *and*
   verified is the alias pushed (a manifest upload: its layers are already there) and
   verified the same way. A failed canonical tag leaves its aliases where they were.

Transient failures (HTTP 5xx, connection reset or refused, timeouts, EOF) are retried
with exponential backoff (``RetryPolicy``, ``retry``); authentication and authorization
failures are not (retrying a wrong password only locks accounts) and stop the run at once.
One name's push, verification and retries: ``pushsteps``; the run's record:
``runmanifest``.

Credentials come from the standard Docker client configuration (``$DOCKER_CONFIG`` or
``~/.docker/config.json``: ``auths``, ``credsStore``, ``credHelpers``) through the Docker
SDK (``docker.auth``), both for the daemon's push and for the verification (handed to
skopeo in a temporary auth file, see ``registry``). They are never printed, logged or
written to the run manifest: error messages carry the registry's error text, never a
credential.

Every run writes a manifest, ``<state>/runs/<UTC timestamp>.json`` (also the ``--json``
output): per tag the registry reference, digest, aliases, compressed size in the registry
(bytes), local size (bytes), layers uploaded and skipped, attempts, and the test record
it was gated on with the SHA-256 of that record file.

Why the record's digest is in the run manifest and not in an image label: a label is
part of the image config, so adding one after testing makes a new image id (and a new
manifest digest) that was never tested; the test record is keyed by the id it tested.
The image keeps its build-time labels (source revision, matrix group and selection:
``render.final_labels``); the run manifest ties that image's pushed digest to the record.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import requests
import urllib3

from .errors import InputError, Problem
from .expand import ImageSpec
from .indexcheck import INDEX_TYPES, IndexMismatch, skopeo_runner, verify_index
from .pushsteps import DEFAULT_POLICY, Daemon, PublishError, auth_message, push_name
from .registry import Registry, api_repository, classify, loopback
from .retry import RetryPolicy
from .runmanifest import Candidate, ImagePush, NamePush, RunManifest, TestGate, run_id, write_run
from .statefile import Unreadable
from .testing import load_record, record_path

# Seconds a push may go without a progress event from the daemon before it is stopped
# (and retried as a transient failure): Docker sends progress every few hundred
# milliseconds while a layer uploads, and nothing at all while the registry holds a
# request unanswered, which its own client waits on without a limit.
PUSH_STALL_S = 120.0


class EngineDaemon:
    """``Daemon`` over an ``engine.Engine`` (the Docker SDK). The SDK reads the Docker
    config once, at ``docker.from_env()``, and sends the registry's entry (helpers
    resolved) as ``X-Registry-Auth`` with each push."""

    def __init__(self, engine: Any, stall_s: float = 0.0):
        self.engine = engine
        self.api = engine.client.api
        self.stall_s = stall_s or PUSH_STALL_S

    def image_id(self, ref: str) -> str | None:
        return self.engine.image_id(ref)

    def tag(self, image_id: str, repository: str, tag: str) -> None:
        if not self.api.tag(image_id, repository, tag, force=True):
            raise PublishError(f"could not tag {image_id[:19]} as {repository}:{tag}")

    def push(self, repository: str, tag: str) -> Iterator[dict[str, Any]]:
        import docker.errors

        # The stream's read timeout is the stall limit: the daemon sends progress while
        # layers move, and nothing while a registry holds a request unanswered.
        kept, self.api.timeout = self.api.timeout, self.stall_s
        try:
            yield from self.api.push(repository, tag=tag, stream=True, decode=True,
                                     auth_config=None)
        except docker.errors.APIError as exc:
            text = str(exc.explanation or exc)
            raise PublishError(f"push of {repository}:{tag}: {text}", classify(text)) from None
        except (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError):  # ConnectTimeout is a ConnectionError too
            raise PublishError(f"push of {repository}:{tag}: no progress for {self.stall_s:g} s "
                               "(the registry holds a request unanswered?); the push was stopped",
                               "transient") from None
        except requests.exceptions.ConnectionError as exc:
            if "timed out" in str(exc).lower():  # a read timeout inside urllib3's own retry
                raise PublishError(f"push of {repository}:{tag}: no progress for {self.stall_s:g} s "
                                   "(the registry holds a request unanswered?); the push was stopped",
                                   "transient") from None
            raise PublishError(f"push of {repository}:{tag}: connection to the daemon reset",
                               "transient") from None
        finally:
            self.api.timeout = kept

    def repo_digests(self, image_id: str) -> list[str]:
        return list(self.api.inspect_image(image_id).get("RepoDigests") or [])

    def labels(self, image_id: str) -> dict[str, str]:
        return dict(self.api.inspect_image(image_id).get("Config", {}).get("Labels") or {})

    def size(self, image_id: str) -> int:
        return int(self.api.inspect_image(image_id).get("Size", 0))

    def insecure(self, registry: str) -> bool:
        """Whether the daemon talks plain HTTP to ``registry``: listed as not secure in
        its ``IndexConfigs``, or an IP in ``InsecureRegistryCIDRs``."""
        if loopback(registry):
            return True
        cfg = self.engine.client.info().get("RegistryConfig", {})
        index = cfg.get("IndexConfigs", {}).get(registry)
        if index is not None:
            return not index.get("Secure", True)
        host = registry.rsplit(":", 1)[0]
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(ip in ipaddress.ip_network(c) for c in cfg.get("InsecureRegistryCIDRs", []))

    def credentials(self, registry: str) -> dict[str, Any] | None:
        import docker.auth

        return docker.auth.load_config().resolve_authconfig(registry)



# A path component of a repository name (distribution/reference's grammar).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"


def resolve_registry(option: str | None, matrix_registry: str) -> str:
    """``--registry`` if given, else matrix.yaml's ``registry``: ``HOST[:PORT]`` or
    ``HOST[:PORT]/NAMESPACE`` (``ghcr.io/org``, ``docker.io/user``). Raises
    ``InputError`` when neither is set or the value is neither form."""
    value = (option or matrix_registry or "").strip().rstrip("/")
    if not value:
        raise InputError.one("push", "no registry to push to",
                             "pass --registry HOST[:PORT][/NAMESPACE] or set `registry:` in "
                             "matrix.yaml")
    host, _, namespace = value.partition("/")
    if ("://" in value or len(value) > 255 or not re.match(r"^[A-Za-z0-9.\-\[\]:]+$", host)
            or (namespace and not re.fullmatch(rf"{_COMPONENT}(?:/{_COMPONENT})*", namespace))):
        shown = value if len(value) <= 80 else value[:80] + "..."
        raise InputError.one(f"--registry {shown}", "not a registry host or host/namespace",
                             "give HOST[:PORT] or HOST[:PORT]/NAMESPACE, e.g. "
                             "registry.example.com:5000 or ghcr.io/my-org")
    return value


def remote_repository(registry: str, repository: str) -> tuple[str, str]:
    """Where ``repository``'s images go in ``registry`` (a ``resolve_registry`` value):
    ``(HOST[:PORT], path)``. Without a namespace the path is the repository itself
    (``127.0.0.1:5000`` + ``stagecraft/paddle`` -> ``stagecraft/paddle``); a namespace
    takes the place of the repository's own (``ghcr.io/org`` + ``stagecraft/paddle`` ->
    ``org/paddle``), as docker-stacks' ``--registry``/``--owner`` and bashbrew's
    ``--namespace`` do, and as Docker Hub requires (one namespace, one name)."""
    host, _, namespace = registry.partition("/")
    if not namespace:
        return host, repository
    return host, f"{namespace}/{repository.rsplit('/', 1)[-1]}"


def gate(daemon: Daemon, specs: list[ImageSpec], repository: str,
         state_dir: Path) -> list[Candidate]:
    """The images allowed out. Raises ``InputError`` (nothing pushed) naming every tag
    that is not built, never tested in its current image id, or failed its tests."""
    problems: list[Problem] = []
    out: list[Candidate] = []
    for spec in specs:
        ref = f"{repository}:{spec.tag}"
        image_id = daemon.image_id(ref)
        if image_id is None:
            problems.append(Problem(f"--tag {spec.tag}", f"{ref} is not built",
                                    f"build and test it: python3 build.py --tag {spec.tag} --test"))
            continue
        short = image_id.split(":")[-1][:12]
        try:
            record = load_record(state_dir, image_id)
        except Unreadable as exc:  # half a file (an older version, a damaged disk): no pass
            problems.append(Problem(f"--tag {spec.tag}", f"refused: image {short}'s test record "
                                    f"is unreadable ({exc.why})",
                                    f"run its tests again: python3 build.py test --tag {spec.tag}"))
            continue
        if record is None:
            problems.append(Problem(f"--tag {spec.tag}", f"refused: image {short} has no test "
                                    "record (untested since it was built)",
                                    f"run: python3 build.py test --tag {spec.tag}"))
            continue
        if not record.get("passed"):
            problems.append(Problem(f"--tag {spec.tag}", f"refused: image {short} failed its "
                                    f"tests {record.get('counts', {})}",
                                    f"fix it and rerun: python3 build.py test --tag {spec.tag}"))
            continue
        path = record_path(state_dir, image_id)
        out.append(Candidate(spec, ref, image_id, TestGate(
            record=str(path), sha256="sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
            passed=True, counts=dict(record.get("counts", {})),
            recorded=float(record.get("recorded", 0.0)))))
    if problems:
        raise InputError(problems)
    return out



def publish(daemon: Daemon, candidates: list[Candidate], registry: str, repository: str,
            state_dir: Path, say: Callable[[str], None], policy: RetryPolicy = DEFAULT_POLICY,
            registry_client: Registry | None = None,
            sleep: Callable[[float], None] = time.sleep) -> RunManifest:
    """Push every candidate's tag, verify it, then push and verify the aliases.

    Returns the run manifest (also written under ``<state>/runs/``); ``ok`` is False
    when any reference failed. An authentication error stops the run at once: nothing
    after it is pushed, and no alias moves.
    """
    t0 = time.monotonic()
    started = datetime.now(timezone.utc)
    run = RunManifest(run=run_id(started), registry=registry, repository=repository,
                      started=started.strftime("%Y-%m-%dT%H:%M:%SZ"))
    client = registry_client or Registry(registry, daemon.credentials(registry) or {},
                                         daemon.insecure(registry))
    steps = _Steps(daemon, client, registry, repository, policy, say, sleep)
    images = [_image_entry(daemon, c, registry, steps.remote) for c in candidates]
    run.images = images
    # Canonical tags first; each verified before the next phase.
    for c, img in zip(candidates, images, strict=True):
        steps.canonical(c, img)
    # Aliases: only on images whose canonical tag is pushed and verified.
    for c, img in zip(candidates, images, strict=True):
        steps.aliases(c, img)
    run.seconds = round(time.monotonic() - t0, 2)
    run.ok = bool(images) and all(i.status == "pushed" for i in images)
    run.error = steps.stop
    write_run(run, state_dir)
    return run


def _image_entry(daemon: Daemon, c: Candidate, registry: str, remote: str) -> ImagePush:
    """The run manifest's entry of candidate ``c``, nothing pushed yet: its size in the
    engine, its aliases, and the labels that tie it to its source and matrix."""
    labels = daemon.labels(c.image_id)
    return ImagePush(tag=c.spec.tag, ref=f"{remote}:{c.spec.tag}", image_id=c.image_id,
                     status="not pushed", digest="", size=0, image_size=daemon.size(c.image_id),
                     local_repo_digest="",
                     aliases=[NamePush(a, f"{remote}:{a}") for a in c.spec.aliases],
                     push=NamePush(c.spec.tag, f"{remote}:{c.spec.tag}"), test=c.test,
                     labels={k: v for k, v in labels.items()
                             if k.startswith(("org.opencontainers.image.revision",
                                              "org.opencontainers.image.source",
                                              "io.stagecraft."))},
                     registry=registry)


@dataclass
class _Steps:
    """The two phases of one run over its daemon and registry client: ``stop`` is the
    message of the authentication failure that ended the run ('' while none has)."""

    daemon: Daemon
    client: Registry
    registry: str
    repository: str
    policy: RetryPolicy
    say: Callable[[str], None]
    sleep: Callable[[float], None]
    stop: str = ""

    @property
    def remote(self) -> str:
        return f"{self.registry}/{self.repository}"

    def _push(self, image_id: str, name: str) -> NamePush:
        return push_name(self.daemon, self.client, image_id, self.remote, self.repository,
                         name, self.policy, self.say, self.sleep)

    def _failed(self, exc: PublishError) -> None:
        if exc.kind == "auth":
            self.stop = auth_message(self.registry, exc)

    def canonical(self, c: Candidate, img: ImagePush) -> None:
        """Push ``img``'s tag and verify it: the registry's digest among the image's
        RepoDigests, and for a multi-platform tag its index (``_verify_index``)."""
        if self.stop:
            img.push.error = self.stop
            return
        self.say(f"pushing {img.ref} ({img.image_size / 1e6:.0f} MB in the engine)")
        try:
            img.push = self._push(c.image_id, c.spec.tag)
        except PublishError as exc:
            img.push.status, img.push.error, img.status = "failed", str(exc), "failed"
            self.say(f"  FAILED: {exc}")
            self._failed(exc)
            return
        img.digest = img.push.digest
        wanted = f"{self.remote}@{img.digest}"
        digests = self.daemon.repo_digests(c.image_id)
        img.local_repo_digest = wanted if wanted in digests else ""
        if not img.local_repo_digest:
            img.push.status, img.status = "failed", "failed"
            img.push.error = (f"{img.ref}: registry digest {img.digest} is not among the "
                              f"image's RepoDigests {digests}")
            self.say(f"  FAILED: {img.push.error}")
            return
        if c.spec.platforms and len(c.spec.platforms) > 1:
            try:
                img.platforms = _verify_index(self.client, self.registry, self.repository,
                                              c, img, self.say)
            except IndexMismatch as exc:
                img.push.status, img.status = "failed", "failed"
                img.push.error = f"{img.ref}: {exc}"
                self.say(f"  FAILED: {img.push.error}")
                return
        img.size = img.push.size
        img.status = "pushed"
        self.say(f"  {img.digest} verified; {img.push.layers_pushed} layer(s) uploaded, "
                 f"{img.push.layers_existed} already there; {img.size / 1e6:.0f} MB in the "
                 f"registry; {img.push.seconds:.1f} s")

    def aliases(self, c: Candidate, img: ImagePush) -> None:
        """Move ``img``'s aliases, only when its tag is pushed and verified; each must
        serve the tag's digest. ``img`` becomes ``partial`` when an alias did not move."""
        for i, alias in enumerate(img.aliases):
            if self.stop or img.status != "pushed":
                alias.error = self.stop or f"not moved: {img.tag} was not pushed"
                continue
            try:
                alias = img.aliases[i] = self._push(c.image_id, alias.name)
            except PublishError as exc:
                alias.status, alias.error = "failed", str(exc)
                self.say(f"  alias {alias.ref} FAILED: {exc}")
                self._failed(exc)
                continue
            if alias.digest != img.digest:
                alias.status = "failed"
                alias.error = f"alias digest {alias.digest} differs from {img.tag}'s {img.digest}"
                self.say(f"  alias {alias.ref} FAILED: {alias.error}")
                continue
            self.say(f"  alias {alias.ref} -> {img.digest[:19]} verified")
        if img.status == "pushed" and any(a.status != "pushed" for a in img.aliases):
            img.status = "partial"


def _verify_index(client: Registry, registry: str, repository: str, c: Candidate,
                  img: ImagePush, say: Callable[[str], None]) -> dict[str, str]:
    """A tag pushed as an OCI image index must hold exactly the platforms its group
    declares, each manifest verified by digest (skopeo, ``indexcheck``); returns platform
    -> manifest digest ({} for a single-platform image). Raises ``IndexMismatch``, and
    ``PublishError`` when the pushed digest itself cannot be read."""
    _, _, media = client.manifest(repository, img.digest)
    if media.split(";")[0].strip() not in INDEX_TYPES:
        return {}  # built for one platform (--platform, or an engine without indexes)
    found = verify_index(f"{client.host}/{api_repository(registry, repository)}", img.digest,
                         c.spec.platforms, skopeo_runner(client))
    say(f"  index {img.digest[:19]}: " + ", ".join(f"{p.platform} {p.digest[:19]}" for p in found)
        + " verified")
    return {p.platform: p.digest for p in found}

