"""What the engine and BuildKit path of this host can do, from facts about them. Pure.

``EngineFacts`` holds what ``Engine.facts()`` read from the daemon (``docker version``,
``docker info``) and from ``docker buildx inspect``; ``capabilities(facts)`` says, for
each feature stagecraft may ask for, whether this path has it and, when not, why and
what to do. The reasons are the ones buildx itself gives (``Cache export is not
supported for the docker driver``, and so on: docker/buildx ``driver/docker`` features):

- buildx's ``docker`` driver, the default builder of every Docker engine, builds inside
  the engine's embedded BuildKit. Without the containerd image store it can neither
  export caches, nor build for several platforms at once, nor write OCI output, nor
  attach attestations. The containerd image store (Docker 24+, ``"features":
  {"containerd-snapshotter": true}`` in daemon.json; the default from Docker 29) turns
  all four on (https://docs.docker.com/build/builders/drivers/docker/).
- Other buildx drivers (``docker-container``, ``kubernetes``, ``remote``) run a BuildKit
  of their own and have all four.
- The classic client (Docker CLI < 23 with ``DOCKER_BUILDKIT=1``, no buildx) has none of
  them and imports only inline caches.

``check_cache_options`` turns a cache option this path cannot honour into an
``InputError`` (exit 2) before anything is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InputError

CACHE_EXPORT = "cache export"
CACHE_IMPORT = "cache import"
MULTI_PLATFORM = "multi-platform"
OCI_OUTPUT = "OCI output"
ATTESTATIONS = "attestations"

# BuildKit vendored by Docker engine releases (moby's vendor.mod of each release), for
# engines whose BuildKit does not report its own version (the docker driver reports
# ``v0.8+unknown`` on 20.10 and ``v0.0.0+unknown`` on Debian's 26.1 build).
ENGINE_BUILDKIT = {"20.10": "0.8", "23.0": "0.10", "24.0": "0.11", "25.0": "0.12",
                   "26.0": "0.13", "26.1": "0.13", "27.0": "0.14"}
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
STORE_HINT = ("the containerd image store (Docker 24+: \"features\": {\"containerd-snapshotter\": "
              "true} in daemon.json) or a builder with its own BuildKit (docker buildx create "
              "--driver docker-container)")


@dataclass(frozen=True)
class EngineFacts:
    """Facts about one engine and the BuildKit path to it.

    ``engine_version`` as the daemon reports it (``26.1.5+dfsg1``); ``containerd_store``:
    images are kept by containerd's snapshotters (``docker info``: driver-type
    ``io.containerd.snapshotter.v1``); ``path`` is ``buildx`` or ``classic``; ``driver`` the
    buildx driver of the current builder (``docker``, ``docker-container``, ...; empty on
    the classic path); ``buildkit_reported`` what ``buildx inspect`` says (may be empty or
    ``+unknown``); ``platforms`` the builder's platforms.
    """

    engine_version: str
    api_version: str = ""
    os: str = ""
    storage: str = ""
    containerd_store: bool = False
    path: str = "classic"
    client: str = ""
    buildx_version: str = ""
    driver: str = ""
    builder: str = ""
    buildkit_reported: str = ""
    platforms: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line naming the engine and its build path, for error messages:
        ``Docker 20.10.24 (BuildKit 0.8, classic builder: DOCKER_BUILDKIT=1)``."""
        bk = buildkit_version(self)[0]
        if self.path == "classic":
            how = "classic builder, no buildx"
        else:
            store = "containerd image store" if self.containerd_store else "no containerd image store"
            how = f"buildx {self.driver} driver, {store}" if self.driver == "docker" else f"buildx {self.driver} driver"
        return f"Docker {self.engine_version} (BuildKit {bk}, {how})"


@dataclass(frozen=True)
class Capability:
    """One feature: ``ok``, and ``detail`` (why not and what to do, or a note)."""

    name: str
    ok: bool
    detail: str = ""


