"""The containers stagecraft itself runs of an image (stagecraft/containers.py), on the
host engine with the six project's image: each is removed however its command ends, and
one a killed run left is removed by the next run.

Found by the fault suite (issue 24): a `--test` run whose engine's disk was full left its
SBOM inventory container (exited 255, no label), and every later `prune` failed on the
image it held. A container the engine refuses to remove and one a SIGKILL'd run leaves
are the same case to the next run: both carry the run's labels, and the run is gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest

from stagecraft import containers, scratch
from stagecraft.errors import BuildError
from tests.integration.harness import ROOT, SocketRelay, run_cli, six_project, with_default_signals

TAG = "1.16.0-cpu"


@pytest.fixture(scope="module")
def six(tmp_path_factory, client) -> dict:
    """The six project under a repository of its own, built (no tests) on the host
    engine: {"matrix", "ref", "image_id"}; its tags are removed afterwards."""
    root = tmp_path_factory.mktemp("six-containers")
    repo = f"stagecraft-it/six-boxes-{uuid.uuid4().hex[:8]}"
    matrix = six_project(root, repo)
    done = run_cli("--matrix", str(matrix), "--tag", TAG, cwd=root, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    ref = f"{repo}:{TAG}"
    yield {"matrix": matrix, "ref": ref, "image_id": client.images.get(ref).id, "root": root}
    for image in client.images.list(name=repo):
        for name in image.tags:
            if name.startswith(repo + ":"):
                client.images.remove(name, noprune=True)


def _inventory_events(client, within_s: float = 120):
    """The engine's create events of inventory containers from now on (the request is
    made here: no earlier event is replayed), for ``within_s``."""
    now = time.time()  # to the nanosecond: an event of the second before is not replayed
    return client.events(decode=True, since=f"{now:.9f}", until=f"{now + within_s:.9f}", filters={
        "type": "container", "event": "create", "label": f"{containers.PURPOSE_LABEL}=inventory"})


def _first(stream) -> str:
    """The id of the stream's first container, or "" when it ends first."""
    try:
        for event in stream:
            return event["Actor"]["ID"]
        return ""
    finally:
        stream.close()


def _boxes(client, image_id: str) -> list:
    return [c for c in client.containers.list(all=True) if c.attrs.get("Image") == image_id]


def test_run_once_returns_stdout_and_removes_its_container(six, client):
    before = {c.id for c in _boxes(client, six["image_id"])}
    out = containers.run_once(client, six["image_id"], ["/bin/sh", "-c", "echo out; echo err >&2"], "freeze")
    assert out == b"out\n"
    assert {c.id for c in _boxes(client, six["image_id"])} == before


@pytest.mark.parametrize("argv, timeout_s, limit, said", [
    (["/bin/sh", "-c", "echo first >&2; echo 'the cause' >&2; exit 3"], 60, 1024,
     "exited 3: the cause"),
    (["/bin/sh", "-c", "head -c 5000 /dev/zero"], 60, 4096, "printed more than 4096 bytes"),
    (["sleep", "30"], 2, 1024, "ran past 2 s"),
], ids=["exit-status", "output-limit", "time-limit"])
def test_run_once_failures_say_why_and_remove_the_container(six, client, argv, timeout_s, limit, said):
    before = {c.id for c in _boxes(client, six["image_id"])}
    t0 = time.monotonic()
    with pytest.raises(BuildError, match=said) as err:
        containers.run_once(client, six["image_id"], argv, "inventory", timeout_s=timeout_s, limit_bytes=limit)
    assert "the inventory container of" in str(err.value)
    assert time.monotonic() - t0 < 25, "the time limit did not stop the wait"
    assert {c.id for c in _boxes(client, six["image_id"])} == before


