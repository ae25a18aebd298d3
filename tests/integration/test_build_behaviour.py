"""The builder on a small matrix of the real format (framework: `six`, real Debian base,
real pip, real BuildKit), on each engine (tests/integration/engines.py): secrets stay out
of images, failures leave tags where they were, Ctrl-C moves nothing and the next run
resumes, keys skip BuildKit entirely."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

import docker
import pytest

from tests.integration.harness import ROOT, SocketRelay, run_cli, with_default_signals
from tests.unit.minimal_matrix import MINIMAL

REPO = "stagecraft-it/six"
# The engine each scratch project of a test builds on (fixtures six_project, tags_project).
_ENGINE_OF: dict[Path, object] = {}


@pytest.fixture
def six_project(project, engine, eclient):
    """A scratch project whose images are stagecraft-it/six:<version>-cpu on ``engine``;
    its final tags are removed afterwards (stage images stay, as a user's would).
    ``_cli(path, ...)`` runs the CLI on that engine."""
    path = project(MINIMAL.replace("repository: example/fw", f"repository: {REPO}"))
    _ENGINE_OF[path] = engine
    yield path
    del _ENGINE_OF[path]
    _remove_repository(eclient, REPO)


def _remove_repository(client, repo: str) -> None:
    """Remove every tag of ``repo`` (one another test run may be removing too)."""
    for image in client.images.list(name=repo):
        for tag in image.tags:
            if tag.rsplit(":", 1)[0] != repo:
                continue
            try:
                client.images.remove(tag, noprune=True)
            except docker.errors.ImageNotFound:  # another run on this engine removed it
                pass



def _cli(path: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return _ENGINE_OF[path].cli("--matrix", str(path), *args, timeout=timeout, cwd=path.parent)


def _image_id(client, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        return None


def test_ca_bundle_is_in_no_layer_history_or_label(six_project, eclient, tmp_path):
    marker = f"stagecraft-secret-marker-{uuid.uuid4().hex}"
    bundle = tmp_path / "ca.pem"
    bundle.write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text() + f"\n# {marker}\n")
    # A constraint no earlier run used makes a new runtime key, so pip really runs with
    # this bundle as its secret (pip needs it here: TLS is intercepted).
    unique = f"setuptools<{1000 + uuid.uuid4().int % 10**9}"
    text = six_project.read_text().replace(
        'build: {python: ["3.11"]}', f'build: {{python: ["3.11"]}}\n      constraints: ["six==1.16.0", "{unique}"]')
    six_project.write_text(text)
    proc = _cli(six_project, "--tag", "1.16.0-cpu", "--ca-bundle", str(bundle))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"runtime@\w+ built in", proc.stderr), "the runtime stage was not built this run"
    assert f"CA bundle: {bundle}" in proc.stderr, proc.stderr[:500]
    ref = f"{REPO}:1.16.0-cpu"
    blob = b"".join(eclient.images.get(ref).save(named=True))
    needle = marker.encode()
    assert needle not in blob, "marker found in the saved image (a layer, the config or the manifest)"
    with tarfile.open(fileobj=io.BytesIO(blob)) as outer:
        layers = 0
        for member in outer.getmembers():
            # layer.tar (the classic store's `docker save`) or blobs/sha256/* (OCI layout,
            # the containerd store's; layers gzip-compressed as stored)
            if member.isfile() and (member.name.endswith("layer.tar") or "blobs/" in member.name):
                data = outer.extractfile(member).read()
                if data[:2] == b"\x1f\x8b":
                    data = gzip.decompress(data)
                layers += 1
                assert needle not in data, f"marker in layer {member.name}"
        assert layers >= 3, "no layers found in the saved image"
    history = json.dumps(eclient.api.history(ref))
    attrs = json.dumps(eclient.api.inspect_image(ref))
    assert marker not in history and marker not in attrs, "marker in history, labels or env"
    assert "/run/secrets/pip-ca" in history, "the secret mount is not in the build steps"


def test_failure_leaves_tags_and_unrelated_images(six_project, eclient):
    ok = _cli(six_project, "--all")
    assert ok.returncode == 0, ok.stderr[-3000:]
    before = _image_id(eclient, f"{REPO}:1.16.0-cpu")
    alias_before = _image_id(eclient, f"{REPO}:1.16.0")
    assert before and before == alias_before
    # Break six-1's runtime stage (a distribution the index does not have: a pin that
    # contradicts the framework's own is refused at load now, before any build, by
    # stagecraft/pins.py); change six-2 so it rebuilds.
    text = six_project.read_text().replace(
        '      package: six\n      version: "1.16.0"\n', '      package: six-stagecraft-missing\n      version: "1.16.0"\n')
    text = text.replace('      version: "1.17.0"\n', '      version: "1.17.0"\n      constraints: ["six==1.17.0"]\n')
    six_project.write_text(text)
    proc = _cli(six_project, "--all", "--jobs", "2")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert re.search(r"1\.16\.0-cpu\s+FAILED: build failed .*; log: \S+\.log", proc.stderr), proc.stderr[-2000:]
    log = re.search(r"log: (\S+\.log)", proc.stderr).group(1)
    assert Path(log).is_file() and "six-stagecraft-missing" in Path(log).read_text(), log
    assert _image_id(eclient, f"{REPO}:1.16.0-cpu") == before, "a failed build moved the tag"
    assert _image_id(eclient, f"{REPO}:1.16.0") == before, "a failed build moved the alias"
    assert _image_id(eclient, f"{REPO}:1.17.0-cpu"), "an unrelated image was not built"


def test_interrupt_moves_no_tag_and_the_next_run_resumes(six_project, eclient):
    text = six_project.read_text().replace(
        '      version: "1.17.0"\n',
        f'      version: "1.17.0"\n      constraints: ["six==1.17.0", "setuptools<{1000 + uuid.uuid4().int % 10**9}"]\n')
    six_project.write_text(text)
    assert _image_id(eclient, f"{REPO}:1.17.0-cpu") is None
    argv = [sys.executable, str(ROOT / "build.py"), "--matrix", str(six_project), "--tag", "1.17.0-cpu"]
    proc = subprocess.Popen(with_default_signals(argv), cwd=six_project.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=_ENGINE_OF[six_project].environ())
    seen = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen += line
        if re.search(r"runtime@\w+ \[(?:\S+ )?\d/\d\] RUN", line):
            break
    # A unique constraint makes a new runtime key: its RUN step must really be running.
    assert re.search(r"runtime@\w+ \[(?:\S+ )?\d/\d\] RUN", seen), seen[-2000:]
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    seen += err
    assert proc.returncode == 130, seen[-2000:]
    assert "interrupted: no tag was moved" in seen, seen[-1000:]
    assert _image_id(eclient, f"{REPO}:1.17.0-cpu") is None, "a tag landed on a half-built image"
    again = _cli(six_project, "--tag", "1.17.0-cpu")
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"base@\w+ already built", again.stderr), again.stderr[-2000:]
    assert _image_id(eclient, f"{REPO}:1.17.0-cpu")


def test_existing_keys_skip_buildkit(six_project, eclient):
    first = _cli(six_project, "--all")
    assert first.returncode == 0, first.stderr[-3000:]
    again = _cli(six_project, "--all", "--json")
    assert again.returncode == 0
    report = json.loads(again.stdout)
    assert {s["status"] for s in report["stages"]} == {"cached"}, report["stages"]
    assert "load build definition" not in again.stderr, "BuildKit was called for a built key"
    plan = _cli(six_project, "plan", "--all", "--json")
    assert all(s["built"] for s in json.loads(plan.stdout)["stages"])


def test_bad_input_creates_no_image(six_project, eclient):
    before = {i.id for i in eclient.images.list(all=True)}
    cases = [["--tag", "9.9.9"], ["--tag", "1.16.0-cpu", "--jobs", "0"],
             ["--tag", "1.16.0-cpu", "--ca-bundle", "/nope.pem"]]
    broken = six_project.parent / "broken.yaml"
    broken.write_text(six_project.read_text().replace("framework: [six-1, six-2]", "framework: [six-1, six-3]"))
    cases.append(["--matrix", str(broken), "--all"])
    for args in cases:
        proc = _ENGINE_OF[six_project].cli(*(["--matrix", str(six_project)] if "--matrix" not in args else []),
                                           *args, cwd=six_project.parent)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
    assert {i.id for i in eclient.images.list(all=True)} == before, "bad input created an image"


# Label values that Docker's LABEL line would expand, unescape or mangle unless written
# exactly right: $VAR and ${VAR} (HOME is set in the image), command substitutions,
# backslashes (before quotes, before $, at the end), both quotes, JSON-looking escapes,
# non-ASCII (Latin, CJK, an emoji outside the BMP), a no-break space, '=' and '#'.
TRICKY_LABELS = {
    "vendor": "Société $HOME ${HOME} $(id) `id` 日本 🐳",
    "source": "https://example.invalid/a b?x=1#frag \\ \\\\ \\\" \\$HOME \\u00e9 'q' \"dq\" {{ x }} %s \u00a0end\\",
}


def test_labels_carry_the_matrix_text_exactly(six_project, eclient):
    from stagecraft.render import final_labels
    from tests.unit.dockerfile_model import instructions, labels

    text = six_project.read_text().replace(
        "source: https://example.invalid/src",
        f"source: {json.dumps(TRICKY_LABELS['source'], ensure_ascii=False)}\n"
        f"vendor: {json.dumps(TRICKY_LABELS['vendor'], ensure_ascii=False)}")
    six_project.write_text(text)
    proc = _cli(six_project, "--tag", "1.16.0-cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = eclient.images.get(f"{REPO}:1.16.0-cpu").labels
    assert got["org.opencontainers.image.vendor"] == TRICKY_LABELS["vendor"]
    assert got["org.opencontainers.image.source"] == TRICKY_LABELS["source"]
    # Every label of the tag is the text stagecraft meant, and the test model of
    # BuildKit's parser (used by the unit tests and the fuzzer) reads the rendered
    # Dockerfile as this engine did.
    rendered = _cli(six_project, "render", "1.16.0-cpu")
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    last = [i for i in instructions(rendered.stdout) if i.keyword == "label"][-1]
    model = {k: w.text for k, w in labels(last.args, {"HOME": "/home/worker"}).items()}
    assert {k: got[k] for k in model} == model
    from stagecraft.expand import expand, resolve
    from stagecraft.matrix import load_matrix

    matrix = load_matrix(six_project)
    meant = final_labels(matrix, resolve(expand(matrix), "1.16.0-cpu"), "r", "c")
    for key in ("org.opencontainers.image.vendor", "org.opencontainers.image.source",
                "org.opencontainers.image.description", "io.stagecraft.matrix.selection"):
        assert got[key] == meant[key], key


def _names_state(client, refs: list[str]) -> dict[str, str | None]:
    return {ref: _image_id(client, ref) for ref in refs}


def _set_names(client, state: dict[str, str | None]) -> None:
    for ref, image_id in state.items():
        repo, tag = ref.rsplit(":", 1)
        if image_id is None:
            if _image_id(client, ref):
                client.api.remove_image(ref, noprune=True)
        else:
            client.api.tag(image_id, repo, tag, force=True)


@pytest.fixture
def tags_project(project, engine, eclient):
    """The six project under a repository of its own (other runs on this engine use
    stagecraft-it/six at the same time), on ``engine``: (matrix path, repository)."""
    repo = f"stagecraft-it/six-tags-{uuid.uuid4().hex[:8]}"
    aliases = ", ".join(['"{{ framework.version }}"'] +
                        [f'"{{{{ framework.version }}}}-a{i}"' for i in range(75)])
    text = (MINIMAL.replace("repository: example/fw", f"repository: {repo}")
            .replace('aliases: ["{{ framework.version }}"]', f"aliases: [{aliases}]"))
    path = project(text)
    _ENGINE_OF[path] = engine
    yield path, repo
    del _ENGINE_OF[path]
    _remove_repository(eclient, repo)


def test_tag_phase_is_all_or_nothing_under_signals(tags_project, eclient):
    """Interrupt `--all` (two images, 77 names each) at many instants around and inside
    the tag phase: afterwards either every name points at its new image or every name is
    as it was (moved back to its old image, or absent again), and the last line says
    which (issue 13, item 2)."""
    six_project, repo = tags_project
    first = _cli(six_project, "--all", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    images = json.loads(first.stdout)["images"]
    new = {f"{repo}:{n}": i["image_id"] for i in images for n in [i["tag"], *i["aliases"]]}
    assert len(new) == 154
    ids = sorted({*new.values()})
    # Before each try: even names point at the other image, odd names do not exist.
    old = {ref: (ids[1] if image_id == ids[0] else ids[0]) if k % 2 == 0 else None
           for k, (ref, image_id) in enumerate(new.items())}

    def run(delay: float, sig: int) -> tuple[int, str, float]:
        _set_names(eclient, old)
        proc = subprocess.Popen(with_default_signals([sys.executable, str(ROOT / "build.py"), "--matrix",
                                                      str(six_project), "--all"]),
                                cwd=six_project.parent, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env=_ENGINE_OF[six_project].environ())
        err = ""
        while "tagging 154 name(s)" not in err:
            line = proc.stderr.readline()
            assert line, f"the run ended before its tag phase: {err[-2000:]}"
            err += line
        t0 = time.monotonic()
        try:
            proc.wait(timeout=delay)  # (stderr is not read meanwhile: the phase writes little)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
        err += proc.communicate(timeout=120)[1]
        return proc.returncode, err, time.monotonic() - t0

    rc, err, phase = run(30.0, signal.SIGINT)  # not interrupted: how long the phase lasts
    assert rc == 0, err[-2000:]
    outcomes = []
    delays = [phase * f for f in (0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 2.0)]
    for k, delay in enumerate(delays):
        sig = signal.SIGTERM if k % 4 == 3 else signal.SIGINT
        rc, err, _ = run(delay, sig)
        assert "Traceback" not in err, err[-2000:]
        last = err.strip().splitlines()[-1]
        now = _names_state(eclient, list(new))
        moved = [ref for ref in new if now[ref] == new[ref]]
        if len(moved) == len(new):
            outcomes.append("all")
            # Finished (the signal came after, or killed the interpreter on its way out,
            # -sig), or stopped after the tag phase, saying so.
            assert (rc in (0, -sig) and "interrupted" not in last) or (rc == 130 and last.startswith(
                "interrupted after tagging: every tag of the run was moved (154 name(s)")), (delay, rc, last)
        else:
            outcomes.append("none")
            assert now == old, (f"delay {delay:.3f}s: {len(moved)} of {len(new)} names moved, "
                                f"the others not; last line: {last}")
            assert rc == 130 and last.startswith("interrupted: no tag was moved"), (delay, rc, last)
            if "put back" in last:
                outcomes[-1] = "put back"
    assert "put back" in outcomes, f"no interrupt fell inside the tag phase: {outcomes} ({phase:.3f} s)"


@pytest.fixture
def own_project(project, client):
    """The six project under a repository of its own and a vendor label no other run
    used (its label stages are new keys, built in about a second), on the host engine
    (what these tests check is the driver's, not the engine's): (path, repository)."""
    repo = f"stagecraft-it/six-own-{uuid.uuid4().hex[:8]}"
    text = MINIMAL.replace("repository: example/fw", f"repository: {repo}").replace(
        "source: https://example.invalid/src",
        f"source: https://example.invalid/src\nvendor: v-{uuid.uuid4().hex}")
    yield project(text), repo
    _remove_repository(client, repo)


def test_sigkill_leaves_scratch_the_next_run_removes(own_project):
    """SIGKILL cannot be handled: the killed run's scratch directory (its build contexts)
    stays, and the next run of any command removes it (issue 13, item 7)."""
    import tempfile

    path, _ = own_project
    base = Path(tempfile.gettempdir()) / f"stagecraft-{os.getuid()}"
    proc = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "--matrix", str(path),
                             "--tag", "1.16.0-cpu"], cwd=path.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    seen = ""
    while not re.search(r"\[\d+/\d+\] label@", seen):
        line = proc.stderr.readline()
        assert line, seen[-2000:]
        seen += line
    left = list(base.glob(f"run-{proc.pid}-*"))
    proc.kill()
    proc.wait(timeout=60)
    assert left and all(d.is_dir() for d in left), "the run had no scratch directory"
    again = run_cli("--matrix", str(path), "--list", cwd=path.parent)
    assert again.returncode == 0, again.stderr
    assert not any(d.exists() for d in left), "the next run left the killed run's scratch"


def test_two_runs_of_one_tag_keep_their_own_logs(own_project):
    """Two runs building the same stage at once: each writes a whole log of its own
    (the second beside the first, named by its pid), neither truncates the other's."""
    path, _ = own_project
    argv = [sys.executable, str(ROOT / "build.py"), "--matrix", str(path), "--tag", "1.16.0-cpu",
            "--state-dir", str(path.parent / "state")]
    runs = [subprocess.Popen(argv, cwd=path.parent, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [r.communicate(timeout=900)[1] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [e[-1500:] for e in errs]
    logs = sorted((path.parent / "state" / "logs").glob("label-*.log"))
    built = sum(bool(re.search(r"label@\w+ built in", e)) for e in errs)
    assert len(logs) == built >= 1, (built, [log.name for log in logs])
    for log in logs:
        text = log.read_text()
        assert text.startswith("$ ") and text.count("\n$ ") == 0, f"{log.name} mixes two runs"
        assert re.search(r"writing image sha256:|naming to", text), f"{log.name} is cut short"


def _new_runtime_key(path: Path) -> None:
    """A constraint no run used before: the runtime stage is a new key, so pip runs."""
    path.write_text(path.read_text().replace(
        'build: {python: ["3.11"]}',
        f'build: {{python: ["3.11"]}}\n      constraints: ["six==1.16.0", '
        f'"setuptools<{1000 + uuid.uuid4().int % 10**9}"]'))


def test_a_dead_proxy_is_named_not_pips_resolution_error(own_project):
    """pip behind a proxy that does not answer ends with "Could not find a version" /
    ResolutionImpossible; the reason given is that pip never reached the index."""
    path, _ = own_project
    first = run_cli("--matrix", str(path), "--tag", "1.16.0-cpu", cwd=path.parent)  # base, cached
    assert first.returncode == 0, first.stderr[-2000:]
    _new_runtime_key(path)
    dead = "http://127.0.0.1:9"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix", str(path), "--tag",
                           "1.16.0-cpu"], cwd=path.parent, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HTTPS_PROXY": dead, "HTTP_PROXY": dead,
                               "https_proxy": dead, "http_proxy": dead})
    assert proc.returncode == 1, proc.stderr[-2000:]
    failed = [ln for ln in proc.stderr.splitlines() if "runtime@" in ln and "FAILED" in ln]
    assert failed and "pip could not reach the package index (ProxyError" in failed[0], proc.stderr[-2000:]
    assert "ResolutionImpossible" not in failed[0] and "Could not find a version" not in failed[0]


def test_an_engine_lost_mid_build_is_named(own_project, tmp_path):
    """The engine goes away while a RUN step runs: the reason is that the engine stopped
    answering, not the client's "cannot write iid ... did not provide an image ID"."""
    path, _ = own_project
    first = run_cli("--matrix", str(path), "--tag", "1.16.0-cpu", cwd=path.parent)  # base, cached
    assert first.returncode == 0, first.stderr[-2000:]
    _new_runtime_key(path)
    relay = SocketRelay(tmp_path / "docker.sock")
    proc = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "--matrix", str(path), "--tag",
                             "1.16.0-cpu"], cwd=path.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"})
    seen = ""
    try:
        while not re.search(r"runtime@\w+ \[(?:\S+ )?\d/\d\] RUN", seen):
            line = proc.stderr.readline()
            assert line, seen[-2000:]
            seen += line
    finally:
        relay.stop()
    seen += proc.communicate(timeout=300)[1]
    assert proc.returncode == 1, seen[-2000:]
    failed = [ln for ln in seen.splitlines() if "runtime@" in ln and "FAILED" in ln]
    assert failed and "the Docker engine stopped answering during the build" in failed[0], seen[-2000:]
    assert "Traceback" not in seen, seen[-2000:]


