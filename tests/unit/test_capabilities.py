"""What each BuildKit path can do, from facts about it (``buildx inspect`` output as the
two engines of the test suite print it), and the doctor's report. Pure."""

from __future__ import annotations

import pytest

from stagecraft import capabilities as caps
from stagecraft.capabilities import EngineFacts
from stagecraft.doctor import doctor_report, format_report
from stagecraft.errors import InputError

# `docker buildx inspect` (buildx 0.13.1) against Debian 12's Docker 20.10 and against
# Debian 13's Docker 26.1 with the containerd image store.
INSPECT_20_10 = """\
Name:          default
Driver:        docker
Last Activity: 2026-12-01 06:27:52 +0000 UTC

Nodes:
Name:             default
Endpoint:         default
Status:           running
BuildKit version: v0.8+unknown
Platforms:        linux/amd64, linux/386
"""
INSPECT_26_1 = """\
Name:          default
Driver:        docker

Nodes:
Name:             default
Endpoint:         default
Status:           running
BuildKit version: v0.0.0+unknown
Platforms:        linux/amd64, linux/amd64/v2, linux/amd64/v3, linux/amd64/v4
Labels:
 org.mobyproject.buildkit.worker.executor:             containerd
 org.mobyproject.buildkit.worker.snapshotter:          overlayfs
"""


def _facts(inspect: str, engine: str, containerd: bool, path: str = "buildx") -> EngineFacts:
    f = caps.parse_buildx_inspect(inspect) if path == "buildx" else {}
    return EngineFacts(engine_version=engine, containerd_store=containerd, path=path,
                       driver=f.get("driver", ""), builder=f.get("name", ""),
                       buildkit_reported=f.get("buildkit", ""),
                       platforms=tuple(p.strip() for p in f.get("platforms", "").split(",") if p.strip()))


CLASSIC = _facts("", "20.10.24+dfsg1", False, path="classic")
DOCKER20 = _facts(INSPECT_20_10, "20.10.24+dfsg1", False)
MODERN = _facts(INSPECT_26_1, "26.1.5+dfsg1", True)
CONTAINER = EngineFacts("20.10.24", path="buildx", driver="docker-container",
                        buildkit_reported="v0.16.0", platforms=("linux/amd64", "linux/arm64"))


def _ok(facts: EngineFacts) -> dict[str, bool]:
    return {c.name: c.ok for c in caps.capabilities(facts)}


def test_parse_buildx_inspect():
    got = caps.parse_buildx_inspect(INSPECT_20_10)
    assert got == {"name": "default", "driver": "docker", "buildkit": "v0.8+unknown",
                   "platforms": "linux/amd64, linux/386"}
    assert caps.parse_buildx_inspect("Name: x\nDriver: remote\nBuildkit: v0.12.5\n")["buildkit"] == "v0.12.5"


def test_buildkit_version_reported_or_vendored():
    assert caps.buildkit_version(DOCKER20) == ("0.8", "vendored by Docker 20.10; the engine does not report it")
    assert caps.buildkit_version(MODERN)[0] == "0.13"
    assert caps.buildkit_version(CLASSIC)[0] == "0.8"
    assert caps.buildkit_version(CONTAINER) == ("0.16.0", "reported by the builder")
    assert caps.buildkit_version(EngineFacts("99.0", path="buildx", driver="docker"))[0] == "unknown"


def test_the_docker_driver_needs_the_containerd_store():
    assert _ok(DOCKER20) == {caps.CACHE_EXPORT: False, caps.CACHE_IMPORT: True,
                             caps.MULTI_PLATFORM: False, caps.OCI_OUTPUT: False,
                             caps.ATTESTATIONS: False}
    assert all(_ok(MODERN).values())
    assert all(_ok(CONTAINER).values())
    assert not any(_ok(CLASSIC).values())
    why = caps.capability(DOCKER20, caps.CACHE_EXPORT).detail
    assert "containerd image store" in why and "containerd-snapshotter" in why, why


def test_multi_platform_names_what_runs_here():
    assert "emulation" in caps.capability(MODERN, caps.MULTI_PLATFORM).detail
    assert "linux/arm64" in caps.capability(CONTAINER, caps.MULTI_PLATFORM).detail


@pytest.mark.parametrize("facts, cache_from, cache_to, fails", [
    (CLASSIC, "type=registry,ref=r/c", None, "--cache-from"),
    (CLASSIC, None, "type=local,dir=/c", "--cache-to"),
    (DOCKER20, "type=local,dir=/c", None, None),
    (DOCKER20, None, "type=registry,ref=r/c", "--cache-to"),
    (MODERN, "type=local,dir=/c", "type=registry,ref=r/c", None),
])
def test_cache_options_the_engine_cannot_do_are_input_errors(facts, cache_from, cache_to, fails):
    if fails is None:
        caps.check_cache_options(facts, cache_from, cache_to)
        return
    with pytest.raises(InputError) as err:
        caps.check_cache_options(facts, cache_from, cache_to)
    (problem,) = err.value.problems
    line = problem.line()
    assert line.startswith(fails) and "Docker 20.10.24+dfsg1 (BuildKit 0.8" in line, line
    assert "or leave out " + fails in line, line


def test_doctor_report_lines():
    report = doctor_report(MODERN, "none")
    assert report["buildkit"]["version"] == "0.13"
    assert [c["name"] for c in report["capabilities"]] == [
        "cache export", "cache import", "multi-platform", "OCI output", "attestations"]
    text = "\n".join(format_report(doctor_report(CLASSIC, "none")))
    assert "classic builder" in text and "cache export    no" in text, text
