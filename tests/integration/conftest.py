"""Integration tests: a real Docker engine, real builds, real images.

The images of matrix.yaml are built once per run (session fixture `built`, through the
CLI, as a user would), and every test reuses them. Tags whose framework comes from an
index this host cannot reach are skipped, with the reason.
"""

from __future__ import annotations

import json

import docker
import pytest

from stagecraft.platforms import host_platform
from tests.integration.harness import buildable_here, run_cli


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    """The Docker engine. Integration tests fail (not skip) without one: `make test`
    starts it."""
    try:
        c = docker.from_env()
        c.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"no Docker engine: {exc}; run `make setup`")
    return c


@pytest.fixture(scope="session")
def built(client) -> dict[str, dict]:
    """Every buildable tag of matrix.yaml, built once: tag -> {"ref", "image_id"}."""
    tags, _ = buildable_here()
    # The host's platform only: these suites run natively; the arm64 images are built and
    # tested by test_platforms.py.
    args = ["--json", "--jobs", "2", "--platform", host_platform()]
    for tag in tags:
        args += ["--tag", tag]
    proc = run_cli(*args)
    assert proc.returncode == 0, f"build failed:\n{proc.stderr[-4000:]}"
    report = json.loads(proc.stdout)
    return {i["tag"]: {"ref": i["ref"], "image_id": i["image_id"]} for i in report["images"]}
