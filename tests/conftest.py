"""Shared test helpers: the project root, and a scratch project whose matrix a test
writes while templates, suites and copied paths are the real ones (copied or linked)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_TIMELINE = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-timeline", metavar="PATH", default=None,
                     help="write how busy the CPUs were during each test (tests/cputimeline.py)")


def pytest_configure(config: pytest.Config) -> None:
    """``--cpu-timeline``: the run's CPU timeline is written (tests/cputimeline.py)."""
    path = config.getoption("--cpu-timeline", default=None)
    if path:
        from tests.cputimeline import Timeline

        config.stash[_TIMELINE] = Timeline(Path(path))


def pytest_sessionstart(session: pytest.Session) -> None:
    if _TIMELINE in session.config.stash:
        session.config.stash[_TIMELINE].session("start")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """The timeline's line of each test: from before its set-up to after its tear-down."""
    timeline = item.config.stash.get(_TIMELINE, None)
    if timeline is not None:
        timeline.test_start(item.nodeid)
    yield
    if timeline is not None:
        timeline.test_end(item.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    if _TIMELINE in session.config.stash:
        timeline = session.config.stash[_TIMELINE]
        timeline.session("end")
        timeline.close()


@pytest.fixture
def project(tmp_path: Path):
    """Returns ``write(matrix_text) -> Path``: a matrix.yaml in a scratch project dir
    with copies of the real templates/ (tests may add templates), entrypoint/ and probes/
    (copied paths must be real files, no links out of the project) and a link to the
    real tests/."""
    import shutil

    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("templates", "entrypoint", "probes"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=caches)
    (tmp_path / "tests").symlink_to(ROOT / "tests")

    def write(text: str) -> Path:
        path = tmp_path / "matrix.yaml"
        path.write_text(text)
        return path

    return write
