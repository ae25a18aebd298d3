"""``build.py catalog -o DIR``: the command's options and its run (stagecraft.cli only
registers it). Bad input (exit 2, one line, nothing written): ``-o`` naming something that
is not a directory, a non-empty directory that is not an earlier catalog, a missing parent;
an unknown tag in ``--compare``; a ``--facts`` or ``--previous`` that cannot be read."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import EXIT_OK, InputError


def options(p: argparse.ArgumentParser) -> None:
    """The catalog's own options (the CLI adds --tag/--all, --repository, --registry,
    --state-dir and --json)."""
    p.add_argument("-o", "--output", dest="site_dir", metavar="DIR",
                   help="directory to write the site to (made, or an earlier catalog replaced); "
                        "required")
    p.add_argument("--facts", metavar="FILE", action="append", default=[],
                   help="read the images' facts from this file (a catalog's facts.json) instead of "
                        "the Docker engine; repeatable: the images of one tag in several files "
                        "(one per platform, as CI's jobs write them) are put together")
    p.add_argument("--previous", metavar="DIR",
                   help="an earlier catalog: its builds are compared with these on the changes page")
    p.add_argument("--compare", metavar="OLD:NEW", action="append", default=[],
                   help="compare two tags on the changes page (repeatable)")


def check_output(out: Path) -> None:
    """Raise InputError unless ``out`` may become the catalog: absent with an existing
    parent directory, an empty directory, or an earlier catalog (its marker file)."""
    from .site import MARKER

    where = f"-o {str(out)[:200]}"
    if out.is_symlink():
        raise InputError.one(where, "is a symbolic link", "pass the directory itself (a link is never replaced)")
    if out.exists() and not out.is_dir():
        raise InputError.one(where, "exists and is not a directory", "pass a new or empty directory, or an earlier catalog (a file is never replaced)")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError.one(where, "is a directory with files that no earlier catalog wrote",
                             "pass a new or empty directory, or an earlier catalog's")
    if not out.absolute().parent.is_dir():
        raise InputError.one(where, "its parent directory does not exist", "make it first")


def _pairs(values: list[str], tags: set[str]) -> list[tuple[str, str]]:
    out = []
    for v in values:
        old, sep, new = v.partition(":")
        if not sep or old not in tags or new not in tags:
            raise InputError.one(f"--compare {v[:120]}", "not OLD:NEW with two tags of the matrix",
                                 "name full tags, e.g. --compare 2.6.0-cpu:2.6.2-cpu")
        out.append((old, new))
    return out


def _previous(value: str | None, tags: list[str]) -> dict[str, Any] | None:
    from . import read

    if not value:
        return None
    path = Path(value) / "facts.json"
    if not path.is_file():
        raise InputError.one(f"--previous {value[:200]}", "holds no facts.json", "pass a directory build.py catalog wrote")
    return read.load_facts(path, tags)


def _with_registry(facts: dict[str, Any], source: str, registry: str, repository: str,
                   tags: list[str]) -> tuple[dict[str, Any], str]:
    """The facts with the registry's digests and compressed sizes (stagecraft.catalog.registry)."""
    from ..publish import remote_repository
    from .registry import merge, read_registry

    host, path = remote_repository(registry, repository)
    pushed, notes = read_registry(registry, repository, tags)
    if notes:
        print(f"note: {len(notes)} of {len(tags)} tags not read from {host}/{path}; first: {notes[0]}", file=sys.stderr)
    return merge(facts, pushed, f"{host}/{path}"), f"{source} and the registry {host}/{path}"


def run(args: argparse.Namespace, matrix: Any, specs: list[Any], all_specs: list[Any]) -> int:
    """Check the input, read the facts, write the site; print a summary (``--json``: as
    JSON) on stdout. Returns the exit status; raises InputError for bad input."""
    from ..publish import remote_repository, resolve_registry
    from . import make, read, site

    started = time.monotonic()
    if not args.site_dir:
        raise InputError.one("build.py catalog", "no directory to write the site to", "pass -o DIR")
    out = Path(args.site_dir)
    check_output(out)
    tags = [s.tag for s in specs]
    compares = _pairs(args.compare, {s.tag for s in all_specs})
    chosen = {s.tag for s in specs} | {t for pair in compares for t in pair}
    specs = [s for s in all_specs if s.tag in chosen]
    previous = _previous(args.previous, tags)
    repository = args.repository or matrix.repository
    if args.registry or matrix.registry:
        host, path = remote_repository(resolve_registry(args.registry, matrix.registry), repository)
        pull = {s.tag: f"{host}/{path}:{s.tag}" for s in specs}
    else:
        pull = {s.tag: f"{repository}:{s.tag}" for s in specs}
    if args.facts:
        facts = read.merge_facts([read.load_facts(Path(f), list(chosen)) for f in args.facts])
        source = "the facts in " + ", ".join(Path(f).name for f in args.facts[:3]) + (
            f" and {len(args.facts) - 3} more files" if len(args.facts) > 3 else "")
    else:
        state = Path(args.state_dir) if args.state_dir else matrix.root / ".stagecraft"
        facts, source = read.read_engine({s.tag: f"{repository}:{s.tag}" for s in specs}, state)
    if args.registry:
        facts, source = _with_registry(facts, source, resolve_registry(args.registry, ""), repository, list(chosen))
    pages, facts_file = make.make(specs, facts, pull, source, previous, compares)
    site.write(out, pages, facts_file)
    summary = {"output": str(out), "tags": len(specs), "built": sorted(facts), "pages": len(pages),
               "seconds": round(time.monotonic() - started, 2)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"catalog: {out}/index.html ({len(specs)} tags, {len(facts)} built, {len(pages)} files, "
              f"{summary['seconds']} s)")
    if not facts:
        print(f"note: no tag was read from an image ({source})", file=sys.stderr)
    return EXIT_OK
