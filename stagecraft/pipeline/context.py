"""The run context: what one command's run works on, made once from the parsed options.

``Options`` is the typed form of the command line (every command's options, with the
defaults a command that lacks an option sees); ``RunContext`` holds the options, the
matrix and its images, the state directory and the engine, each made once, when first
asked for, so a run checks its input before it reaches the network or the engine.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import argcheck
from ..errors import InputError
from ..expand import ImageSpec, expand, resolve
from ..matrix import Matrix, load_matrix
from ..tagging import TagJournal

if TYPE_CHECKING:
    from ..engine import Engine

MAX_TAG = 128  # characters of a Docker tag (the reference grammar of distribution/reference)
clip = argcheck.clip  # a user value as echoed back: bounded (a value can be megabytes)


@dataclass(frozen=True)
class Options:
    """Every command's options as parsed (``build.py COMMAND --help`` says what each
    means); an option a command does not take keeps the default here. Counts are plain
    numbers (``jobs`` stages at once, ``retries`` per push, ``keep`` keys per stage);
    paths and registry references are the text the user gave."""

    matrix: str = "matrix.yaml"
    target: str | None = None
    tag: tuple[str, ...] = ()
    all: bool = False
    json: bool = False
    repository: str | None = None
    registry: str | None = None
    platform: str | None = None
    base_source: str | None = None
    ca_bundle: str | None = None
    no_ca_bundle: bool = False
    state_dir: str | None = None
    jobs: int = 1
    list: bool = False
    dry_run: bool = False
    cache_from: str | None = None
    cache_to: str | None = None
    skip_unreachable: bool = False
    test: bool = False
    stage: str | None = None
    push: bool = False
    retries: int = 3
    sign_key: str | None = None
    ref: str = ""
    key: str | None = None
    output: str | None = None
    format: str = "json"
    cache: str | None = None
    insecure: bool = False
    yes: bool = False
    keep: int = 0
    check: bool = False
    upgrade: tuple[str, ...] | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        """The options of ``args`` (argparse's result); names it lacks keep their default."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if hasattr(args, f.name):
                value = getattr(args, f.name)
                values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


class RunContext:
    """One run: its ``opts``, the ``journal`` of what it did to tags, and, each made once
    when first used, the matrix, its images, the engine and the state directory.
    ``args`` is the parsed command line itself, for the one command that reads its own
    options (``catalog``)."""

    def __init__(self, opts: Options, journal: TagJournal, args: argparse.Namespace | None = None):
        self.opts, self.journal, self.args = opts, journal, args
        self._state_made = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunContext:
        """The context of a parsed command line (``args.journal``: set by ``cli.main``)."""
        return cls(Options.from_args(args), getattr(args, "journal", None) or TagJournal(), args)

    @cached_property
    def matrix(self) -> Matrix:
        """The matrix of ``--matrix``, loaded and checked; raises ``InputError``."""
        return load_matrix(self.opts.matrix)

    @cached_property
    def specs(self) -> list[ImageSpec]:
        """Every image the matrix declares; raises ``InputError``."""
        return expand(self.matrix)

    @cached_property
    def engine(self) -> Engine:
        """The Docker engine, connected once; raises ``InputError`` when none answers."""
        from ..engine import Engine  # docker SDK: loaded only by commands that use it

        return Engine()

    def load(self) -> tuple[Matrix, list[ImageSpec]]:
        """The matrix and every image it declares, loaded now (a command loads them
        first, so the matrix's problems come before any other); raises ``InputError``."""
        return self.matrix, self.specs

    @property
    def repository(self) -> str:
        """The repository of the final tags: ``--repository``, else the matrix's."""
        return self.opts.repository or self.matrix.repository

    def select(self, default_all: bool) -> list[ImageSpec]:
        """The images chosen by ``--tag``/TAG/``--all`` (every image when none is named
        and ``default_all``). Raises ``InputError`` for no choice, an unknown tag or one
        longer than a Docker tag can be."""
        queries = list(self.opts.tag) + ([self.opts.target] if self.opts.target else [])
        if self.opts.all:
            return self.specs
        if not queries:
            if default_all:
                return self.specs
            raise InputError.one("build.py", "no image chosen",
                                 "pass --tag TAG (see --list) or --all")
        chosen: dict[str, ImageSpec] = {}
        for q in queries:
            if len(q) > MAX_TAG:  # Docker's own limit; no tag or alias can match
                raise InputError.one(f"--tag {clip(q)}", f"longer than {MAX_TAG} characters, "
                                     "the most a Docker tag has", "pass a tag from --list")
            spec = resolve(self.specs, q)
            chosen[spec.tag] = spec
        return list(chosen.values())

    def state_dir(self, create: bool = True) -> Path:
        """The state directory (``--state-dir``, default ``.stagecraft/`` beside the
        matrix), created once, when first asked for with ``create`` (a command checks it
        with ``create=False`` first and makes it only once every check has passed: bad
        input creates nothing). Raises ``InputError`` when it is not, or cannot become,
        a writable directory."""
        given = self.opts.state_dir
        path = Path(given) if given else self.matrix.root / ".stagecraft"
        if self._state_made:
            return path
        where = f"--state-dir {clip(str(path))}" if given else str(path)
        why = argcheck.state_dir_problem(path)
        if why:
            raise InputError.one(where, why, "pass a directory you can write (made when missing)")
        if create:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError.one(where, f"cannot create it ({exc.strerror or exc})",
                                     "pass a directory you can write") from None
            self._state_made = True
        return path
