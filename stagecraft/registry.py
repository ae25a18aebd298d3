"""The one path to registries that the daemon does not take: skopeo.

The daemon pushes (``publish``); everything stagecraft itself reads from a registry, a
manifest by tag or digest, the tags of a repository, an image index and its manifests
(``indexcheck``), goes through ``run_skopeo`` here: Debian's ``skopeo`` (1.9+), the
command-line client of containers/image (https://github.com/containers/skopeo), which
handles the Docker Registry HTTP API v2, its Basic and Bearer (token server) challenges
and Docker Hub's quirks, so stagecraft keeps no HTTP client of its own.

Credentials: ``Registry`` is given the daemon's own (the Docker SDK's resolved entry:
``username``/``password`` or ``IdentityToken``) and hands them to skopeo in an auth file
(containers-auth.json(5)) written for the one call: mode 0600 in a 0700 directory under
the run's scratch directory (``tempfile``, see ``scratch``), removed when skopeo ends.
They are never on a command line, in a message or in a ``repr``. ``DOCKER_CONFIG``
points skopeo at that directory too, so it does not fall back to other credentials.

TLS: ``--tls-verify=false`` (HTTPS without verification, then plain HTTP) only where the
daemon itself speaks plain HTTP: a loopback registry (``loopback``) or one in the
daemon's insecure list (``publish.EngineDaemon.insecure``).

Failures: skopeo exits 1 for every failure, so the kind comes from its message
(``classify``): ``auth``, ``transient`` (retried by the caller) or ``fatal``. A call is
bounded in time (``--command-timeout``, and the process killed a little after) and in
output (``MAX_OUTPUT_BYTES``).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import BuildError

DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
TIMEOUT_S = 60.0  # one skopeo call, connection and transfer
MAX_OUTPUT_BYTES = 8 << 20  # a manifest is at most 4 MiB in distribution; tags lists less

_AUTH_RE = re.compile(r"unauthori[sz]ed|authentication required|denied|forbidden|"
                      r"no basic auth credentials|incorrect username or password|"
                      r"invalid username/password|\b401\b|\b403\b", re.IGNORECASE)
_TRANSIENT_RE = re.compile(r"\b5\d\d\b|connection reset|connection refused|broken pipe|"
                           r"timeout|timed out|deadline exceeded|unexpected eof|\beof\b|"
                           r"temporarily unavailable|too many requests|\b429\b|"
                           r"service unavailable|bad gateway|no route to host", re.IGNORECASE)
_MISSING_RE = re.compile(r"manifest unknown|name unknown|\b404\b", re.IGNORECASE)
_MSG_RE = re.compile(r'level=\w+ msg="((?:[^"\\]|\\.)*)"')
_IMAGE_NAME_PREFIX = re.compile(r'^Error parsing image name "[^"]*": ')


class RegistryError(BuildError):
    """A registry call or a push failed for good (exit status 1). ``kind`` is ``auth``,
    ``transient`` (worth retrying; retries exhausted when it reaches the user),
    ``digest`` (the registry disagrees with a digest) or ``fatal``. ``detail`` is the
    registry's (or skopeo's) own text, without the reference in front."""

    def __init__(self, message: str, kind: str = "fatal", detail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.detail = detail or message


def classify(message: str) -> str:
    """``auth``, ``transient`` or ``fatal`` for an error text of the daemon, the registry
    or skopeo. Authentication wins over transience: ``401 ... timeout`` is not retried."""
    if _AUTH_RE.search(message):
        return "auth"
    if _TRANSIENT_RE.search(message):
        return "transient"
    return "fatal"


def loopback(host: str) -> bool:
    """True when registry ``host`` (``HOST[:PORT]``, ``[::1]:5000``) is this machine:
    ``localhost`` or a loopback address (127.0.0.0/8, ::1). Docker speaks plain HTTP to
    such a registry without an ``insecure-registries`` entry, and so does stagecraft."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def api_repository(registry: str, repository: str) -> str:
    """Repository name as the registry knows it (Docker Hub prefixes ``library/``)."""
    if registry in DOCKER_HUB and "/" not in repository:
        return f"library/{repository}"
    return repository


