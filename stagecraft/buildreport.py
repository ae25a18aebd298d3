"""What a build run did (``builder.build_plan``): each stage's result, each image's,
and the warnings of caches not read or not written. Data only."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StageResult:
    """What happened to one stage: ``status`` is ``cached`` (key already built, or
    named by another run building it at the same time: stagebuild ``run_node``),
    ``built``, ``failed`` or ``skipped`` (a stage below it failed); ``seconds`` of build;
    ``run_executed``/``run_cached``: RUN steps BuildKit ran or took from a cache;
    ``cache``: ``written``, ``not written: <why>`` or "" (no ``--cache-to``); ``platform`` it was built for."""

    key: str
    stage: str
    status: str
    image_id: str = ""
    seconds: float = 0.0
    log: str = ""
    error: str = ""
    run_executed: int = 0
    run_cached: int = 0
    cache: str = ""
    platform: str = ""


@dataclass
class ImageResult:
    """One image: ``status`` ``built`` or ``failed`` (no tag moved); ``tagged`` whether
    its names moved to it (a built image whose ``--test`` suites failed is not); ``size``
    in bytes as the engine reports it, ``size_kind`` saying what that is: ``unpacked``
    (the classic image store: the layers as extracted) or ``compressed`` (the containerd
    image store: the content it holds, the layers as pushed); ``seconds`` from start of
    the run. ``platforms`` maps each platform built to ``{"image_id", "size", "key"}``;
    with several, the tag is an OCI image index holding them all."""

    tag: str
    ref: str
    aliases: list[str]
    status: str
    image_id: str = ""
    size: int = 0
    size_kind: str = ""
    seconds: float = 0.0
    built_stages: int = 0
    cached_stages: int = 0
    error: str = ""
    platforms: dict[str, dict] = field(default_factory=dict)
    tagged: bool = False


@dataclass
class BuildReport:
    """Every stage and image of a run, its wall time in seconds, and ``warnings``
    (caches not read or not written: the images are built all the same)."""

    stages: dict[str, StageResult] = field(default_factory=dict)
    images: list[ImageResult] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every image built (``--test`` verdicts are the caller's)."""
        return all(i.status == "built" for i in self.images)