def parse_buildx_inspect(text: str) -> dict[str, str]:
    """The fields of ``docker buildx inspect`` output that matter here: ``driver``,
    ``buildkit`` (``BuildKit version:``, ``Buildkit:`` in older buildx), ``platforms``
    (comma-separated), ``name`` (the builder). The first node's values win."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        field = {"driver": "driver", "buildkit version": "buildkit", "buildkit": "buildkit",
                 "platforms": "platforms", "name": "name"}.get(key)
        if field and field not in out:
            out[field] = value
    return out


def buildkit_version(facts: EngineFacts) -> tuple[str, str]:
    """``(version, source)`` of the BuildKit that builds: what the builder reports
    when it is a real version, else the one the engine release vendors (``source`` says
    which); ``("unknown", reason)`` when neither is known."""
    m = _VERSION_RE.match(facts.buildkit_reported or "")
    if m and (m.group(1), m.group(2)) != ("0", "0") and "unknown" not in facts.buildkit_reported:
        return facts.buildkit_reported.lstrip("v"), "reported by the builder"
    if facts.driver in ("", "docker"):
        em = _VERSION_RE.match(facts.engine_version)
        if em:
            vendored = ENGINE_BUILDKIT.get(f"{em.group(1)}.{em.group(2)}")
            if vendored:
                return vendored, f"vendored by Docker {em.group(1)}.{em.group(2)}; the engine does not report it"
    return "unknown", "neither the builder nor the engine version says"


def _full_featured(facts: EngineFacts) -> tuple[bool, str, str]:
    """``(ok, who cannot, what to do)``."""
    if facts.path == "classic":
        return False, "the classic builder (DOCKER_BUILDKIT=1)", f"use buildx with {STORE_HINT}"
    if facts.driver == "docker" and not facts.containerd_store:
        return (False, "buildx's docker driver without the containerd image store",
                f"use {STORE_HINT}")
    return True, "", ""


def capabilities(facts: EngineFacts) -> tuple[Capability, ...]:
    """Each feature of ``facts``'s build path: cache export, cache import,
    multi-platform, OCI output, attestations."""
    full, who, hint = _full_featured(facts)
    why = f"{who} cannot: {hint}"
    arches = sorted({"/".join(p.split("/")[:2]) for p in facts.platforms})
    if not full:
        multi = Capability(MULTI_PLATFORM, False, why)
    elif len(arches) > 1:
        multi = Capability(MULTI_PLATFORM, True, "platforms: " + ", ".join(facts.platforms))
    else:
        multi = Capability(MULTI_PLATFORM, True, f"only {', '.join(arches) or 'the native platform'} "
                           "runs here: other architectures need emulation (qemu-user-static "
                           "and binfmt_misc)")
    bk = _VERSION_RE.match(buildkit_version(facts)[0])
    attest_ok = full and (bk is None or (int(bk.group(1)), int(bk.group(2))) >= (0, 11))
    return (
        Capability(CACHE_EXPORT, full, "type=local and type=registry, ignore-error" if full else why),
        Capability(CACHE_IMPORT, facts.path == "buildx",
                   "type=local and type=registry" if facts.path == "buildx" else
                   f"{who} imports only inline caches: use buildx (docker-buildx)"),
        multi,
        Capability(OCI_OUTPUT, full, "docker buildx build --output type=oci" if full else why),
        Capability(ATTESTATIONS, attest_ok,
                   "SBOM and SLSA provenance (--provenance, --sbom)" if attest_ok else
                   why if not full else "BuildKit 0.11 or newer is needed"),
    )


def capability(facts: EngineFacts, name: str) -> Capability:
    """The capability called ``name`` (one of the module constants)."""
    return next(c for c in capabilities(facts) if c.name == name)


def check_cache_options(facts: EngineFacts, cache_from: str | None, cache_to: str | None) -> None:
    """Raise ``InputError`` (exit 2, before anything is built) for ``--cache-from`` or
    ``--cache-to`` (their text as given) that this engine and path cannot do, naming the
    engine and what to do."""
    full, _, hint = _full_featured(facts)
    for option, text, ok, verb in (
            ("--cache-to", cache_to, full, "export build caches"),
            ("--cache-from", cache_from, facts.path == "buildx", "import build caches")):
        if text and not ok:
            todo = hint if option == "--cache-to" else "use buildx (docker-buildx)"
            raise InputError.one(f"{option} {text}", f"{facts.describe()} cannot {verb}",
                                 f"{todo}, or leave out {option}")