def auth_entry(credentials: Mapping[str, Any]) -> dict[str, str]:
    """The containers-auth.json(5) entry for the Docker SDK's resolved credentials:
    ``{"auth": base64("user:password")}`` and/or ``{"identitytoken": ...}`` (an OAuth
    refresh token of ``docker login`` with an identity provider); {} for none."""
    out: dict[str, str] = {}
    user, password = credentials.get("username"), credentials.get("password")
    if user and password is not None:
        out["auth"] = base64.b64encode(f"{user}:{password}".encode()).decode()
    token = credentials.get("IdentityToken") or credentials.get("identitytoken")
    if token:
        out["identitytoken"] = str(token)
    return out


def skopeo_message(stderr: bytes) -> str:
    """skopeo's own message from its stderr: the ``msg`` of its last logrus line (without
    ``Error parsing image name "...": ``), else the last line; "" for none."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    if not lines:
        return ""
    found = _MSG_RE.search(lines[-1])
    text = re.sub(r"\\(.)", r"\1", found.group(1)) if found else lines[-1]
    return _IMAGE_NAME_PREFIX.sub("", text)[:500]


def write_authfile(directory: Path, host: str, credentials: Mapping[str, Any]) -> Path:
    """``directory/auth.json`` (containers-auth.json(5)) holding ``credentials`` for
    ``host`` (no entry for none), created with mode 0600 whatever the umask; returns
    its path. Raises ``OSError`` (``FileExistsError`` when it is already there)."""
    entry = auth_entry(credentials)
    path = directory / "auth.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"auths": {host: entry} if entry else {}}, out)
    return path


def run_skopeo(args: list[str], tls_verify: bool = True,
               credentials: Mapping[str, Any] | None = None, auth_host: str = "",
               timeout_s: float = TIMEOUT_S) -> bytes:
    """stdout of ``skopeo ARGS`` (``["inspect", "--raw", "docker://..."]``, ``["list-tags",
    ...]``): the one place stagecraft runs skopeo. ``credentials`` (a Docker SDK entry,
    {} for anonymous) go to skopeo for ``auth_host`` through a temporary auth file; with
    None skopeo looks them up itself (the Docker config). Raises ``RegistryError``: kind
    from skopeo's message (``classify``), ``transient`` when it ran out of
    ``timeout_s`` seconds, ``fatal`` when skopeo is missing or answers over
    ``MAX_OUTPUT_BYTES``."""
    exe = shutil.which("skopeo")
    if exe is None:
        raise RegistryError("skopeo is not installed (apt-get install skopeo)", "fatal")
    argv = [exe, f"--command-timeout={max(int(timeout_s), 1)}s", args[0],
            f"--tls-verify={'true' if tls_verify else 'false'}"]
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_AUTH_FILE"}
    with tempfile.TemporaryDirectory(prefix="skopeo-auth-") as home:  # mode 0700
        if credentials is not None:
            argv.append(f"--authfile={write_authfile(Path(home), auth_host, credentials)}")
            env["DOCKER_CONFIG"] = home  # no config.json there: no other credentials
        try:
            proc = subprocess.run([*argv, *args[1:]], capture_output=True, env=env,
                                  timeout=timeout_s + 10, check=False)
        except subprocess.TimeoutExpired:
            raise RegistryError(f"skopeo {args[0]} {args[-1]}: timed out after "
                                f"{timeout_s:.0f} s", "transient", "timed out") from None
    if proc.returncode != 0:
        text = _redact(skopeo_message(proc.stderr) or f"exit status {proc.returncode}",
                       credentials)
        raise RegistryError(f"skopeo {args[0]} {args[-1]}: {text}", classify(text), text)
    if len(proc.stdout) > MAX_OUTPUT_BYTES:
        raise RegistryError(f"skopeo {args[0]} {args[-1]}: answer over "
                            f"{MAX_OUTPUT_BYTES} bytes", "fatal")
    return proc.stdout


def _redact(text: str, credentials: Mapping[str, Any] | None) -> str:
    for key in ("password", "IdentityToken", "identitytoken"):
        secret = (credentials or {}).get(key)
        if secret:
            text = text.replace(str(secret), "***")
    return text


def media_type(body: bytes) -> str:
    """The ``mediaType`` a manifest or index document declares; for an OCI document
    without one, ``application/vnd.oci.image.index.v1+json`` when it lists
    ``manifests``, else the OCI manifest type; "" for what is not JSON."""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(doc, dict):
        return ""
    if doc.get("mediaType"):
        return str(doc["mediaType"])
    if "manifests" in doc:
        return "application/vnd.oci.image.index.v1+json"
    return "application/vnd.oci.image.manifest.v1+json"


class Registry:
    """What stagecraft reads from one registry (``HOST[:PORT]``), through skopeo.

    ``credentials`` is the Docker SDK's resolved entry (the daemon's: ``username``/
    ``password`` or ``IdentityToken``), {} for anonymous, None to let skopeo read the
    Docker config itself. ``insecure``: plain HTTP allowed (see the module docstring).
    Methods raise ``RegistryError`` (kind ``auth``, ``transient``, ``digest`` or
    ``fatal``); no message and no ``repr`` holds a credential.
    """

    def __init__(self, registry: str, credentials: Mapping[str, Any] | None = None,
                 insecure: bool = False, timeout_s: float = TIMEOUT_S):
        self.registry = registry
        self.host = "docker.io" if registry in DOCKER_HUB else registry
        self._credentials = dict(credentials) if credentials is not None else None
        self.insecure = insecure
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never the credentials
        return f"Registry({self.registry!r}, insecure={self.insecure})"

    def skopeo(self, args: list[str]) -> bytes:
        """stdout of ``skopeo ARGS`` with this registry's TLS setting and credentials."""
        return run_skopeo(args, not self.insecure, self._credentials, self.host, self.timeout_s)

    def inspect(self, args: list[str]) -> bytes:
        """stdout of ``skopeo inspect ARGS`` (``["--raw", "docker://..."]``): the runner
        ``indexcheck.verify_index`` takes."""
        return self.skopeo(["inspect", *args])

    def reference(self, repository: str, reference: str = "") -> str:
        """``docker://HOST/REPOSITORY[:TAG|@DIGEST]`` as skopeo takes it."""
        ref = f"docker://{self.host}/{api_repository(self.registry, repository)}"
        if not reference:
            return ref
        return f"{ref}@{reference}" if reference.startswith("sha256:") else f"{ref}:{reference}"

    def manifest(self, repository: str, reference: str) -> tuple[str, bytes, str]:
        """``(digest, body, media type)`` of ``repository:reference`` (a tag or a
        ``sha256:`` digest), as served: the digest is the SHA-256 of the bytes, which
        must equal a digest asked for (else kind ``digest``). A reference the registry
        does not hold is kind ``fatal``."""
        try:
            body = self.inspect(["--raw", self.reference(repository, reference)])
        except RegistryError as exc:
            sep = "@" if reference.startswith("sha256:") else ":"
            if exc.kind == "fatal" and _MISSING_RE.search(exc.detail):
                raise RegistryError(f"{self.registry}/{repository}{sep}{reference} is not in "
                                    f"the registry ({exc.detail})", "fatal", exc.detail) from None
            raise RegistryError(f"{self.registry}: {exc.detail}", exc.kind, exc.detail) from None
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryError(f"{self.registry}/{repository}@{reference}: the registry "
                                f"serves bytes of {digest}", "digest")
        return digest, body, media_type(body)

    def tags(self, repository: str) -> list[str]:
        """Tags of ``repository`` (``skopeo list-tags``), sorted; [] when the registry
        does not know the repository."""
        try:
            out = self.skopeo(["list-tags", self.reference(repository)])
        except RegistryError as exc:
            if exc.kind == "fatal" and _MISSING_RE.search(exc.detail):
                return []
            raise RegistryError(f"{self.registry}: {exc.detail}", exc.kind, exc.detail) from None
        try:
            return sorted(str(t) for t in json.loads(out).get("Tags") or [])
        except (ValueError, AttributeError):
            raise RegistryError(f"{self.registry}/{repository}: skopeo list-tags gave no "
                                "tag list", "fatal") from None
