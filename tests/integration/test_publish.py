"""Publishing against real registries, on each engine (tests/integration/engines.py):
Debian's `docker-registry` (distribution 2.8), started here where the engine reaches it
(the host's engine: on 127.0.0.1, free ports, storage in a temp dir; the modern engine:
inside its container, on its address, storage in its shared directory, so the host's
HTTP checks reach the same registry), once plain and once with htpasswd basic auth.

2.6.2-cpu is built (cached stages), tagged under a repository of this session's own
(`stagecraft-pubtest/paddle-<id>`, so concurrent runs, this suite's included, moving
`stagecraft/paddle:*` do not disturb it) and tested once per session; it is pushed to
each registry once: 768 MB in the engine, about 245 MB compressed, some 30 s to
localhost. Every name the session gave in the engine is removed at its end.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest

from stagecraft.platforms import host_platform
from tests.integration import engines
from tests.integration.harness import ROOT, with_default_signals
from tests.integration.registryproc import PASSWORD, USER, Registry

pytestmark = [pytest.mark.docker]

REPO = f"stagecraft-pubtest/paddle-{uuid.uuid4().hex[:8]}"
TAG, ALIAS = "2.6.2-cpu", "2.6.2"
def _bcrypt(password: str) -> str:
    """A bcrypt hash (the only htpasswd form distribution accepts): `htpasswd -B` from
    apache2-utils, else libxcrypt through Python's crypt module (<= 3.12)."""
    if shutil.which("htpasswd"):
        out = subprocess.run(["htpasswd", "-nbB", USER, password], check=True,
                             capture_output=True, text=True).stdout
        return out.strip().split(":", 1)[1]
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
    except (ImportError, AttributeError):
        pytest.fail("no bcrypt here: apt-get install apache2-utils (htpasswd)")


def _registry(tmp_path_factory, name: str, auth: bool, engine: engines.TestEngine):
    if engine.modern:  # its storage where the engine's container sees it
        import tempfile

        root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=engine.share))
    else:
        if not shutil.which("docker-registry"):
            pytest.fail("docker-registry not installed: run `make setup` (Debian docker-registry)")
        root = tmp_path_factory.mktemp(name)
    htpasswd = None
    if auth:
        htpasswd = root / "htpasswd"
        htpasswd.write_text(f"{USER}:{_bcrypt(PASSWORD)}\n")
    reg = Registry(root, htpasswd, engine)
    reg.start()
    return reg


def _untag_registry(client, reg: Registry) -> None:
    """Remove the engine's names under the registry (push tags them `HOST:PORT/...`)."""
    _untag(client, lambda t: t.startswith(reg.host + "/"))


def _drop(reg: Registry) -> None:
    reg.stop()
    if reg.engine is not None:
        shutil.rmtree(reg.root, ignore_errors=True)


@pytest.fixture(scope="session")
def registry(tmp_path_factory, engine, eclient):
    reg = _registry(tmp_path_factory, "registry", False, engine)
    yield reg
    _drop(reg)
    _untag_registry(eclient, reg)


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory, engine, eclient):
    reg = _registry(tmp_path_factory, "auth-registry", True, engine)
    yield reg
    _drop(reg)
    _untag_registry(eclient, reg)


@pytest.fixture(scope="session")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("state")


def _cli(engine: engines.TestEngine, *args: str, state: Path, env: dict[str, str] | None = None,
         timeout: float = 1800):
    return engine.cli(*args, "--repository", REPO, "--state-dir", str(state), timeout=timeout, env=env)


@pytest.fixture(scope="session")
def paddle(engine, eclient, state) -> str:
    """2.6.2-cpu built as `stagecraft-pubtest/paddle-<id>:2.6.2-cpu` and tested; its
    image id. At the end of the session its names (tag and alias) are removed."""
    try:
        proc = _cli(engine, "--tag", TAG, "--platform", host_platform(), "--test", "--json", state=state)
        assert proc.returncode == 0, f"build/test of {TAG} failed:\n{proc.stderr[-3000:]}"
        image_id = eclient.images.get(f"{REPO}:{TAG}").id
        record = json.loads((state / "test-records" / f"{image_id.replace(':', '-')}.json").read_text())
        assert record["passed"], record
        yield image_id
    finally:
        _untag(eclient, lambda t: t.rsplit(":", 1)[0] == REPO)


def _untag(client, which) -> None:
    """Remove the engine's names (not the images) for which ``which(name)`` holds."""
    for image in client.images.list():
        for t in image.tags:
            if which(t):
                try:
                    client.images.remove(t, noprune=True)
                except docker.errors.ImageNotFound:
                    pass


