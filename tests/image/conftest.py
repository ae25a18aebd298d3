"""Fixtures for the testinfra suites that run against a built image.

`python build.py test` (and `build.py --test`) starts a container of the image and runs
these suites with `--hosts=docker://<container>` and `--stagecraft-spec=<json>`: the
image's expectations, taken from matrix.yaml (see stagecraft/testing.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import docker
import pytest
import testinfra.host
from testinfra.backend.base import CommandResult
from testinfra.backend.docker import DockerBackend

# runc's words when an exec's process could not be started in the container (its init
# died before the command ran: "waiting for init preliminary setup: read init-p:
# connection reset by peer", seen once in 2026-12-07's fault suite, trial 42 of seed
# 20261398); the docker CLI prints them on stdout and exits 126. Nothing ran, so the
# command is run again.
EXEC_NOT_STARTED = "OCI runtime exec failed: exec failed: unable to start container process"
EXEC_TRIES = 3


class StartedExecDocker(DockerBackend):
    """testinfra's docker backend (``docker exec``), whose command is run again, up to
    ``EXEC_TRIES`` times 0.5 s apart, when runc could not start its process
    (``EXEC_NOT_STARTED``, exit 126): a case never reads runc's words as the command's
    output."""

    def run(self, command: str, *args: str, **kwargs: Any) -> CommandResult:
        for attempt in range(1, EXEC_TRIES + 1):
            out = super().run(command, *args, **kwargs)
            if out.rc != 126 or EXEC_NOT_STARTED not in out.stdout + out.stderr or attempt == EXEC_TRIES:
                return out
            time.sleep(0.5)
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def host(_testinfra_host: testinfra.host.Host) -> testinfra.host.Host:
    """testinfra's ``host`` (``--hosts=docker://<container>``), through ``StartedExecDocker``."""
    backend = _testinfra_host.backend
    if type(backend) is not DockerBackend:
        return _testinfra_host
    return testinfra.host.Host(StartedExecDocker(f"{backend.user}@{backend.name}" if backend.user else backend.name))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stagecraft-spec", help="JSON file with the image's expectations")


@pytest.fixture(scope="session")
def spec(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The image's expectations: tag, ref, image_id, base, framework, components,
    manifest, chain (see stagecraft.testing.expectations)."""
    path = request.config.getoption("--stagecraft-spec")
    if not path:
        pytest.skip("image suites run through `python build.py test --tag TAG`")
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="session")
def run_labels(spec: dict[str, Any]) -> dict[str, str]:
    """Labels for every container a suite starts: those of the run's own container
    (stagecraft.testing.container_labels), so a run killed before its suites removed
    their containers has them removed by the next one."""
    return dict(spec.get("container_labels") or {"io.stagecraft.test": spec["tag"]})


@pytest.fixture(scope="session")
def image_attrs(spec: dict[str, Any]) -> dict[str, Any]:
    """`docker image inspect` of the image under test."""
    return docker.from_env().api.inspect_image(spec["image_id"])


@pytest.fixture(scope="session")
def labels(image_attrs: dict[str, Any]) -> dict[str, str]:
    """The image's labels."""
    return image_attrs["Config"].get("Labels") or {}


@pytest.fixture(scope="module")
def py(host, spec):
    """Run Python code in the container with the image's own python; returns stdout.
    Fails the test (with the tag in the message) when the code exits non-zero."""

    def run(code: str, timeout: int = 120) -> str:
        cmd = host.run("timeout %s python3 -c %s", str(timeout), code)
        assert cmd.rc == 0, f"{spec['tag']}: python exited {cmd.rc}:\n{cmd.stderr[-2000:]}"
        return cmd.stdout

    return run
