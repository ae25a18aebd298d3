"""Which docker client reaches BuildKit on this host, and the command line of one build
through it.

BuildKit is reached either through ``docker buildx build`` (any client with the buildx
plugin) or a classic client (< 23) with ``DOCKER_BUILDKIT=1`` and the daemon's embedded
BuildKit. Docker CLI 23+ without buildx refuses BuildKit builds ("BuildKit is enabled but
the buildx component is missing"), so it is skipped. ``detect_builder`` tries every
``docker`` on PATH; ``STAGECRAFT_DOCKER`` names one client to use.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .capabilities import parse_buildx_inspect
from .errors import InputError

VERSION_RE = re.compile(r"^\d+\.\d+")  # what `docker version --format {{.Client.Version}}` prints


@dataclass(frozen=True)
class Builder:
    """A working BuildKit path: ``client`` (docker CLI path), ``argv`` before the build
    options (``["buildx", "build", "--load", "--provenance=false"]`` or ``["build"]``) and
    the extra ``env``. buildx attaches a provenance attestation by default where the engine
    can (the containerd image store), which makes every stage image an image index: stage
    images are intermediate, so they stay plain images (one manifest per platform) on every
    engine, and a tag is an index only when it holds several platforms."""

    client: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    version: str

    def describe(self) -> str:
        """One line: which client and how it reaches BuildKit."""
        how = "buildx" if self.argv[0] == "buildx" else "DOCKER_BUILDKIT=1"
        return f"{self.client} {self.version} ({how})"


def _clients() -> list[str]:
    forced = os.environ.get("STAGECRAFT_DOCKER")
    if forced:
        return [forced]
    seen: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/usr/local/bin"]:
        p = Path(d) / "docker"
        if p.is_file() and os.access(p, os.X_OK):
            real = str(p.resolve())
            if real not in [str(Path(s).resolve()) for s in seen]:
                seen.append(str(p))
    return seen


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def detect_builder() -> Builder:
    """The first docker client on this host that builds with BuildKit.

    Raises ``InputError`` (exit 2) with what to do when none does.
    """
    tried = []
    forced = os.environ.get("STAGECRAFT_DOCKER")
    for client in _clients():
        try:
            version = _run([client, "version", "--format", "{{.Client.Version}}"]).stdout.strip()
            if not VERSION_RE.match(version):  # /bin/true, a script, another tool: not docker
                tried.append(f"{client} (does not answer `version` as a docker client: "
                             f"{version[:60]!r})")
                continue
            buildx = _run([client, "buildx", "version"])
            if buildx.returncode == 0 and "buildx" in buildx.stdout:
                return Builder(client, ("buildx", "build", "--load", "--provenance=false"), (), version)
            major = int(version.split(".")[0]) if version[:1].isdigit() else 0
            if 18 <= major < 23:
                return Builder(client, ("build",), (("DOCKER_BUILDKIT", "1"),), version)
            tried.append(f"{client} {version or '?'} (no buildx plugin)")
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            tried.append(f"{client} ({exc})")
    if forced:
        raise InputError.one(f"STAGECRAFT_DOCKER={forced[:200]}", "not a docker client that "
                             f"builds with BuildKit ({'; '.join(tried)})",
                             "name a docker CLI with the buildx plugin (or one older than 23), "
                             "or unset it to search PATH")
    raise InputError.one("docker", "no docker client here can build with BuildKit"
                         + (f" (tried {', '.join(tried)})" if tried else " (none on PATH)"),
                         "install the buildx plugin (docker-buildx-plugin), or a docker CLI < 23")



def buildx_facts(builder: Builder) -> tuple[str, dict[str, str]]:
    """What ``docker buildx version`` and ``docker buildx inspect`` say of ``builder``'s
    buildx: (its version, ``parse_buildx_inspect``'s fields); ("", {}) for a classic
    client."""
    if builder.argv[0] != "buildx":
        return "", {}
    env = dict(builder.env)
    words = _run([builder.client, "buildx", "version"], env).stdout.split()
    version = words[1] if len(words) > 1 else ""
    return version, parse_buildx_inspect(_run([builder.client, "buildx", "inspect"], env).stdout)


def build_argv(builder: Builder, dockerfile: Path, context: Path, iidfile: Path, *,
               secrets: dict[str, Path], build_args: dict[str, str],
               extra_args: Iterable[str], source_date_epoch: int, layout: Path | None,
               provenance: bool, metadata: Path, rewrite_timestamps: bool = False) -> list[str]:
    """The command line of one BuildKit build (``Engine.build`` documents the options).

    ``layout``: export to that OCI layout directory instead of loading into the engine,
    with ``rewrite-timestamp=true`` when ``rewrite_timestamps`` and ``source_date_epoch``
    (seconds; 0: none) is set, and BuildKit's minimal SLSA provenance when
    ``provenance``. ``metadata``: buildx's
    metadata file (a classic client has none). A build argument whose value is the
    environment's own is passed by name only. Pure but for reading ``os.environ``.
    """
    head = list(builder.argv)
    if layout is not None:
        opts = f"type=oci,dest={layout},tar=false"
        if source_date_epoch and rewrite_timestamps:
            opts += ",rewrite-timestamp=true"
        head = [a for a in head if a != "--load"] + ["--output", opts]
        if provenance:
            head = [("--provenance=mode=min" if a == "--provenance=false" else a) for a in head]
    argv = [builder.client, *head, "--progress=plain", "-f", str(dockerfile),
            "--iidfile", str(iidfile)]
    if source_date_epoch:
        argv += ["--build-arg", f"SOURCE_DATE_EPOCH={int(source_date_epoch)}"]
    if builder.argv[0] == "buildx":
        argv += ["--metadata-file", str(metadata)]
    for sid, src in sorted(secrets.items()):
        argv += ["--secret", f"id={sid},src={src}"]
    for k, v in sorted(build_args.items()):
        # A value that came from the environment (proxies with credentials) is passed
        # by name: the client reads it from its environment, and it stays out of the
        # argv (visible in ps) and the log.
        argv += ["--build-arg", k if os.environ.get(k) == v else f"{k}={v}"]
    argv += list(extra_args)
    argv.append(str(context))
    return argv
