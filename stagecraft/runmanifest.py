"""The record of one push run (``publish``): the test gate each image passed, each
reference pushed and verified, written as ``<state>/runs/<UTC timestamp>.json`` (also the
``--json`` output of ``build.py push``). Credentials never enter it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import statefile
from .expand import ImageSpec


@dataclass
class TestGate:
    """The record an image was allowed through on: ``record`` path, ``sha256`` of its
    bytes, ``passed``, ``counts`` and ``recorded`` (Unix time)."""

    __test__ = False  # not a pytest class

    record: str
    sha256: str
    passed: bool
    counts: dict[str, int]
    recorded: float


@dataclass
class Candidate:
    """An image allowed to go out: ``spec``, local ``ref`` and ``image_id``, its gate."""

    spec: ImageSpec
    ref: str
    image_id: str
    test: TestGate


@dataclass
class NamePush:
    """One reference pushed: ``name`` (tag or alias), ``digest`` the daemon reported,
    ``registry_digest``, ``verified``, ``attempts``, layers ``pushed``/``existed``,
    ``size`` (bytes in the registry: config + compressed layers), ``seconds`` (wall
    time) and ``error``."""

    name: str
    ref: str
    status: str = "not pushed"
    digest: str = ""
    registry_digest: str = ""
    verified: bool = False
    attempts: int = 0
    layers_pushed: int = 0
    layers_existed: int = 0
    size: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass
class ImagePush:
    """One image of the run manifest: ``size`` is bytes in the registry (compressed
    config + layers), ``image_size`` bytes in the engine (uncompressed). ``platforms``
    maps each platform of an OCI image index to its manifest digest, verified."""

    tag: str
    ref: str
    image_id: str
    status: str
    digest: str
    size: int
    image_size: int
    local_repo_digest: str
    aliases: list[NamePush]
    push: NamePush
    test: TestGate
    labels: dict[str, str]
    registry: str
    platforms: dict[str, str] = field(default_factory=dict)


@dataclass
class RunManifest:
    """What one push run did; written to ``<state>/runs/<run>.json``."""

    run: str
    registry: str
    repository: str
    started: str
    seconds: float = 0.0
    ok: bool = False
    images: list[ImagePush] = field(default_factory=list)
    path: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON-ready data (schema 1)."""
        return {"schema": 1, **asdict(self)}



def run_id(now: datetime | None = None) -> str:
    """UTC timestamp naming a run: ``20260130T120501.123456Z`` (sortable)."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S.%fZ")



def write_run(run: RunManifest, state_dir: Path) -> Path:
    """Write the run manifest to ``<state>/runs/<run>.json``; returns the path."""
    path = state_dir / "runs" / f"{run.run}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    run.path = str(path)
    statefile.write_json(path, run.to_json())
    return path
