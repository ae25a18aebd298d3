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
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import requests

from . import retry
from .errors import InputError, Problem
from .expand import ImageSpec
from .indexcheck import INDEX_TYPES, IndexMismatch, skopeo_runner, verify_index
from .registry import Registry, RegistryError, api_repository, classify, loopback
from .retry import RetryPolicy
from .testing import load_record, record_path

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


# ---------------------------------------------------------------------------------------
# The daemon side.

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


class EngineDaemon:
    """``Daemon`` over an ``engine.Engine`` (the Docker SDK). The SDK reads the Docker
    config once, at ``docker.from_env()``, and sends the registry's entry (helpers
    resolved) as ``X-Registry-Auth`` with each push."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.api = engine.client.api

    def image_id(self, ref: str) -> str | None:
        return self.engine.image_id(ref)

    def tag(self, image_id: str, repository: str, tag: str) -> None:
        if not self.api.tag(image_id, repository, tag, force=True):
            raise PublishError(f"could not tag {image_id[:19]} as {repository}:{tag}")

    def push(self, repository: str, tag: str) -> Iterator[dict[str, Any]]:
        import docker.errors

        try:
            yield from self.api.push(repository, tag=tag, stream=True, decode=True,
                                     auth_config=None)
        except docker.errors.APIError as exc:
            text = str(exc.explanation or exc)
            raise PublishError(f"push of {repository}:{tag}: {text}", classify(text)) from None
        except requests.exceptions.ConnectionError:
            raise PublishError(f"push of {repository}:{tag}: connection to the daemon reset",
                               "transient") from None

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


# ---------------------------------------------------------------------------------------
# The run.

@dataclass
class TestGate:
    """The record an image was allowed through on: ``record`` path, ``sha256`` of its
    bytes, ``passed``, ``counts`` and ``recorded`` (Unix time)."""

    __test__ = False  # not a pytest class

    record: str
    sha256: str
    passed: bool
    counts: dict[str, int]
    recorded: float


@dataclass
class Candidate:
    """An image allowed to go out: ``spec``, local ``ref`` and ``image_id``, its gate."""

    spec: ImageSpec
    ref: str
    image_id: str
    test: TestGate


@dataclass
class NamePush:
    """One reference pushed: ``name`` (tag or alias), ``digest`` the daemon reported,
    ``registry_digest``, ``verified``, ``attempts``, layers ``pushed``/``existed``,
    ``size`` (bytes in the registry: config + compressed layers), ``seconds`` (wall
    time) and ``error``."""

    name: str
    ref: str
    status: str = "not pushed"
    digest: str = ""
    registry_digest: str = ""
    verified: bool = False
    attempts: int = 0
    layers_pushed: int = 0
    layers_existed: int = 0
    size: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass
class ImagePush:
    """One image of the run manifest: ``size`` is bytes in the registry (compressed
    config + layers), ``image_size`` bytes in the engine (uncompressed). ``platforms``
    maps each platform of an OCI image index to its manifest digest, verified."""

    tag: str
    ref: str
    image_id: str
    status: str
    digest: str
    size: int
    image_size: int
    local_repo_digest: str
    aliases: list[NamePush]
    push: NamePush
    test: TestGate
    labels: dict[str, str]
    registry: str
    platforms: dict[str, str] = field(default_factory=dict)


@dataclass
class RunManifest:
    """What one push run did; written to ``<state>/runs/<run>.json``."""

    run: str
    registry: str
    repository: str
    started: str
    seconds: float = 0.0
    ok: bool = False
    images: list[ImagePush] = field(default_factory=list)
    path: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON-ready data (schema 1)."""
        return {"schema": 1, **asdict(self)}


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
        record = load_record(state_dir, image_id)
        short = image_id.split(":")[-1][:12]
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


_DIGEST_STATUS = re.compile(r"^\S+: digest: (sha256:[0-9a-f]{64}) size: \d+$")


def _push_once(daemon: Daemon, remote: str, name: str, progress: Callable[[str], None]
               ) -> tuple[str, int, int]:
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
        digest, pushed, existed = _push_once(daemon, remote, name, lambda s: say(f"  {s}"))
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