# A stand-in `docker` CLI in front of the real one (testinfra's docker backend runs each
# check's command with `docker exec`): for the containers MODE names it answers as an
# engine that cannot start a process in them, runc's words and the CLI's exit 126
# (tests/unit/test_suitecases.py), or as an image without the command ("image").
_STAND_IN_DOCKER = r"""#!/bin/sh
if [ "$1" = exec ]; then
  mode=$(cat "$STAND_IN_STATE/mode")
  [ -s "$STAND_IN_STATE/first" ] || printf %s "$2" > "$STAND_IN_STATE/first"
  if [ "$mode" = always ] || { [ "$mode" = first ] && [ "$2" = "$(cat "$STAND_IN_STATE/first")" ]; }; then
    echo "$2" >> "$STAND_IN_STATE/refused"
    printf 'OCI runtime exec failed: exec failed: unable to start container process: waiting for init preliminary setup: read init-p: connection reset by peer: unknown\r\n'
    exit 126
  fi
  case "$mode:$*" in image:*dpkg-query*)
    printf 'OCI runtime exec failed: exec failed: unable to start container process: exec: "dpkg-query": executable file not found in $PATH: unknown\r\n'
    exit 126;;
  esac
fi
exec REAL "$@"
"""


def test_an_engine_that_cannot_exec_in_the_test_container_is_no_verdict(own_project, tmp_path):
    """The engine failing to start the checks' processes in the test container (as the
    fault suite met after an engine restart) is not the image failing its suites: the
    suites run again in a new container, and where the engine fails them there too, the
    run says so and writes no test record. An image that lacks a command still fails."""
    import shutil

    from stagecraft.testing import record_path

    path, _ = own_project
    state = tmp_path / "state"
    built = run_cli("--matrix", str(path), "--tag", "1.16.0-cpu", "--state-dir", str(state), "--json",
                    cwd=path.parent)
    assert built.returncode == 0, built.stderr[-2000:]
    image_id = json.loads(built.stdout)["images"][0]["image_id"]
    bin_dir, stand_in = tmp_path / "bin", tmp_path / "stand-in"
    bin_dir.mkdir()
    stand_in.mkdir()
    (bin_dir / "docker").write_text(_STAND_IN_DOCKER.replace("REAL", shutil.which("docker")))
    (bin_dir / "docker").chmod(0o755)

    def test_run(mode: str) -> subprocess.CompletedProcess:
        for name in ("first", "refused"):
            (stand_in / name).unlink(missing_ok=True)
        (stand_in / "mode").write_text(mode)
        record_path(state, image_id).unlink(missing_ok=True)
        return subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix", str(path), "test",
                               "--tag", "1.16.0-cpu", "--state-dir", str(state)],
                              cwd=path.parent, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                   "STAND_IN_STATE": str(stand_in)})

    once = test_run("first")
    assert once.returncode == 0, once.stderr[-3000:]
    assert (stand_in / "refused").read_text().split()[0] == (stand_in / "first").read_text()
    assert "the engine could not start a process in the test container of 1.16.0-cpu" in once.stderr
    assert "no verdict on the image; the suites run again in a new container" in once.stderr
    assert json.loads(record_path(state, image_id).read_text())["passed"] is True

    never = test_run("always")
    assert never.returncode == 1, never.stderr[-3000:]
    last = never.stderr.strip().splitlines()[-1]
    assert "could not start a process in the test container of 1.16.0-cpu" in last and "in 2 containers" in last, last
    assert "no test record was written" in last and "Traceback" not in never.stderr
    assert not record_path(state, image_id).exists(), "a record for a run the engine failed"
    assert len(set((stand_in / "refused").read_text().split())) == 2  # two containers

    lacking = test_run("image")
    assert lacking.returncode == 1, lacking.stderr[-3000:]
    assert "run again" not in lacking.stderr
    record = json.loads(record_path(state, image_id).read_text())
    assert record["passed"] is False and record["counts"].get("failed", 0) >= 1
    assert any(f.startswith("tests.image.test_base::test_declared_packages_are_installed: ")
               and "executable file not found" in f for f in record["failures"]), record["failures"]


