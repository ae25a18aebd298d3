"""Fixtures for the testinfra suites that run against a built image.

`python build.py test` (and `build.py --test`) starts a container of the image and runs
these suites with `--hosts=docker://<container>` and `--stagecraft-spec=<json>`: the
image's expectations, taken from matrix.yaml (see stagecraft/testing.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest


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
