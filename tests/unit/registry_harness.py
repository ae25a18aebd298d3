"""Real registries for unit tests, without Docker: Debian's ``docker-registry``
(distribution 2.8) on a free 127.0.0.1 port, open, with htpasswd (bcrypt) basic auth, or
with token auth behind ``TokenServer``: the token server of distribution's spec
(https://distribution.github.io/distribution/spec/auth/token/), which checks Basic
credentials and issues RS256 JWTs that the registry verifies against its certificate.

Images are put in over the registry's HTTP API (``LocalRegistry.image``/``put``), as a
daemon's push would; this file is test setup, not a client stagecraft uses.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import socket
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import requests

USER, SECRET = "pusher", "pw-never-shown-7781"
SERVICE = "stagecraft-test-registry"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Issues registry tokens at ``http://127.0.0.1:PORT/token`` to USER/SECRET (Basic),
    for the scope asked; refuses anything else with 401. ``cert`` is the PEM file the
    registry trusts; ``requests`` counts the token requests it answered."""

    def __init__(self, root: Path):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stagecraft test tokens")])
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(hours=1))
                .not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(self._key, hashes.SHA256()))
        self._der = cert.public_bytes(serialization.Encoding.DER)
        self.cert = root / "token.crt"
        self.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                query = parse_qs(urlparse(self.path).query)
                good = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
                if self.headers.get("Authorization") != good:
                    body = b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'
                    self.send_response(401)
                else:
                    server.requests += 1
                    token = server.mint(query.get("scope", []))
                    body = json.dumps({"token": token, "access_token": token,
                                       "expires_in": 300}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.realm = f"http://127.0.0.1:{self._http.server_address[1]}/token"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def mint(self, scopes: list[str]) -> str:
        """A signed token granting ``scopes`` (``repository:NAME:pull,push`` each)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        access = []
        for scope in scopes:
            kind, name, actions = scope.split(":", 2) if scope.count(":") >= 2 else ("", "", "")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self._der).decode()]}
        claims = {"iss": "stagecraft-test", "sub": USER, "aud": SERVICE, "exp": now + 300,
                  "nbf": now - 60, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        sig = self._key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing}.{_b64url(sig)}"

    def stop(self) -> None:
        self._http.shutdown()


class LocalRegistry:
    """``docker-registry serve`` on a free loopback port, storage under ``root``. ``auth``:
    "" (open), "htpasswd" (USER/SECRET) or "token" (``tokens`` issues them). ``start()``
    waits until it answers; ``stop()`` keeps the storage."""

    def __init__(self, root: Path, auth: str = "", tokens: TokenServer | None = None):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.port = root, free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.tokens = tokens
        extra = ""
        if auth == "htpasswd":
            line = subprocess.run(["htpasswd", "-Bbn", USER, SECRET], check=True,
                                  capture_output=True, text=True).stdout
            (root / "htpasswd").write_text(line)
            extra = f"auth:\n  htpasswd: {{realm: test, path: {root / 'htpasswd'}}}\n"
        elif auth == "token":
            assert tokens is not None
            extra = (f"auth:\n  token: {{realm: '{tokens.realm}', service: {SERVICE}, "
                     f"issuer: stagecraft-test, rootcertbundle: {tokens.cert}}}\n")
        self._auth = auth
        self.config = root / "config.yml"
        self.config.write_text(
            "version: 0.1\nlog: {level: error}\n"
            f"storage:\n  filesystem: {{rootdirectory: {root / 'storage'}}}\n"
            f"http:\n  addr: {self.host}\n  secret: test\n{extra}")
        self.proc: subprocess.Popen | None = None

    def start(self) -> LocalRegistry:
        log = open(self.root / "registry.log", "ab")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.config)],
                                     stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                requests.get(f"http://{self.host}/v2/", timeout=1)
                return self
            except requests.ConnectionError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"docker-registry did not answer on {self.host}: "
                           f"{(self.root / 'registry.log').read_text()[-500:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def _headers(self, repo: str) -> dict[str, str]:
        if self._auth == "htpasswd":
            return {"Authorization": "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()}
        if self._auth == "token" and self.tokens is not None:
            return {"Authorization": "Bearer " + self.tokens.mint([f"repository:{repo}:pull,push"])}
        return {}

    def _blob(self, repo: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        r = requests.post(f"http://{self.host}/v2/{repo}/blobs/uploads/",
                          headers=self._headers(repo), timeout=10)
        r.raise_for_status()
        r = requests.put(r.headers["Location"], params={"digest": digest}, data=data, timeout=10,
                         headers={**self._headers(repo), "Content-Type": "application/octet-stream"})
        r.raise_for_status()
        return digest

    def put(self, repo: str, ref: str, doc: dict) -> str:
        """Upload manifest or index ``doc`` as ``repo:ref``; returns its digest."""
        body = json.dumps(doc).encode()
        r = requests.put(f"http://{self.host}/v2/{repo}/manifests/{ref}", data=body, timeout=10,
                         headers={**self._headers(repo), "Content-Type": doc["mediaType"]})
        assert r.status_code == 201, r.text
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def image(self, repo: str, ref: str, arch: str = "amd64") -> tuple[str, dict]:
        """An image of one (empty) layer for ``linux/<arch>``: ``(digest, manifest)``."""
        config = json.dumps({"architecture": arch, "os": "linux",
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        layer = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00"
        doc = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                          "digest": self._blob(repo, config), "size": len(config)},
               "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                           "digest": self._blob(repo, layer), "size": len(layer)}]}
        return self.put(repo, ref, doc), doc