def run_id(now: datetime | None = None) -> str:
    """UTC timestamp naming a run: ``20260130T120501.123456Z`` (sortable)."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S.%fZ")


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
    remote = f"{registry}/{repository}"
    client = registry_client or Registry(registry, daemon.credentials(registry) or {},
                                         daemon.insecure(registry))
    images: list[ImagePush] = []
    stop = ""
    for c in candidates:
        labels = daemon.labels(c.image_id)
        img = ImagePush(tag=c.spec.tag, ref=f"{remote}:{c.spec.tag}", image_id=c.image_id,
                        status="not pushed", digest="", size=0, image_size=daemon.size(c.image_id),
                        local_repo_digest="",
                        aliases=[NamePush(a, f"{remote}:{a}") for a in c.spec.aliases],
                        push=NamePush(c.spec.tag, f"{remote}:{c.spec.tag}"), test=c.test,
                        labels={k: v for k, v in labels.items()
                                if k.startswith(("org.opencontainers.image.revision",
                                                 "org.opencontainers.image.source",
                                                 "io.stagecraft."))},
                        registry=registry)
        images.append(img)
    run.images = images
    # Canonical tags first; each verified before the next phase.
    for c, img in zip(candidates, images, strict=True):
        if stop:
            img.push.error = stop
            continue
        say(f"pushing {img.ref} ({img.image_size / 1e6:.0f} MB in the engine)")
        try:
            img.push = push_name(daemon, client, c.image_id, remote, repository, c.spec.tag,
                                 policy, say, sleep)
        except PublishError as exc:
            img.push.status, img.push.error, img.status = "failed", str(exc), "failed"
            say(f"  FAILED: {exc}")
            if exc.kind == "auth":
                stop = auth_message(registry, exc)
            continue
        img.digest = img.push.digest
        wanted = f"{remote}@{img.digest}"
        digests = daemon.repo_digests(c.image_id)
        img.local_repo_digest = wanted if wanted in digests else ""
        if not img.local_repo_digest:
            img.push.status, img.status = "failed", "failed"
            img.push.error = (f"{img.ref}: registry digest {img.digest} is not among the "
                              f"image's RepoDigests {digests}")
            say(f"  FAILED: {img.push.error}")
            continue
        if c.spec.platforms and len(c.spec.platforms) > 1:
            try:
                img.platforms = _verify_index(client, registry, repository, c, img, say)
            except IndexMismatch as exc:
                img.push.status, img.status = "failed", "failed"
                img.push.error = f"{img.ref}: {exc}"
                say(f"  FAILED: {img.push.error}")
                continue
        img.size = img.push.size
        img.status = "pushed"
        say(f"  {img.digest} verified; {img.push.layers_pushed} layer(s) uploaded, "
            f"{img.push.layers_existed} already there; {img.size / 1e6:.0f} MB in the registry; "
            f"{img.push.seconds:.1f} s")
    # Aliases: only on images whose canonical tag is pushed and verified.
    for c, img in zip(candidates, images, strict=True):
        for i, alias in enumerate(img.aliases):
            if stop or img.status != "pushed":
                alias.error = stop or f"not moved: {img.tag} was not pushed"
                continue
            try:
                alias = img.aliases[i] = push_name(daemon, client, c.image_id, remote,
                                                   repository, alias.name, policy, say, sleep)
            except PublishError as exc:
                alias.status, alias.error = "failed", str(exc)
                say(f"  alias {alias.ref} FAILED: {exc}")
                if exc.kind == "auth":
                    stop = auth_message(registry, exc)
                continue
            if alias.digest != img.digest:
                alias.status = "failed"
                alias.error = f"alias digest {alias.digest} differs from {img.tag}'s {img.digest}"
                say(f"  alias {alias.ref} FAILED: {alias.error}")
                continue
            say(f"  alias {alias.ref} -> {img.digest[:19]} verified")
        if img.status == "pushed" and any(a.status != "pushed" for a in img.aliases):
            img.status = "partial"
    run.seconds = round(time.monotonic() - t0, 2)
    run.ok = bool(images) and all(i.status == "pushed" for i in images)
    run.error = stop
    write_run(run, state_dir)
    return run


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


def write_run(run: RunManifest, state_dir: Path) -> Path:
    """Write the run manifest to ``<state>/runs/<run>.json``; returns the path."""
    path = state_dir / "runs" / f"{run.run}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    run.path = str(path)
    path.write_text(json.dumps(run.to_json(), indent=2, sort_keys=True) + "\n")
    return path
