"""The loaded matrix as data: ``Stage``, ``Group`` and ``Matrix``, frozen.

``stagecraft.matrix`` reads and validates matrix.yaml into these; every later phase
(expand, compat, render, plan, lock, testing) reads them. Kept apart from the loader so
that those phases depend on the data, not on the loader, which itself runs ``expand`` as
its last phase (one direction, no circle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .yamlsrc import Locator


@dataclass(frozen=True)
class Stage:
    """One stage template: ``uses`` names the component tables it renders with,
    ``copies`` the build-context paths it copies (bind-mounted in its RUN steps),
    ``tests`` its testinfra suites, ``parents`` the stages it may be built on (empty: on
    the OS base image; see ``chains``)."""

    name: str
    template: str
    uses: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """An image group: the product of its axes, less ``exclude``, plus ``include``.

    ``axes`` maps an axis (a component table) to the entry names it takes; ``None`` is
    an unset optional component. ``where`` is the group's ``file:line``,
    ``exclude_where`` that of each ``exclude`` entry. ``platforms`` are the OCI platforms
    its images are built for (normalised, ``linux/arm64``); empty means the host's.
    """

    name: str
    chain: tuple[str, ...]
    axes: dict[str, tuple[str | None, ...]]
    exclude: tuple[dict[str, Any], ...]
    include: tuple[dict[str, Any], ...]
    tag: str
    aliases: tuple[str, ...]
    where: str
    index: int
    exclude_where: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: ``root`` is the project directory the file's relative paths
    (templates, tests, copies) resolve against."""

    path: Path
    root: Path
    repository: str
    source: str
    vendor: str
    registry: str
    stages: dict[str, Stage]
    components: dict[str, dict[str, dict[str, Any]]]
    groups: tuple[Group, ...]
    entrypoint: dict[str, Any]
    locate: Locator = field(compare=False, repr=False)
    build_tools: dict[str, str] = field(default_factory=dict)

    @property
    def templates_dir(self) -> Path:
        """Directory holding the stage templates."""
        return self.root / "templates"

    def component(self, table: str, name: str) -> dict[str, Any]:
        """The entry ``name`` of component table ``table``, with its ``name`` key set."""
        return self.components[table][name]