@pytest.fixture(scope="session")
def pushed(engine, registry, paddle, state) -> dict:
    """2.6.2-cpu pushed once, with an interruption: Ctrl-C (SIGINT) on the first push
    once the registry holds a finished blob, then the push again. Returns
    {"first": (rc, stderr, blobs at the interrupt), "run": the second run's JSON,
    "stdout", "stderr", "seconds"}."""
    argv = ["push", "--tag", TAG, "--registry", registry.host]
    first = subprocess.Popen(with_default_signals([sys.executable, str(ROOT / "build.py"), *argv,
                                                   "--repository", REPO, "--state-dir", str(state)]),
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=engine.environ())
    deadline = time.monotonic() + 300
    while first.poll() is None and registry.blobs() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    blobs_at_interrupt = registry.blobs()
    interrupted = first.poll() is None
    if interrupted:
        first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=120)
    # The daemon notices the closed connection and stops its uploads in its own time. In
    # a loaded CI run (the emulated arm64 build beside it), Docker 26's resumed push
    # reported every layer "Pushed" although the registry held a finished blob: most
    # likely the first push's uploads were still going and the second one waited on
    # them. Resume once the registry's blobs have stopped changing for 2 s.
    settled, last, deadline = time.monotonic(), registry.blobs(), time.monotonic() + 120
    while time.monotonic() - settled < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = registry.blobs()
        if now != last:
            settled, last = time.monotonic(), now
    t0 = time.monotonic()
    proc = _cli(engine, *argv, "--json", state=state)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, f"push failed:\n{proc.stderr[-3000:]}"
    return {"first": (first.returncode, err, blobs_at_interrupt, interrupted),
            "run": json.loads(proc.stdout), "stdout": proc.stdout, "stderr": proc.stderr,
            "seconds": seconds}


def test_interrupted_push_resumes(pushed):
    rc, err, blobs, interrupted = pushed["first"]
    assert interrupted, "the first push finished before it could be interrupted"
    assert rc == 130, f"interrupted push exited {rc}: {err[-800:]}"
    assert "run push again to resume" in err
    assert "Traceback" not in err, err[-2000:]
    assert blobs >= 1
    img = pushed["run"]["images"][0]
    assert img["push"]["layers_existed"] >= 1, (
        f"{TAG}: the resumed push re-uploaded every layer: {img['push']}")
    assert img["push"]["layers_pushed"] + img["push"]["layers_existed"] >= 2


def test_push_moves_tag_and_alias(pushed, registry, state):
    run = pushed["run"]
    assert run["ok"] and run["registry"] == registry.host, run
    assert registry.tags(REPO) == sorted([TAG, ALIAS])
    img = run["images"][0]
    assert img["tag"] == TAG and img["status"] == "pushed"
    assert [a["name"] for a in img["aliases"]] == [ALIAS]
    assert img["aliases"][0]["status"] == "pushed" and img["aliases"][0]["verified"]
    assert img["test"]["passed"] and img["test"]["sha256"].startswith("sha256:")
    record = Path(img["test"]["record"]).read_bytes()
    assert img["test"]["sha256"] == "sha256:" + hashlib.sha256(record).hexdigest()
    assert img["labels"]["org.opencontainers.image.revision"]
    assert img["labels"]["io.stagecraft.matrix.selection"].startswith("base=")
    assert 50e6 < img["size"] < img["image_size"], img  # compressed in the registry
    saved = json.loads(Path(run["path"]).read_text())
    assert saved == run, "the run manifest on disk differs from --json"
    assert Path(run["path"]).parent == state / "runs"


def test_push_to_a_namespace(engine, pushed, registry, state):
    """`--registry HOST:PORT/NAMESPACE` (the ghcr.io/org form): the namespace takes the
    place of the repository's own, tag and alias land there, verified; the layers are
    already in the registry (mounted, not uploaded again)."""
    remote = f"team/{REPO.rsplit('/', 1)[-1]}"
    proc = _cli(engine, "push", "--tag", TAG, "--registry", f"{registry.host}/team", "--json", state=state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout)
    assert (run["registry"], run["repository"]) == (registry.host, remote), run
    img = run["images"][0]
    assert img["ref"] == f"{registry.host}/{remote}:{TAG}" and img["status"] == "pushed", img
    assert registry.tags(remote) == sorted([TAG, ALIAS])
    assert registry.digest(remote, TAG) == img["digest"] == pushed["run"]["images"][0]["digest"]


def test_registry_digest_equals_local(pushed, registry, eclient, paddle):
    img = pushed["run"]["images"][0]
    remote_digest = registry.digest(REPO, TAG)
    assert remote_digest == img["digest"] == img["push"]["registry_digest"]
    assert registry.digest(REPO, ALIAS) == remote_digest, "alias points elsewhere"
    repo_digests = eclient.api.inspect_image(paddle)["RepoDigests"]
    assert f"{registry.host}/{REPO}@{remote_digest}" in repo_digests, repo_digests


def test_pulled_back_into_clean_state_runs(pushed, registry, eclient, paddle):
    """Every tag of the image is removed (so its id is gone from the engine), the alias
    is pulled by registry reference, the same id comes back and runs; the tags return."""
    tags = eclient.api.inspect_image(paddle)["RepoTags"]
    try:
        for t in tags:
            eclient.images.remove(t, noprune=True)
        with pytest.raises(docker.errors.ImageNotFound):
            eclient.images.get(paddle)
        pulled = eclient.images.pull(f"{registry.host}/{REPO}", tag=ALIAS)
        assert pulled.id == paddle, "the pulled image is not the one tested"
        out = eclient.containers.run(pulled.id, ["python", "-c", "import paddle; print(paddle.__version__)"],
                                    environment={"STAGECRAFT_QUIET": "1"}, remove=True)
        assert out.decode().strip().splitlines()[-1] == "2.6.2"
    finally:
        for t in tags:
            repo, tag = t.rsplit(":", 1)
            eclient.api.tag(paddle, repo, tag, force=True)


