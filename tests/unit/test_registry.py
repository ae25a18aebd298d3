"""The one path to registries (stagecraft/registry.py) against real registries: Debian's
``docker-registry`` (distribution 2.8) on 127.0.0.1, once open and once with htpasswd
(bcrypt) basic auth, read through the real skopeo. No Docker daemon: the images are put
into the registry over its HTTP API by this file (``_put``), as a daemon's push would.

What the removed hand-written client was tested for is kept: credentials work, a wrong
password is an auth error that names no secret, a missing tag is fatal, an unreachable
registry is transient and bounded in time; plus what skopeo adds: tags, image indexes,
and the auth file (0600, in the scratch directory, gone after the call, never in argv).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
import requests

from stagecraft.indexcheck import INDEX_TYPES, IndexMismatch, skopeo_runner, verify_index
from stagecraft.publish import PublishError, RetryPolicy, auth_message, manifest_size, with_retries
from stagecraft.registry import Registry, RegistryError, classify, skopeo_message

USER, SECRET = "pusher", "pw-never-shown-7781"
TOOLS = ("docker-registry", "htpasswd", "skopeo")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                reason="needs docker-registry, htpasswd and skopeo "
                                       "(scripts/setup.sh installs them)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRegistry:
    """``docker-registry serve`` on a free loopback port, storage under ``root``;
    ``auth``: htpasswd basic auth for USER/SECRET. ``start()`` waits until it answers."""

    def __init__(self, root: Path, auth: bool, port: int | None = None):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.port = root, port or _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.auth = (USER, SECRET) if auth else None
        extra = ""
        if auth:
            line = subprocess.run(["htpasswd", "-Bbn", USER, SECRET], check=True,
                                  capture_output=True, text=True).stdout
            (root / "htpasswd").write_text(line)
            extra = f"auth:\n  htpasswd: {{realm: test, path: {root / 'htpasswd'}}}\n"
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
        raise RuntimeError(f"docker-registry did not answer on {self.host}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def _blob(self, repo: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        r = requests.post(f"http://{self.host}/v2/{repo}/blobs/uploads/", auth=self.auth,
                          timeout=10)
        r.raise_for_status()
        r = requests.put(r.headers["Location"], params={"digest": digest}, data=data,
                         auth=self.auth, timeout=10,
                         headers={"Content-Type": "application/octet-stream"})
        r.raise_for_status()
        return digest

    def put(self, repo: str, ref: str, doc: dict) -> str:
        """Upload manifest or index ``doc`` as ``repo:ref``; returns its digest."""
        body = json.dumps(doc).encode()
        r = requests.put(f"http://{self.host}/v2/{repo}/manifests/{ref}", data=body,
                         auth=self.auth, timeout=10, headers={"Content-Type": doc["mediaType"]})
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


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    root = tmp_path_factory.mktemp("registries")
    opened = LocalRegistry(root / "open", auth=False).start()
    locked = LocalRegistry(root / "auth", auth=True)
    try:
        locked.start()
        yield opened, locked
    finally:
        opened.stop()
        locked.stop()


# ---------------------------------------------------------------------------------------
# Manifests and tags, with and without credentials.

@pytest.mark.parametrize("which, credentials", [
    ("auth", {"username": USER, "password": SECRET}),
    ("open", {"username": USER, "password": SECRET}),  # credentials an open registry ignores
    ("open", {}),
])
def test_a_manifest_is_read_by_tag_and_by_digest(registries, which, credentials):
    reg = registries[1] if which == "auth" else registries[0]
    digest, doc = reg.image("team/r", "t")
    client = Registry(reg.host, credentials, insecure=True)
    got, body, media = client.manifest("team/r", "t")
    assert got == digest and media == "application/vnd.oci.image.manifest.v1+json"
    assert manifest_size(body) == doc["config"]["size"] + doc["layers"][0]["size"]
    assert client.manifest("team/r", digest)[0] == digest
    assert SECRET not in repr(client)


def test_a_wrong_password_is_an_auth_error_that_names_no_secret(registries):
    _, reg = registries
    reg.image("r", "t")
    client = Registry(reg.host, {"username": USER, "password": "nope-" + SECRET}, insecure=True)
    with pytest.raises(PublishError) as exc:
        client.manifest("r", "t")
    assert exc.value.kind == "auth", exc.value
    assert "authentication required" in str(exc.value) and SECRET not in str(exc.value)
    line = auth_message(reg.host, exc.value)
    assert "unauthorized: authentication required" in line and SECRET not in line


def test_no_credentials_for_a_locked_registry_is_an_auth_error(registries):
    _, reg = registries
    reg.image("r", "t")
    with pytest.raises(RegistryError) as exc:
        Registry(reg.host, {}, insecure=True).manifest("r", "t")
    assert exc.value.kind == "auth", exc.value


def test_a_missing_tag_and_a_missing_digest_are_fatal(registries):
    reg, _ = registries
    reg.image("r", "t")
    client = Registry(reg.host, {}, insecure=True)
    with pytest.raises(PublishError) as exc:
        client.manifest("r", "nope")
    assert exc.value.kind == "fatal" and f"{reg.host}/r:nope is not in the registry" in str(exc.value)
    with pytest.raises(PublishError, match="is not in the registry") as exc:
        client.manifest("r", "sha256:" + "0" * 64)
    assert exc.value.kind == "fatal"


def test_tags_are_listed_sorted_and_an_unknown_repository_has_none(registries):
    reg, locked = registries
    for tag in ("b", "a", "c"):
        reg.image("tagged", tag)
    assert Registry(reg.host, {}, insecure=True).tags("tagged") == ["a", "b", "c"]
    assert Registry(reg.host, {}, insecure=True).tags("never-pushed") == []
    locked.image("tagged", "x")
    assert Registry(locked.host, {"username": USER, "password": SECRET},
                    insecure=True).tags("tagged") == ["x"]
    with pytest.raises(RegistryError) as exc:
        Registry(locked.host, {"username": USER, "password": "bad-" + SECRET},
                 insecure=True).tags("tagged")
    assert exc.value.kind == "auth" and SECRET not in str(exc.value)


# ---------------------------------------------------------------------------------------
# An unreachable registry: transient, bounded, and retried until it answers.

def test_a_refused_connection_is_transient():
    client = Registry(f"127.0.0.1:{_free_port()}", {}, insecure=True, timeout_s=5)
    with pytest.raises(RegistryError) as exc:
        client.manifest("r", "t")
    assert exc.value.kind == "transient" and "connection refused" in str(exc.value)


def test_a_registry_that_never_answers_is_transient_within_the_timeout():
    with socket.socket() as silent:  # accepts connections (the backlog), answers nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        client = Registry(f"127.0.0.1:{silent.getsockname()[1]}", {}, insecure=True,
                          timeout_s=2)
        t0 = time.monotonic()
        with pytest.raises(RegistryError) as exc:
            client.manifest("r", "t")
        took = time.monotonic() - t0
    assert exc.value.kind == "transient", exc.value
    assert took < 2 + 5, f"took {took:.1f} s with a 2 s budget"


def test_a_registry_that_comes_up_is_reached_on_a_retry(tmp_path):
    reg = LocalRegistry(tmp_path / "late", auth=True)
    client = Registry(reg.host, {"username": USER, "password": SECRET}, insecure=True,
                      timeout_s=5)
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the registry starts while the caller waits
        slept.append(seconds)
        if reg.proc is None:
            reg.start()
            reg.image("r", "t")

    said: list[str] = []
    try:
        (digest, _, _), attempts = with_retries(lambda: client.manifest("r", "t"),
                                                RetryPolicy(attempts=4, base_s=2), "m",
                                                said.append, sleep)
    finally:
        reg.stop()
    assert attempts == 2 and slept == [2] and digest.startswith("sha256:")
    assert said and "retrying in 2 s (1/4)" in said[0]


# ---------------------------------------------------------------------------------------
# Image indexes through the same path (what publish checks for multi-platform tags).

def _index(reg: LocalRegistry, repo: str, arches: list[str]) -> str:
    manifests = []
    for arch in arches:
        digest, doc = reg.image(repo, f"only-{arch}", arch)
        size = len(json.dumps(doc).encode())
        manifests.append({"mediaType": doc["mediaType"], "digest": digest, "size": size,
                          "platform": {"os": "linux", "architecture": arch}})
    return reg.put(repo, "multi", {"schemaVersion": 2, "manifests": manifests,
                                   "mediaType": "application/vnd.oci.image.index.v1+json"})


def test_an_index_is_verified_through_the_registry_client(registries):
    _, reg = registries
    digest = _index(reg, "multi", ["amd64", "arm64"])
    client = Registry(reg.host, {"username": USER, "password": SECRET}, insecure=True)
    assert client.manifest("multi", digest)[2] in INDEX_TYPES
    found = verify_index(f"{reg.host}/multi", digest, ["linux/amd64", "linux/arm64"],
                         skopeo_runner(client))
    assert [p.platform for p in found] == ["linux/amd64", "linux/arm64"]
    with pytest.raises(IndexMismatch, match="not linux/amd64, linux/ppc64le"):
        verify_index(f"{reg.host}/multi", digest, ["linux/amd64", "linux/ppc64le"],
                     skopeo_runner(client))
    bad = Registry(reg.host, {"username": USER, "password": "x" + SECRET}, insecure=True)
    with pytest.raises(IndexMismatch, match="unauthorized") as exc:
        verify_index(f"{reg.host}/multi", digest, ["linux/amd64"], skopeo_runner(bad))
    assert SECRET not in str(exc.value)


# ---------------------------------------------------------------------------------------
# The auth file, seen by a stand-in skopeo (a real subprocess that records what it got).

STANDIN = """#!/bin/sh
out="$STANDIN_OUT"
printf '%s\\n' "$@" > "$out/argv"
printf '%s\\n' "$DOCKER_CONFIG" > "$out/docker_config"
for a in "$@"; do
  case "$a" in --authfile=*) f="${a#--authfile=}"; cp "$f" "$out/auth.json";
    stat -c %a "$f" > "$out/mode"; stat -c %a "$(dirname "$f")" > "$out/dirmode";
    printf '%s\\n' "$f" > "$out/path";;
  esac