# A stand-in build client (STAGECRAFT_DOCKER) in front of the real one: a stage build it
# passes on succeeds, then, once, ends as BuildKit's image exporter ends when another
# build created the stage's name first (the containerd image store's create): the name
# exists, whole, and this build says 'already exists' and exits 1, after a step's own
# error line (pip's resolver note, printed by installs that succeed).
_NAME_TAKEN_DOCKER = r"""#!/bin/sh
ref=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-t" ]; then case "$a" in stagecraft-stage/*) ref="$a";; esac; fi
  prev="$a"
done
REAL "$@"; rc=$?
if [ "$rc" = 0 ] && [ -n "$ref" ] && [ ! -e "$STAND_IN_STATE/taken" ]; then
  echo "$ref" > "$STAND_IN_STATE/taken"
  echo "#9 12.31 ERROR: pip's dependency resolver does not currently take into account all the packages that are installed."
  echo "ERROR: failed to solve: image \"docker.io/$ref\": already exists"
  exit 1
fi
exit "$rc"
"""


def test_a_stage_another_run_named_first_is_used_not_failed(own_project, tmp_path):
    """Two runs building one stage at once on the containerd image store: the second
    export of its name fails with "already exists" (the fault suite, seed 20261393,
    trial 24: the run failed). The stage is whole under its key: the run uses it, says
    so, and tags its image."""
    from stagecraft.buildpath import detect_builder

    path, _ = own_project
    bin_dir, stand_in = tmp_path / "bin", tmp_path / "stand-in"
    bin_dir.mkdir()
    stand_in.mkdir()
    real = detect_builder().client  # the client the run would use
    (bin_dir / "docker").write_text(_NAME_TAKEN_DOCKER.replace("REAL", real))
    (bin_dir / "docker").chmod(0o755)
    run = subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix", str(path), "--tag", "1.16.0-cpu",
                          "--state-dir", str(tmp_path / "state"), "--json"],
                         cwd=path.parent, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "STAGECRAFT_DOCKER": str(bin_dir / "docker"),
                              "STAND_IN_STATE": str(stand_in)})
    assert run.returncode == 0, run.stderr[-3000:]
    taken = (stand_in / "taken").read_text().strip()
    stage, key = taken.split("/", 1)[1].split(":")
    assert f"{stage}@{key[:12]}: another run building it at the same time named it first; using that image" \
        in run.stderr, run.stderr[-3000:]
    report = json.loads(run.stdout)
    stages = report["stages"]
    stages = list(stages.values()) if isinstance(stages, dict) else stages
    assert [s["status"] for s in stages if s["key"].startswith(key)] == ["cached"]
    assert report["images"][0]["tagged"] is True and "Traceback" not in run.stderr