def test_untested_image_refused(engine, paddle, registry, eclient, state):
    """A new image id (a rebuild after the tests ran) under the tag: refused, nothing moved."""
    image, _ = eclient.images.build(fileobj=io.BytesIO(
        f"FROM {paddle}\nLABEL io.stagecraft.test.rebuilt=yes\n".encode()), rm=True)
    assert image.id != paddle
    repo = "stagecraft-pubtest/untested"
    image.tag(repo, TAG)
    try:
        proc = engine.cli("push", "--tag", TAG, "--registry", registry.host, "--repository", repo,
                          "--state-dir", str(state))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "refused" in lines[0] and "no test record" in lines[0], lines
        assert "python3 build.py test --tag 2.6.2-cpu" in lines[0]
        assert proc.stdout == ""
        assert repo not in registry.catalog() and registry.tags(repo) == []
        # A failed record refuses too.
        record = state / "test-records" / f"{image.id.replace(':', '-')}.json"
        record.write_text(json.dumps({"passed": False, "counts": {"failed": 2}}))
        proc = engine.cli("push", "--tag", TAG, "--registry", registry.host, "--repository", repo,
                          "--state-dir", str(state))
        assert proc.returncode == 2 and "failed its tests" in proc.stderr, proc.stderr
        assert registry.tags(repo) == []
    finally:
        eclient.images.remove(image.id, force=True)


def _docker_config(tmp_path: Path, registry: str, password: str,
                   engine: engines.TestEngine) -> dict[str, str]:
    """A client config with credentials for ``registry`` (and, for the modern engine,
    the buildx plugin of its own config)."""
    auth = base64.b64encode(f"{USER}:{password}".encode()).decode()
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({"auths": {registry: {"auth": auth}}}))
    if "DOCKER_CONFIG" in engine.env:
        (tmp_path / "cli-plugins").symlink_to(Path(engine.env["DOCKER_CONFIG"]) / "cli-plugins")
    return {"DOCKER_CONFIG": str(tmp_path)}


def test_bad_credentials_clear_error_nothing_moved(engine, paddle, auth_registry, eclient, state, tmp_path):
    repo = "stagecraft-pubtest/badcreds"
    eclient.api.tag(paddle, repo, TAG)
    eclient.api.tag(paddle, repo, ALIAS)
    wrong = "wrong-" + PASSWORD
    try:
        env = _docker_config(tmp_path / "docker", auth_registry.host, wrong, engine)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(ROOT / "build.py"), "push", "--tag", TAG, "--registry",
             auth_registry.host, "--repository", repo, "--state-dir", str(state)],
            capture_output=True, text=True, timeout=600, env=engine.environ(env), cwd=ROOT)
        seconds = time.monotonic() - t0
        assert proc.returncode == 1, proc.stderr
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("failed:")]
        assert len(errors) == 1, proc.stderr
        assert "refused the credentials" in errors[0] and "unauthorized" in errors[0].lower()
        assert f"docker login {auth_registry.host}" in errors[0]
        assert "retrying" not in proc.stderr, "an auth error was retried"
        assert "Traceback" not in proc.stderr
        assert seconds < 120
        for text in (proc.stdout, proc.stderr, *_state_texts(state)):
            assert wrong not in text and PASSWORD not in text
        assert auth_registry.tags(repo) == [], "a tag moved despite the refused credentials"
        assert repo not in auth_registry.catalog()
    finally:
        for t in (TAG, ALIAS):
            eclient.images.remove(f"{repo}:{t}", noprune=True)


def test_build_push_with_credentials_from_docker_config(engine, paddle, auth_registry, state, tmp_path):
    """`--push` on a build: tests run, then the push, authenticated from DOCKER_CONFIG
    (both the daemon's push and the HTTP API verification); the password is nowhere."""
    env = _docker_config(tmp_path / "docker", auth_registry.host, PASSWORD, engine)
    proc = _cli(engine, "--tag", TAG, "--platform", host_platform(), "--push", "--registry",
                auth_registry.host, "--json",
                state=state, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["images"][0]["test"]["passed"]
    run = report["push"]
    assert run["ok"], run
    assert auth_registry.tags(REPO) == sorted([TAG, ALIAS])
    assert auth_registry.digest(REPO, TAG) == run["images"][0]["digest"]
    for text in (proc.stdout, proc.stderr, *_state_texts(state)):
        assert PASSWORD not in text, "the password leaked"


def _state_texts(state: Path) -> list[str]:
    return [p.read_text(errors="replace") for p in state.rglob("*")
            if p.is_file() and p.stat().st_size < 5_000_000]