def test_a_killed_runs_inventory_container_goes_with_the_next_run(six, client):
    """SIGKILL the `--test` run the moment the engine creates its inventory container
    (build.py frozen first, so it can neither start nor remove it): the container stays,
    labelled with the dead run; the next `--test` run removes it and passes."""
    argv = with_default_signals([sys.executable, str(ROOT / "build.py"), "--matrix", str(six["matrix"]),
                                 "--tag", TAG, "--test"])
    stream = _inventory_events(client)
    proc = subprocess.Popen(argv, cwd=six["root"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        box = _first(stream)
        if box:
            os.kill(proc.pid, signal.SIGSTOP)
    finally:
        proc.kill()
        err = proc.communicate(timeout=60)[1]
    assert box, f"the run made no container of its image: exit {proc.returncode}: {err[-2000:]}"
    left = client.containers.get(box)  # the killed run could not remove it
    assert left.attrs["Config"]["Cmd"][:2] == ["/bin/sh", "-c"], left.attrs["Config"]["Cmd"]
    again = run_cli("--matrix", str(six["matrix"]), "--tag", TAG, "--test", cwd=six["root"], timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(box)
    assert _boxes(client, six["image_id"]) == [], "the next run left a container of the image"


def test_an_engine_lost_during_the_inventory_leaves_a_container_the_next_run_removes(six, client, tmp_path):
    """The defect as the fault suite met it (seed 20261319, trial 52: the engine killed
    while `--test` read the SBOM inventory): the run loses its engine (a socket relay
    closed the moment the engine creates the inventory container), the container lives
    on in the engine, the run ends on one line naming the lost engine, and the next run
    removes the container."""
    relay = SocketRelay(tmp_path / "docker.sock")
    argv = with_default_signals([sys.executable, str(ROOT / "build.py"), "--matrix", str(six["matrix"]),
                                 "--tag", TAG, "--test"])
    stream = _inventory_events(client)
    proc = subprocess.Popen(argv, cwd=six["root"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"})
    try:
        box = _first(stream)
    finally:
        relay.stop()
        try:
            err = proc.communicate(timeout=300)[1]
        finally:
            proc.kill()
    assert box, f"the run made no container of its image: exit {proc.returncode}: {err[-2000:]}"
    assert proc.returncode == 1, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "engine" in last.lower(), err[-2000:]
    client.containers.get(box)  # the run could not remove it
    again = run_cli("--matrix", str(six["matrix"]), "--tag", TAG, "--test", cwd=six["root"], timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(box)


def test_prune_names_a_left_container_and_the_sweep_removes_only_it(six, client, tmp_path: Path):
    """A container whose run is gone (its scratch directory's lock is free) is named by
    `prune`'s dry run and removed by the sweep that `prune --yes` and every run making
    a container do; a live run's container (its lock held) is left alone. (`prune --yes`
    itself is not run here: on the shared host engine it would remove other tests'
    stages; tests/integration/test_prune_engine.py runs it on an engine of its own.)"""
    dead, alive = tmp_path / "run-1-1", tmp_path / "run-2-2"
    for d in (dead, alive):
        d.mkdir()
        (d / scratch.LOCK).touch()
    held = os.open(alive / scratch.LOCK, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # a run that still lives holds its lock
    box, live = (client.containers.create(six["image_id"], ["true"], entrypoint=[], labels={
        **containers.labels("inventory"), containers.RUN_LABEL: str(d)}) for d in (dead, alive))
    try:
        dry = run_cli("--matrix", str(six["matrix"]), "prune", "--json", cwd=six["root"], timeout=600)
        assert dry.returncode == 0, dry.stderr[-2000:]
        named = json.loads(dry.stdout)["would_remove_containers"]  # with any other run's leftovers
        assert box.name in named and live.name not in named, named
        client.containers.get(box.id)
        removed, failed = containers.sweep(client)
        assert box.name in removed and live.name not in removed and failed == [], (removed, failed)
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(box.id)
        client.containers.get(live.id)
    finally:
        os.close(held)
        for c in (box, live):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass


def test_freeze_lists_the_venv_and_leaves_no_container(six, client):
    """`freeze` reads the image's venv in a short container of its own (run_once)."""
    done = run_cli("--matrix", str(six["matrix"]), "freeze", TAG, "--json", cwd=six["root"], timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["tag"] == TAG and out["framework"].startswith("six"), out
    assert all("==" in pin for pin in out["constraints"]), out
    assert not any(p.lower().startswith("six==") for p in out["constraints"]), "the framework itself is pinned"
    assert _boxes(client, six["image_id"]) == []
