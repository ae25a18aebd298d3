"""The one path to registries (stagecraft/registry.py) against real registries: Debian's
``docker-registry`` (distribution 2.8) on 127.0.0.1, open, with htpasswd (bcrypt) basic
auth, and with token auth behind a token server (tests/unit/registry_harness.py), read
through the real skopeo. No Docker daemon: the harness puts images into the registry over
its HTTP API, as a daemon's push would.

What the removed hand-written client was tested for is kept: credentials work, a wrong
password is an auth error that names no secret, a missing tag is fatal, an unreachable
registry is transient and bounded in time; plus what skopeo adds: tags, image indexes,
and the auth file (0600, in the scratch directory, gone after the call, never in argv).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import time
from pathlib import Path

import pytest

from stagecraft.indexcheck import INDEX_TYPES, IndexMismatch, skopeo_runner, verify_index
from stagecraft.pushsteps import PublishError, auth_message, manifest_size, with_retries
from stagecraft.registry import Registry, RegistryError, classify, skopeo_message
from stagecraft.retry import RetryPolicy
from tests.unit.registry_harness import SECRET, USER, LocalRegistry, TokenServer, free_port

TOOLS = ("docker-registry", "htpasswd", "skopeo")
# The tests of real registries; those of the stand-in skopeo below need none of these.
real = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                          reason="needs docker-registry, htpasswd and skopeo "
                                 "(scripts/setup.sh installs them)")


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """(open, htpasswd, token) registries, and the token server of the third."""
    root = tmp_path_factory.mktemp("registries")
    tokens = TokenServer(root)
    regs = [LocalRegistry(root / "open"), LocalRegistry(root / "auth", "htpasswd"),
            LocalRegistry(root / "token", "token", tokens)]
    try:
        for reg in regs:
            reg.start()
        yield (*regs, tokens)
    finally:
        for reg in regs:
            reg.stop()
        tokens.stop()


# ---------------------------------------------------------------------------------------
# Manifests and tags, with and without credentials.

WHICH = {"open": 0, "htpasswd": 1, "token": 2}


@pytest.mark.parametrize("which, credentials", [
    ("htpasswd", {"username": USER, "password": SECRET}),
    ("token", {"username": USER, "password": SECRET}),
    ("open", {"username": USER, "password": SECRET}),  # credentials an open registry ignores
    ("open", {}),
])
@real
def test_a_manifest_is_read_by_tag_and_by_digest(registries, which, credentials):
    reg = registries[WHICH[which]]
    digest, doc = reg.image("team/r", "t")
    client = Registry(reg.host, credentials, insecure=True)
    got, body, media = client.manifest("team/r", "t")
    assert got == digest and media == "application/vnd.oci.image.manifest.v1+json"
    assert manifest_size(body) == doc["config"]["size"] + doc["layers"][0]["size"]
    assert client.manifest("team/r", digest)[0] == digest
    assert SECRET not in repr(client)


@real
@pytest.mark.parametrize("which", ["htpasswd", "token"])
def test_a_wrong_password_is_an_auth_error_that_names_no_secret(registries, which):
    reg = registries[WHICH[which]]
    reg.image("r", "t")
    client = Registry(reg.host, {"username": USER, "password": "nope-" + SECRET}, insecure=True)
    with pytest.raises(PublishError) as exc:
        client.manifest("r", "t")
    assert exc.value.kind == "auth", exc.value
    assert "unauthorized" in str(exc.value) and SECRET not in str(exc.value)
    if which == "htpasswd":  # the registry's own words; a token server has its own
        assert "authentication required" in str(exc.value)
    line = auth_message(reg.host, exc.value)
    assert "refused the credentials" in line and "unauthorized" in line and SECRET not in line


@real
def test_a_token_registry_is_read_with_a_token_the_token_server_gave(registries):
    *_, reg, tokens = registries
    reg.image("tok", "t")
    before = tokens.requests
    Registry(reg.host, {"username": USER, "password": SECRET}, insecure=True).manifest("tok", "t")
    assert tokens.requests > before, "skopeo did not ask the token server"


@real
@pytest.mark.parametrize("which", ["htpasswd", "token"])
def test_no_credentials_for_a_locked_registry_is_an_auth_error(registries, which):
    reg = registries[WHICH[which]]
    reg.image("r", "t")
    with pytest.raises(RegistryError) as exc:
        Registry(reg.host, {}, insecure=True).manifest("r", "t")
    assert exc.value.kind == "auth", exc.value


@real
def test_a_missing_tag_and_a_missing_digest_are_fatal(registries):
    reg = registries[0]
    reg.image("r", "t")
    client = Registry(reg.host, {}, insecure=True)
    with pytest.raises(PublishError) as exc:
        client.manifest("r", "nope")
    assert exc.value.kind == "fatal" and f"{reg.host}/r:nope is not in the registry" in str(exc.value)
    with pytest.raises(PublishError, match="is not in the registry") as exc:
        client.manifest("r", "sha256:" + "0" * 64)
    assert exc.value.kind == "fatal"


@real
def test_tags_are_listed_sorted_and_an_unknown_repository_has_none(registries):
    reg, locked = registries[:2]
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

@real
def test_a_refused_connection_is_transient():
    client = Registry(f"127.0.0.1:{free_port()}", {}, insecure=True, timeout_s=5)
    with pytest.raises(RegistryError) as exc:
        client.manifest("r", "t")
    assert exc.value.kind == "transient" and "connection refused" in str(exc.value)


@real
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


@real
def test_a_registry_that_comes_up_is_reached_on_a_retry(tmp_path):
    reg = LocalRegistry(tmp_path / "late", "htpasswd")
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

def _index(reg: LocalRegistry, repo: str, arches: list[str], tag: str = "multi") -> str:
    manifests = []
    for arch in arches:
        digest, doc = reg.image(repo, f"only-{arch}", arch)
        size = len(json.dumps(doc).encode())
        manifests.append({"mediaType": doc["mediaType"], "digest": digest, "size": size,
                          "platform": {"os": "linux", "architecture": arch}})
    return reg.put(repo, tag, {"schemaVersion": 2, "manifests": manifests,
                                   "mediaType": "application/vnd.oci.image.index.v1+json"})


@real
def test_an_index_is_verified_through_the_registry_client(registries):
    reg = registries[1]
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


# ---------------------------------------------------------------------------------------
# publish() builds its registry client from the daemon's credentials and insecure list.

class UploadingDaemon:
    """A daemon stand-in whose push really uploads (an image, or an index of
    ``platforms``) to the registry, so that publish's own verification reads it back;
    its credentials are what a Docker config would give."""

    def __init__(self, reg: LocalRegistry, password: str, platforms: tuple[str, ...] = ()):
        self.reg, self.password, self.platforms = reg, password, platforms
        self.digests: dict[str, list[str]] = {}

    def image_id(self, ref):
        return "sha256:" + "a" * 64

    def tag(self, image_id, repository, tag):
        pass

    def push(self, remote, tag):
        repo = remote.split("/", 1)[1]
        if self.platforms:
            digest = _index(self.reg, repo, [p.split("/")[1] for p in self.platforms], tag)
        else:
            digest, _ = self.reg.image(repo, tag)
        self.digests.setdefault("sha256:" + "a" * 64, []).append(f"{remote}@{digest}")
        yield {"status": "Pushed", "id": "l1"}
        yield {"aux": {"Tag": tag, "Digest": digest, "Size": 500}}

    def repo_digests(self, image_id):
        return self.digests.get(image_id, [])

    def labels(self, image_id):
        return {}

    def size(self, image_id):
        return 1000

    def insecure(self, registry):
        return True

    def credentials(self, registry):
        return {"username": USER, "password": self.password, "serveraddress": registry}


def _candidate(project, tmp_path, platforms=()):
    import dataclasses

    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.runmanifest import Candidate, TestGate
    from tests.unit.minimal_matrix import MINIMAL

    spec = expand(load_matrix(project(MINIMAL)))[0]
    spec = dataclasses.replace(spec, platforms=tuple(platforms))
    gate = TestGate(record=str(tmp_path / "rec.json"), sha256="sha256:" + "0" * 64,
                    passed=True, counts={"passed": 1}, recorded=1.0)
    return Candidate(spec, f"example/fw:{spec.tag}", "sha256:" + "a" * 64, gate)


@real
@pytest.mark.parametrize("platforms", [(), ("linux/amd64", "linux/arm64")],
                         ids=["image", "index"])
def test_publish_verifies_through_skopeo_with_the_daemons_credentials(registries, project,
                                                                      tmp_path, platforms):
    from stagecraft.publish import publish

    reg = registries[1]
    c = _candidate(project, tmp_path, platforms)
    said: list[str] = []
    run = publish(UploadingDaemon(reg, SECRET, platforms), [c], reg.host, "example/fw",
                  tmp_path / "state", said.append, RetryPolicy(attempts=1))
    assert run.ok, (run.error, [i.push.error for i in run.images])
    img = run.images[0]
    assert img.push.verified and img.digest == img.push.registry_digest
    assert sorted(img.platforms) == sorted(platforms)
    assert [a.status for a in img.aliases] == ["pushed"] * len(c.spec.aliases)
    assert SECRET not in "\n".join(said) + Path(run.path).read_text()


@real
def test_publish_with_a_password_the_registry_refuses_stops_at_the_verification(
        registries, project, tmp_path):
    from stagecraft.publish import publish

    reg = registries[1]
    c = _candidate(project, tmp_path)
    said: list[str] = []
    run = publish(UploadingDaemon(reg, "wrong-" + SECRET), [c], reg.host, "example/fw",
                  tmp_path / "state", said.append, RetryPolicy(attempts=3),
                  sleep=lambda s: pytest.fail("an auth error was retried"))
    assert not run.ok and "refused the credentials" in run.error
    assert run.images[0].push.status == "failed"
    assert all(a.status == "not pushed" for a in run.images[0].aliases)
    assert SECRET not in "\n".join(said) + Path(run.path).read_text()
