"""Publishing without Docker: the test gate, retry and error classes, the order in which
references move (aliases last). The registry client (skopeo) against real registries is
tests/unit/test_registry.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.publish import gate, publish, remote_repository, resolve_registry
from stagecraft.pushsteps import PublishError, manifest_size, with_retries
from stagecraft.registry import classify
from stagecraft.retry import RetryPolicy
from stagecraft.testing import record_path
from tests.unit.minimal_matrix import MINIMAL

SECRET = "pw-never-shown-7781"


# ---------------------------------------------------------------------------------------
# Classification and retries.

@pytest.mark.parametrize("message,kind", [
    ("unauthorized: authentication required", "auth"),
    ("denied: requested access to the resource is denied", "auth"),
    ("no basic auth credentials", "auth"),
    ("received unexpected HTTP status: 503 Service Unavailable", "transient"),
    ("Put http://r/v2/x/blobs/uploads/1: read tcp 1->2: read: connection reset by peer", "transient"),
    ("dial tcp 127.0.0.1:5000: connect: connection refused", "transient"),
    ("net/http: TLS handshake timeout", "transient"),
    ("unexpected EOF", "transient"),
    ("manifest invalid: manifest invalid", "fatal"),
    ("name unknown: repository name not known to registry", "fatal"),
    ("unauthorized: 401 after i/o timeout", "auth"),
])
def test_classify(message, kind):
    assert classify(message) == kind, message


def test_backoff_delays_grow_and_cap():
    assert RetryPolicy(attempts=5, base_s=1, factor=2, max_s=5).delays() == [1, 2, 4, 5]
    assert RetryPolicy(attempts=1).delays() == []


def test_transient_errors_retried_with_backoff():
    slept, calls = [], []

    def fn():
        calls.append(1)
        if len(calls) < 3:
            raise PublishError("HTTP 503", "transient")
        return "ok"

    result, attempts = with_retries(fn, RetryPolicy(attempts=4, base_s=0.5), "x", lambda s: None,
                                    slept.append)
    assert (result, attempts, slept) == ("ok", 3, [0.5, 1.0])


def test_auth_errors_not_retried():
    slept, calls = [], []

    def fn():
        calls.append(1)
        raise PublishError("unauthorized", "auth")

    with pytest.raises(PublishError) as exc:
        with_retries(fn, RetryPolicy(attempts=4), "x", lambda s: None, slept.append)
    assert exc.value.kind == "auth" and len(calls) == 1 and slept == []


def test_transient_gives_up_after_attempts():
    slept = []
    with pytest.raises(PublishError, match="gave up after 3 attempts"):
        with_retries(lambda: (_ for _ in ()).throw(PublishError("reset", "transient")),
                     RetryPolicy(attempts=3), "x", lambda s: None, slept.append)
    assert slept == [1.0, 2.0]


def test_registry_comes_from_cli_then_matrix():
    assert resolve_registry("cli:5000", "matrix.example") == "cli:5000"
    assert resolve_registry(None, "matrix.example:443") == "matrix.example:443"
    with pytest.raises(InputError, match="no registry"):
        resolve_registry(None, "")
    with pytest.raises(InputError, match="not a registry host"):
        resolve_registry("https://r.example/v2", "")


@pytest.mark.parametrize("value, host, path", [
    ("127.0.0.1:5000", "127.0.0.1:5000", "stagecraft/paddle"),
    ("ghcr.io/my-org", "ghcr.io", "my-org/paddle"),
    ("docker.io/me", "docker.io", "me/paddle"),
    ("registry.example:443/team/ml", "registry.example:443", "team/ml/paddle"),
    ("ghcr.io/my-org/", "ghcr.io", "my-org/paddle"),
])
def test_registry_namespace_takes_the_place_of_the_repositorys(value, host, path):
    assert remote_repository(resolve_registry(value, ""), "stagecraft/paddle") == (host, path)


@pytest.mark.parametrize("value", ["ghcr.io/My-Org", "ghcr.io//x", "ghcr.io/a b",
                                   "https://ghcr.io/org", "r:5000/-x", "h/" + "a" * 300])
def test_registry_namespace_must_be_a_repository_path(value):
    with pytest.raises(InputError, match="not a registry host or host/namespace") as exc:
        resolve_registry(value, "")
    assert len(exc.value.problems[0].line()) < 300


def test_matrix_registry_may_hold_a_namespace(project):
    path = project(MINIMAL.replace("repository: example/fw\n",
                                   "repository: example/fw\nregistry: ghcr.io/my-org\n"))
    assert load_matrix(path).registry == "ghcr.io/my-org"


def test_matrix_registry_key_loads(project):
    path = project(MINIMAL.replace("repository: example/fw\n",
                                   "repository: example/fw\nregistry: registry.example:5000\n"))
    assert load_matrix(path).registry == "registry.example:5000"


def test_manifest_size_sums_config_and_layers():
    body = json.dumps({"config": {"size": 10}, "layers": [{"size": 100}, {"size": 5}]}).encode()
    assert manifest_size(body) == 115
    assert manifest_size(b"not json") == 0


# ---------------------------------------------------------------------------------------
# The gate and the order of pushes, with a fake daemon and registry.

class FakeDaemon:
    """Images by ref; pushes recorded in order; ``fail`` scripts an error per name."""

    def __init__(self, images: dict[str, str], digest_of: dict[str, str]):
        self.images = images
        self.digest_of = digest_of  # image id -> manifest digest
        self.tagged: dict[str, str] = {}  # remote ref -> image id
        self.events: list[tuple[str, str]] = []  # ("push", "repo:name")
        self.fail: dict[str, str] = {}  # name -> error text
        self.digests: dict[str, list[str]] = {}
        self.containerd_store = False

    def image_id(self, ref):
        return self.images.get(ref)

    def tag(self, image_id, repository, tag):
        self.tagged[f"{repository}:{tag}"] = image_id

    def push(self, repository, tag):
        self.events.append(("push", f"{repository}:{tag}"))
        if tag in self.fail:
            yield {"errorDetail": {"message": self.fail[tag]}, "error": self.fail[tag]}
            return
        image_id = self.tagged[f"{repository}:{tag}"]
        digest = self.digest_of[image_id]
        self.digests.setdefault(image_id, []).append(f"{repository}@{digest}")
        yield {"status": "Pushed", "id": "l1"}
        yield {"status": "Layer already exists", "id": "l2"}
        if self.containerd_store:  # Docker 26 with the containerd image store: no aux event
            yield {"status": "Mounted from other/repo", "id": "l3"}
            yield {"status": f"{tag}: digest: {digest} size: 856"}
        else:
            yield {"aux": {"Tag": tag, "Digest": digest, "Size": 500}}

    def repo_digests(self, image_id):
        return self.digests.get(image_id, [])

    def labels(self, image_id):
        return {"org.opencontainers.image.revision": "abc", "io.stagecraft.matrix.group": "g"}

    def size(self, image_id):
        return 1000

    def insecure(self, registry):
        return True

    def credentials(self, registry):
        return {"username": "u", "password": SECRET}


class FakeRegistry:
    """Serves what the fake daemon pushed, and nothing else."""

    def __init__(self, daemon: FakeDaemon):
        self.daemon = daemon

    def manifest(self, repository, reference):
        pushed = {r for kind, r in self.daemon.events if kind == "push"}
        ref = next((r for r in pushed if r.endswith(f"/{repository}:{reference}")), None)
        if ref is None:
            raise PublishError("not found", "fatal")
        body = json.dumps({"config": {"size": 1}, "layers": [{"size": 99}]}).encode()
        return self.daemon.digest_of[self.daemon.tagged[ref]], body, "v2"


@pytest.fixture
def six(project, tmp_path):
    specs = expand(load_matrix(project(MINIMAL)))
    ids = {"example/fw:1.16.0-cpu": "sha256:" + "a" * 64,
           "example/fw:1.17.0-cpu": "sha256:" + "b" * 64}
    daemon = FakeDaemon(ids, {ids["example/fw:1.16.0-cpu"]: "sha256:" + "1" * 64,
                              ids["example/fw:1.17.0-cpu"]: "sha256:" + "2" * 64})
    return specs, daemon, tmp_path / "state"


def _record(state: Path, image_id: str, passed: bool = True) -> Path:
    p = record_path(state, image_id)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"passed": passed, "counts": {"passed": 3}, "recorded": 1.0}))
    return p


def test_gate_refuses_untested_and_failed_and_pushes_nothing(six):
    specs, daemon, state = six
    _record(state, daemon.images["example/fw:1.17.0-cpu"], passed=False)
    with pytest.raises(InputError) as exc:
        gate(daemon, specs, "example/fw", state)
    lines = [p.line() for p in exc.value.problems]
    assert len(lines) == 2
    assert "1.16.0-cpu" in lines[0] and "no test record" in lines[0]
    assert "python3 build.py test --tag 1.16.0-cpu" in lines[0]
    assert "1.17.0-cpu" in lines[1] and "failed its tests" in lines[1]
    assert daemon.events == []


def test_gate_refuses_unbuilt(six):
    specs, daemon, state = six
    del daemon.images["example/fw:1.16.0-cpu"]
    with pytest.raises(InputError, match="is not built"):
        gate(daemon, specs[:1], "example/fw", state)


def test_gate_passes_tested_and_records_record_digest(six):
    specs, daemon, state = six
    paths = [_record(state, i) for i in daemon.images.values()]
    cands = gate(daemon, specs, "example/fw", state)
    assert [c.test.sha256 for c in cands] == [
        "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


@pytest.mark.parametrize("containerd_store", [False, True], ids=["aux-digest", "status-digest"])
def test_aliases_move_only_after_every_tag_is_verified(six, containerd_store):
    specs, daemon, state = six
    daemon.containerd_store = containerd_store
    for i in daemon.images.values():
        _record(state, i)
    run = publish(daemon, gate(daemon, specs, "example/fw", state), "reg:5000", "example/fw",
                  state, lambda s: None, RetryPolicy(attempts=1), FakeRegistry(daemon))
    pushes = [r for kind, r in daemon.events if kind == "push"]
    assert pushes == ["reg:5000/example/fw:1.16.0-cpu", "reg:5000/example/fw:1.17.0-cpu",
                      "reg:5000/example/fw:1.16.0", "reg:5000/example/fw:1.17.0"]
    assert run.ok and [i.status for i in run.images] == ["pushed", "pushed"]
    img = run.images[0]
    assert img.digest == "sha256:" + "1" * 64 and img.size == 100 and img.image_size == 1000
    # (a layer mounted from another repository of the registry existed too)
    assert img.push.layers_pushed == 1 and img.push.layers_existed == 1 + containerd_store
    assert img.aliases[0].digest == img.digest and img.aliases[0].verified
    saved = json.loads(Path(run.path).read_text())
    assert saved["images"][0]["test"]["sha256"].startswith("sha256:")
    assert Path(run.path).parent == state / "runs"
    assert SECRET not in Path(run.path).read_text()


def test_failed_tag_keeps_its_aliases(six):
    specs, daemon, state = six
    for i in daemon.images.values():
        _record(state, i)
    daemon.fail["1.16.0-cpu"] = "manifest invalid: manifest invalid"
    run = publish(daemon, gate(daemon, specs, "example/fw", state), "reg:5000", "example/fw",
                  state, lambda s: None, RetryPolicy(attempts=3), FakeRegistry(daemon))
    pushes = [r for kind, r in daemon.events if kind == "push"]
    assert pushes.count("reg:5000/example/fw:1.16.0-cpu") == 1, "a fatal error was retried"
    assert "reg:5000/example/fw:1.16.0" not in pushes
    assert "reg:5000/example/fw:1.17.0" in pushes
    assert not run.ok and run.images[0].aliases[0].status == "not pushed"


def test_auth_error_stops_the_run(six):
    specs, daemon, state = six
    for i in daemon.images.values():
        _record(state, i)
    daemon.fail["1.16.0-cpu"] = "unauthorized: authentication required"
    run = publish(daemon, gate(daemon, specs, "example/fw", state), "reg:5000", "example/fw",
                  state, lambda s: None, RetryPolicy(attempts=3), FakeRegistry(daemon))
    pushes = [r for kind, r in daemon.events if kind == "push"]
    assert pushes == ["reg:5000/example/fw:1.16.0-cpu"]
    assert not run.ok and "authentication" in run.error


def test_transient_push_error_retried_then_ok(six):
    specs, daemon, state = six
    for i in daemon.images.values():
        _record(state, i)
    real_push = daemon.push
    failures = {"n": 0}

    def flaky(repository, tag):
        if tag == "1.16.0-cpu" and failures["n"] < 2:
            failures["n"] += 1
            daemon.events.append(("push", f"{repository}:{tag}"))
            return iter([{"errorDetail": {"message": "received unexpected HTTP status: 502"}}])
        return real_push(repository, tag)

    daemon.push = flaky
    slept: list[float] = []
    run = publish(daemon, gate(daemon, specs[:1], "example/fw", state), "reg:5000",
                  "example/fw", state, lambda s: None, RetryPolicy(attempts=4, base_s=2),
                  FakeRegistry(daemon), sleep=slept.append)
    assert run.ok and run.images[0].push.attempts == 3 and slept == [2, 4]


class _Docker26Push:
    """The end of a real push stream of Docker 26.1.5 with the containerd image store
    (an image index): no aux event, the digest only in the last status line."""

    def push(self, repository, tag):
        yield {"status": "Layer already exists", "progressDetail": {}, "id": "4f4fb700ef54"}
        yield {"status": f"{tag}: digest: sha256:8c496c149e75b8a17216e4a4cffd0226026809106671be875e12c67f8e1524b1 size: 1609"}


def test_digest_from_the_containerd_store_status_line():
    from stagecraft.pushsteps import push_once

    digest, pushed, existed = push_once(_Docker26Push(), "127.0.0.1:5000/r", "3.2.2-cpu",
                                         lambda s: None)
    assert digest == "sha256:8c496c149e75b8a17216e4a4cffd0226026809106671be875e12c67f8e1524b1"
    assert (pushed, existed) == (0, 1)
