"""A real registry process for the integration and fault tests: Debian's
`docker-registry` (distribution 2.8), started where the engine under test reaches it and
this process too (the host's engine: 127.0.0.1 and a free port, storage in a temp dir;
the modern engine: inside its container, on its address, storage in its shared
directory); `stop()` and `start()` keep its storage, `kill()` ends it at once as a crash
would."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path

import docker
import requests

from tests.integration import engines

USER, PASSWORD = "pusher", "Zq7-not-a-real-s3cret-91x"
V2 = "application/vnd.docker.distribution.manifest.v2+json"
# What a manifest HEAD accepts: the classic store pushes a v2 manifest, the containerd
# store an OCI index (the image and its provenance attestation).
ACCEPT = ", ".join(["application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json", V2])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """A `docker-registry serve` process where ``engine`` reaches it (see the module
    docstring); ``host`` is its address for the engine and for this process alike;
    `stop()` and `start()` keep its storage."""

    def __init__(self, root: Path, htpasswd: Path | None = None,
                 engine: engines.TestEngine | None = None):
        self.root = root
        self.engine = engine if engine is not None and engine.modern else None
        if self.engine is None:
            self.port = _free_port()
            self.host = f"127.0.0.1:{self.port}"
            listen = self.host
        else:  # a port of the engine container's own namespace
            self.port = 20000 + uuid.uuid4().int % 20000
            self.host = f"{self.engine.address}:{self.port}"
            listen = f"0.0.0.0:{self.port}"
        self.storage = root / "storage"
        auth = (f"auth:\n  htpasswd: {{realm: stagecraft-test, path: {self._seen(htpasswd)}}}\n"
                if htpasswd else "")
        self.config = root / "config.yml"
        self.config.write_text(
            "version: 0.1\nlog: {level: warn}\n"
            f"storage:\n  filesystem: {{rootdirectory: {self._seen(self.storage)}}}\n"
            f"http:\n  addr: {listen}\n  secret: stagecraft-test\n{auth}")
        self.proc: subprocess.Popen | None = None
        self.pid = ""
        self.auth = (USER, PASSWORD) if htpasswd else None

    def _seen(self, path: Path) -> str:
        """``path`` as the registry process sees it."""
        if self.engine is None:
            return str(path)
        return f"/stagecraft/share/{path.relative_to(self.engine.share)}"

    def _container(self):
        return docker.from_env().containers.get(self.engine.container)

    def start(self) -> None:
        if self.engine is None:
            log = open(self.root / "registry.log", "ab")  # noqa: SIM115 - lives with the process
            self.proc = subprocess.Popen(["docker-registry", "serve", str(self.config)],
                                         stdout=log, stderr=log)
        else:  # started in the engine's container, its pid kept to stop exactly it
            rc, out = self._container().exec_run(
                ["sh", "-c", f"docker-registry serve {self._seen(self.config)} "
                             f">>{self._seen(self.root / 'registry.log')} 2>&1 & echo $!"])
            assert rc == 0, out
            self.pid = out.decode().strip()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                requests.get(f"http://{self.host}/v2/", timeout=1)
                return
            except requests.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError(f"docker-registry did not answer on {self.host}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        if self.pid:
            self._container().exec_run(["kill", self.pid])
            self.pid = ""

    def tags(self, repo: str) -> list[str]:
        r = requests.get(f"http://{self.host}/v2/{repo}/tags/list", auth=self.auth, timeout=10)
        return [] if r.status_code == 404 else sorted(r.json().get("tags") or [])

    def catalog(self) -> list[str]:
        r = requests.get(f"http://{self.host}/v2/_catalog", auth=self.auth, timeout=10)
        return r.json().get("repositories") or []

    def digest(self, repo: str, ref: str) -> str:
        r = requests.head(f"http://{self.host}/v2/{repo}/manifests/{ref}",
                          headers={"Accept": ACCEPT}, auth=self.auth, timeout=10)
        assert r.status_code == 200, f"{repo}:{ref}: HTTP {r.status_code}"
        return r.headers["Docker-Content-Digest"]

    def blobs(self) -> int:
        return len(list((self.storage / "docker/registry/v2/blobs").glob("sha256/*/*/data")))

    def kill(self) -> None:
        """End the registry with SIGKILL, as a crash would (no graceful stop)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.pid:
            self._container().exec_run(["kill", "-KILL", self.pid])
            self.pid = ""

    def signal(self, sig: str) -> None:
        """Send ``sig`` (``STOP``, ``CONT``: a hung registry and its return)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(getattr(__import__("signal"), f"SIG{sig}"))
        if self.pid:
            self._container().exec_run(["kill", f"-{sig}", self.pid])
