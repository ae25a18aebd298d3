"""Integration tests: real Docker engines, real builds, real images.

Each engine-dependent test runs on every engine of ``tests/integration/engines.py``
(the ``engine`` fixture: the host's engine and a modern one beside it). The images of
matrix.yaml are built once per run and engine (fixture ``engine_built``, through the
CLI, as a user would), and every test reuses them. Tags whose framework comes from an
index this host cannot reach are skipped, with the reason.
"""

from __future__ import annotations

import json

import docker
import pytest

from tests.integration import engines, imagesets, platforms_build

_BUILT: dict[str, dict[str, dict]] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests (and fixtures) that take ``engine`` run once per selected engine, unless
    they parametrize it themselves."""
    if "engine" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if "engine" in names:
            return
    metafunc.parametrize("engine", engines.selected(), indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each engine's tests carry its marker (``-m modern``, ``-m "not modern"``)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("engine") if callspec else None
        if name in engines.ENGINES:
            item.add_marker(getattr(pytest.mark, name))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The multi-platform image's emulated build starts now, in the background, when a
    selected test needs it (``platforms_build``: why); so do the image sets of the
    engines whose images a selected test needs (``imagesets``). ``--collect-only``
    starts nothing."""
    if session.config.option.collectonly:
        return
    if "modern" in engines.selected() and any(
            "platform_index" in getattr(item, "fixturenames", ()) for item in session.items):
        platforms_build.start()
    imagesets.start(engines_needing_images(session.items))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Image set builds still queued or running stop with the session (``imagesets.stop``)."""
    imagesets.stop()


def engines_needing_images(items: list[pytest.Item]) -> list[str]:
    """The engines, of those selected, whose image set a test of ``items`` needs: the
    ``built`` fixture's (the host's), or ``engine_built``'s for its engine parameter."""
    needed = []
    for item in items:
        names = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        if "built" in names:
            needed.append("host")
        if "engine_built" in names and callspec is not None and callspec.params.get("engine") in engines.ENGINES:
            needed.append(callspec.params["engine"])
    return [e for e in engines.selected() if e in needed]


@pytest.fixture(autouse=True)
def _image_sets_before_any_engine_test():
    """No integration test runs while an image set still builds in the background
    (``imagesets``): a test counting an engine's images would see them appear."""
    imagesets.wait_all()


def engine_pairs(tags: list[str]) -> list:
    """``pytest.param(engine, tag)`` for every selected engine and tag it builds."""
    return [pytest.param(e, t, id=f"{e}-{t}") for e in engines.selected() for t in tags
            if e == "host" or t in engines.modern_tags()]


@pytest.fixture(scope="session")
def engine(request) -> engines.TestEngine:
    """The engine of this parameter (``host`` or ``modern``). Fails (not skips) when the
    modern engine cannot start: `make test` starts it."""
    try:
        return engines.get(request.param)
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `bash scripts/modern-engine.sh up` as root")


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    """The host's Docker engine. Integration tests fail (not skip) without one: `make
    test` starts it."""
    try:
        c = docker.from_env()
        c.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"no Docker engine: {exc}; run `make setup`")
    return c


@pytest.fixture(scope="session")
def eclient(engine) -> docker.DockerClient:
    """A docker SDK client of ``engine``."""
    return engine.client()


def build_on(engine: engines.TestEngine) -> dict[str, dict]:
    """Every buildable tag of matrix.yaml that ``engine`` builds, built once per session:
    tag -> {"ref", "image_id"}."""
    if engine.name not in _BUILT:
        # Begun in the background at collection where a collected test needed it
        # (imagesets); else now. The host's platform only: these suites run natively;
        # the arm64 images are built and tested by test_platforms_emulated.py.
        proc = imagesets.result(engine.name) or engine.cli(*imagesets.build_args(engine))
        assert proc.returncode == 0, f"build on the {engine.name} engine failed:\n{proc.stderr[-4000:]}"
        report = json.loads(proc.stdout)
        _BUILT[engine.name] = {i["tag"]: {"ref": i["ref"], "image_id": i["image_id"]}
                               for i in report["images"]}
    return _BUILT[engine.name]


@pytest.fixture(scope="session")
def engine_built(engine) -> dict[str, dict]:
    """The images ``engine`` builds (``build_on``)."""
    return build_on(engine)


@pytest.fixture(scope="session")
def built(client) -> dict[str, dict]:
    """Every buildable tag of matrix.yaml, built once on the host engine."""
    return build_on(engines.get("host"))