def test_a_wheel_version_pypi_lacks_is_one_line_and_builds_nothing(project, client):
    """A CUDA stage pinning an NVIDIA wheel version PyPI does not have: exit 2 before any
    build, one line at the pin's matrix.yaml line naming the versions PyPI has (asked on
    the real PyPI, through the CA bundle, as the build's pip would)."""
    text = (MINIMAL
            .replace("entrypoint:\n", "build_tools: {cuobjdump: nvidia-cuda-cuobjdump==13.4.92}\nentrypoint:\n")
            .replace("  runtime:\n    template:", "  cuda:\n    template: cuda.Dockerfile.j2\n    parents: [base]\n"
                     "    uses: [cuda]\n  runtime:\n    template:")
            .replace("    parents: [base]\n    uses: [framework]", "    parents: [base, cuda]\n    uses: [framework]")
            .replace("  framework:\n", "  cuda:\n    cu126:\n      cuda: \"12.6\"\n      prefix: /usr/local/cuda-12.6\n"
                     "      source: pypi\n      pypi: {nvidia-cuda-runtime-cu12: \"12.6.999\"}\n  framework:\n")
            .replace("      device: cpu\n      build: {python: [\"3.11\"]}",
                     "      device: nvidia\n      build: {python: [\"3.11\"], fatbins: [six.so], sass: [\"8.0\"], ptx: [], dlopen: []}")
            .replace("chain: [base, runtime]", "chain: [base, cuda, runtime]")
            .replace("      framework: [six-1, six-2]", "      cuda: [cu126]\n      framework: [six-1]"))
    path = project(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "12.6.999" in ln)
    before = {i.id for i in client.images.list(all=True)}
    proc = run_cli("--matrix", str(path), "--tag", "1.16.0-cpu", cwd=path.parent)  # the host engine
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: matrix.yaml:{line}: nvidia-cuda-runtime-cu12==12.6.999: "
                               "https://pypi.org/simple has no wheel of that version (latest: "), lines
    assert "12.6.77" in lines[0] or "12." in lines[0], lines
    assert {i.id for i in client.images.list(all=True)} == before, "a doomed pin started a build"