done
[ -n "$STANDIN_FAIL" ] && { echo "time=\\"x\\" level=fatal msg=\\"$STANDIN_FAIL\\"" >&2; exit 1; }
echo '{"Tags": ["b", "a"]}'
"""


@pytest.fixture
def standin(tmp_path, monkeypatch):
    bindir, out = tmp_path / "bin", tmp_path / "out"
    bindir.mkdir()
    out.mkdir()
    exe = bindir / "skopeo"
    exe.write_text(STANDIN)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_OUT", str(out))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", "/somewhere/else.json")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))  # what scratch.run_scratch sets
    return out, scratch


def test_credentials_go_through_a_private_auth_file_that_is_removed(standin):
    out, scratch = standin
    client = Registry("reg.example:5000", {"username": USER, "password": SECRET})
    assert client.tags("r") == ["a", "b"]
    argv = (out / "argv").read_text()
    assert SECRET not in argv and "--tls-verify=true" in argv
    assert "docker://reg.example:5000/r" in argv
    path = Path((out / "path").read_text().strip())
    assert path.is_relative_to(scratch), "the auth file is not in the run's scratch dir"
    assert (out / "mode").read_text().strip() == "600"
    assert (out / "dirmode").read_text().strip() == "700"
    assert (out / "docker_config").read_text().strip() == str(path.parent)
    entry = json.loads((out / "auth.json").read_text())["auths"]["reg.example:5000"]
    assert entry == {"auth": "cHVzaGVyOnB3LW5ldmVyLXNob3duLTc3ODE="}  # base64 of USER:SECRET
    assert not path.exists() and list(scratch.iterdir()) == []


def test_no_credentials_is_an_empty_auth_file_and_none_lets_skopeo_look(standin):
    out, _ = standin
    Registry("reg.example:5000", {}).tags("r")
    assert json.loads((out / "auth.json").read_text()) == {"auths": {}}
    (out / "path").unlink()
    Registry("reg.example:5000", None).tags("r")
    assert not (out / "path").exists()


def test_an_identity_token_goes_in_the_auth_file_and_docker_hub_is_docker_io(standin):
    out, _ = standin
    Registry("index.docker.io", {"IdentityToken": "tok-" + SECRET}).manifest("paddle", "1.0")
    assert json.loads((out / "auth.json").read_text()) == {
        "auths": {"docker.io": {"identitytoken": "tok-" + SECRET}}}
    argv = (out / "argv").read_text()
    assert "docker://docker.io/library/paddle:1.0" in argv and SECRET not in argv


def test_a_secret_skopeo_echoes_is_redacted(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_FAIL", f"unauthorized: bad password {SECRET}")
    with pytest.raises(RegistryError) as exc:
        Registry("reg.example:5000", {"username": USER, "password": SECRET}).tags("r")
    assert exc.value.kind == "auth" and SECRET not in str(exc.value) and "***" in str(exc.value)


def test_an_insecure_registry_turns_tls_verification_off(standin):
    out, _ = standin
    Registry("127.0.0.1:5000", {}, insecure=True).tags("r")
    assert "--tls-verify=false" in (out / "argv").read_text()


def test_a_missing_skopeo_is_a_fatal_error_saying_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RegistryError, match=r"skopeo is not installed \(apt-get install skopeo\)") as exc:
        Registry("reg.example:5000", {}).manifest("r", "t")
    assert exc.value.kind == "fatal"
    with pytest.raises(IndexMismatch, match="skopeo is not installed"):
        skopeo_runner(tls_verify=False)(["--raw", "docker://reg.example:5000/r:t"])


# ---------------------------------------------------------------------------------------
# skopeo's messages, and their kinds.

@pytest.mark.parametrize("stderr, message, kind", [
    ('time="2026-01-01T00:00:00Z" level=fatal msg="Error parsing image name \\"docker://h/r:t\\": '
     'reading manifest t in h/r: unauthorized: authentication required"',
     "reading manifest t in h/r: unauthorized: authentication required", "auth"),
    ('time="x" level=fatal msg="Error listing repository tags: unable to retrieve auth token: '
     'invalid username/password: unauthorized: authentication required"',
     "Error listing repository tags: unable to retrieve auth token: invalid username/password: "
     "unauthorized: authentication required", "auth"),
    ('time="x" level=fatal msg="pinging container registry h: Get \\"http://h/v2/\\": dial tcp '
     'h: connect: connection refused"',
     'pinging container registry h: Get "http://h/v2/": dial tcp h: connect: connection refused',
     "transient"),
    ('time="x" level=fatal msg="reading manifest t in h/r: received unexpected HTTP status: '
     '503 Service Unavailable"',
     "reading manifest t in h/r: received unexpected HTTP status: 503 Service Unavailable",
     "transient"),
    ('time="x" level=fatal msg="reading manifest nope in h/r: manifest unknown: manifest unknown"',
     "reading manifest nope in h/r: manifest unknown: manifest unknown", "fatal"),
    ('time="x" level=fatal msg="pinging container registry h: Get \\"http://h/v2/\\": context '
     'deadline exceeded"', 'pinging container registry h: Get "http://h/v2/": context deadline '
     'exceeded', "transient"),
    ("plain last line", "plain last line", "fatal"),
])
def test_skopeo_messages_are_read_and_classified(stderr, message, kind):
    assert skopeo_message(("first line\n" + stderr + "\n").encode()) == message
    assert classify(message) == kind


def test_an_empty_stderr_has_no_message():
    assert skopeo_message(b"") == "" and skopeo_message(b"\n\n") == ""


def test_the_auth_file_mode_is_private_even_with_a_loose_umask(standin):
    out, _ = standin
    old = os.umask(0)
    try:
        Registry("reg.example:5000", {"username": USER, "password": SECRET}).tags("r")
    finally:
        os.umask(old)
    assert stat.S_IMODE(int((out / "mode").read_text().strip(), 8)) == 0o600
