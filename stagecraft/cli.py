"""Command line: a thin layer over the pure modules and the engine.

Each command has its own options and its own ``--help`` (``build.py COMMAND --help``), as
docker and buildx do; ``build`` is the default command, so ``build.py --tag T`` is
``build.py build --tag T``. ``--matrix FILE`` may come before the command or among its
options.

    python build.py --tag 2.6.0-gpu-cuda11.8      build one image (tag, alias or prefix)
    python build.py --all [--jobs N]              build every image of the matrix
    python build.py --list                        tags and aliases (also: `list`)
    python build.py render TAG [-o FILE]          the tag's multi-stage Dockerfile
    python build.py plan [--tag T | --all]        stages: built, to build, order
    python build.py test [--tag T | --all]        testinfra suites against built images
    python build.py doctor                        the engine, BuildKit version, build path and
                                                  capabilities (cache, multi-platform, OCI, attestations)
    python build.py freeze TAG                    pins of a built image's venv (for constraints:)
    python build.py catalog -o DIR [--tag T]      a static site of every tag (contents, hardware,
                                                  which tag fits a machine)
    python build.py probe [--tag T] [--json]      this host's hardware; the best tag for it
                                                  (no Docker; STAGECRAFT_PROBE_ROOT=DIR, test/debug
                                                  only, probes DIR instead of /)
    python build.py push [--tag T | --all] [--registry HOST[:PORT][/NAMESPACE]]
                                                  push tested images, then their aliases
    python build.py matrix [--format github|json] the CI job matrix (one entry per tag)
    python build.py bake [-o docker-bake.json]    a bake file: each stage a target
    python build.py verify REF --key cosign.pub  signature, SBOM and test record of a pushed digest
    python build.py verify-reproducible TAG       rebuild every stage with no cache: same digests?
    python build.py prune [--keep N] [--yes]      stage images no target of the plan uses
                                                  (a dry run without --yes)
    python build.py lock [--check | --upgrade [PACKAGE ...]]
                                                  matrix.lock: every input by version and SHA-256

Progress and logs go to stderr; results (built ``repo:tag`` lines, or JSON with
``--json``) to stdout. Exit status: 0 ok, 1 a build, test or push failed, 2 bad input
(an untested or test-failed image refused by `push` is bad input: nothing is pushed).

Adding a command: one function that adds its options to a parser, and one
``@command(NAME, SUMMARY, *option_groups)`` function ``cmd_NAME(args) -> exit status``
(``_load(args)`` gives the matrix and its images). Nothing else needs to change.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from . import argcheck, sourceinfo
from .bases import BaseImage, base_image
from .catalog.cli import options as _catalog_options
from .errors import EXIT_FAILED, EXIT_INPUT, EXIT_OK, BuildError, InputError
from .expand import ImageSpec, expand, resolve
from .matrix import Matrix, load_matrix
from .safetext import one_line
from .scratch import run_scratch
from .summary import summary_notes
from .tagging import TagJournal


@dataclass(frozen=True)
class Command:
    """One subcommand: ``run(args)`` returns the exit status; ``options`` add its
    arguments to its own parser (so ``build.py NAME --help`` lists only those)."""

    name: str
    summary: str
    run: Callable[[argparse.Namespace], int]
    options: tuple[Callable[[argparse.ArgumentParser], None], ...]


COMMANDS: dict[str, Command] = {}
MAX_TAG = 128  # characters of a Docker tag (the reference grammar of distribution/reference)
DEFAULT_COMMAND = "build"


def command(name: str, summary: str, *options: Callable[[argparse.ArgumentParser], None]):
    """Register ``cmd_NAME(args) -> int`` as the subcommand ``name`` with the option
    groups ``options`` (functions that add arguments to a parser)."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = Command(name, summary, run, options)
        return run

    return register


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(EXIT_INPUT, f"{self.prog}: {_clip(message, 500)}; see {self.prog} --help\n")


# Option groups: each adds a few related options; a command lists the groups it takes.

def _matrix_option(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: given after the command it overrides the global one, else it leaves it alone.
    p.add_argument("--matrix", default=argparse.SUPPRESS, metavar="FILE",
                   help="matrix file (default: matrix.yaml); also accepted before the command")


def _one_tag(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", metavar="TAG", help="a tag (same as --tag TAG)")
    p.add_argument("-t", "--tag", action="append", default=[],
                   help="tag, alias or unique prefix")


def _selection(p: argparse.ArgumentParser) -> None:
    _one_tag(p)
    p.add_argument("--all", action="store_true", help="every image of the matrix")


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable results on stdout")


def _repository(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repository", help="repository of the final tags (default: from matrix)")


def _platform(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", metavar="OS/ARCH[,...]",
                   help="only these of each image's platforms (default: every platform its "
                        "group declares; the host's for a group that declares none)")


def _platforms(chosen: list[ImageSpec], args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """Tag -> the platforms to build it for: its declared ones (the host's when none),
    narrowed by ``--platform``. Raises ``InputError`` for an unknown platform, a named
    tag without any of the requested ones, or a compatibility rule the host breaks."""
    from . import compat, platforms

    host = platforms.host_platform()
    requested: list[str] = []
    for item in filter(None, (getattr(args, "platform", None) or "").split(",")):
        name = platforms.normalise(item)
        if name not in platforms.KNOWN:
            raise InputError.one(f"--platform {_clip(item)}", "unknown platform",
                                 f"one of: {', '.join(platforms.KNOWN)}")
        requested.append(name)
    out: dict[str, tuple[str, ...]] = {}
    for spec in chosen:
        declared = spec.platforms or (host,)
        if not spec.platforms:  # the host's platform: its rules are checked now
            for rule in compat.platform_rules(spec.components, declared):
                raise InputError.one(spec.tag, f"cannot build here: {rule}",
                                     "build it on a host of a platform it supports")
        picked = tuple(p for p in declared if p in requested) if requested else declared
        if not picked:
            if getattr(args, "all", False):
                _say(f"not building {spec.tag}: it is built for {', '.join(declared)} only")
                continue
            raise InputError.one(f"--platform {','.join(requested)}",
                                 f"{spec.tag} is built for {', '.join(declared)} only",
                                 "choose one of those platforms")
        out[spec.tag] = picked
    return out


def _check_platforms(engine: Any, wanted: dict[str, tuple[str, ...]],
                     explicit: bool) -> dict[str, tuple[str, ...]]:
    """The platforms to build per tag on this engine. Where the engine cannot hold several
    platforms under one tag (Docker without the containerd image store, e.g. Debian's
    20.10) and ``--platform`` was not given, a multi-platform tag is built for the host's
    platform only, said in one line; asked for explicitly, that is bad input (exit 2)
    before anything is built. Raises ``InputError`` too when a platform needs emulation
    that is not set up."""
    from . import platforms

    several = {tag: ps for tag, ps in wanted.items() if len(ps) > 1}
    if several:
        why = engine.multi_platform()
        if why and explicit:
            tag, ps = next(iter(several.items()))
            raise InputError.one(f"--tag {tag}", f"{why}: it cannot build {', '.join(ps)} "
                                 "under one tag", f"pass --platform {platforms.host_platform()} "
                                 "for one platform, or use an engine with the containerd image "
                                 "store and buildx (Docker 24+)")
        if why:
            host = platforms.host_platform()
            wanted = dict(wanted)
            for tag, ps in several.items():
                one = host if host in ps else ps[0]
                wanted[tag] = (one,)
                _say(f"note: {why}: building {tag} for {one} only (its matrix platforms: "
                     f"{', '.join(ps)}; all of them need an engine with the containerd image "
                     "store and buildx)")
    for p in sorted({p for ps in wanted.values() for p in ps}):
        why = platforms.emulation(p)
        if why:
            raise InputError.one(f"--platform {p}", why,
                                 f"run scripts/setup.sh with STAGECRAFT_PLATFORMS={p} (as root: "
                                 "installs qemu-user-static and registers it)")
    return wanted


def _base_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-source", choices=("bootstrap", "pull"),
                   help="where base images come from (default: per base in matrix.yaml; "
                        "`render`, `bake` and `matrix` default to pull)")


def _ca(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ca-bundle", metavar="PATH",
                   help="CA bundle for pip inside builds (default: found in the environment "
                        "and pip.conf); passed as a BuildKit secret only")
    p.add_argument("--no-ca-bundle", action="store_true", help="do not pass any CA bundle")


def _state(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", default=None,
                   help="logs, test records, run manifests (default: .stagecraft/ beside "
                        "matrix.yaml)")


def _registry(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", metavar="HOST[:PORT][/NAMESPACE]",
                   help="registry to push to (default: from matrix); refs become "
                        "HOST[:PORT]/REPOSITORY:TAG, or with a namespace "
                        "HOST[:PORT]/NAMESPACE/NAME:TAG (NAME: the repository's last part)")


def _push_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retries", type=int, default=3,
                   help="retries of a transient push failure, with backoff (default: 3)")
    p.add_argument("--sign-key", metavar="PATH",
                   help="cosign private key (password in COSIGN_PASSWORD): sign each pushed "
                        "digest, attest its SBOM and test record, attach the SBOM (default: "
                        "$STAGECRAFT_COSIGN_KEY; none: pushed unsigned)")


def _jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=1, help="stages built at once (default: 1)")


def _build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="list tags and aliases, then exit")
    p.add_argument("--dry-run", action="store_true", help="show the plan; build nothing")
    p.add_argument("--jobs", type=int, default=1, help="stages built at once (default: 1)")
    p.add_argument("--cache-from", metavar="SPEC",
                   help="import build cache per stage key: type=local,dir=PATH or "
                        "type=registry,ref=HOST/REPO")
    p.add_argument("--cache-to", metavar="SPEC", help="export build cache per stage key (same forms)")
    p.add_argument("--skip-unreachable", action="store_true",
                   help="skip images whose package index this host cannot reach (exit 0 "
                        "if the rest built); without it they make the run fail")
    p.add_argument("--test", action="store_true", help="after building, run the testinfra suites")
    p.add_argument("--stage", metavar="STAGE",
                   help="build each chosen tag's chain only up to this stage (e.g. accel: the CUDA "
                        "stages of an image whose framework index is unreachable); tags nothing and "
                        "prints the stage images")
    p.add_argument("--push", action="store_true",
                   help="after building and testing (implies --test), push what passed "
                        "(--registry or registry: in matrix.yaml)")


def _verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="REF", help="HOST[:PORT]/REPO:TAG or HOST[:PORT]/REPO@sha256:...")
    p.add_argument("--key", metavar="PUB", help="cosign public key (default: $STAGECRAFT_COSIGN_PUB)")


def _output(what: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("-o", "--output", metavar="FILE", help=f"write {what} here (default: stdout)")

    return add


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("github", "github-indexes", "json"), default="json",
                   help="github (a strategy matrix object, one line: a cell per tag and "
                        "platform), github-indexes (one cell per multi-platform tag: the "
                        "merge jobs) or json (default)")


def _bake_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", metavar="SPEC",
                   help="cache per stage key: type=gha, type=local,dir=PATH or "
                        "type=registry,ref=HOST/REPO")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="build.py", description="Build, test and render the images of matrix.yaml. "
                "Without a command, `build` runs: build.py --tag TAG is build.py build --tag TAG.",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="`build.py COMMAND --help` lists the options of a command. See README.md.")
    p.add_argument("--matrix", default="matrix.yaml", metavar="FILE",
                   help="matrix file (default: matrix.yaml)")
    sub = p.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)
    for cmd in sorted(COMMANDS.values(), key=lambda c: c.name != DEFAULT_COMMAND):
        sp = sub.add_parser(cmd.name, help=cmd.summary, description=cmd.summary,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        _matrix_option(sp)
        for add in cmd.options:
            add(sp)
        sp.set_defaults(run=cmd.run, flags=argcheck.flags_of(sp))
    return p


def _with_default_command(argv: list[str]) -> list[str]:
    """``argv`` with ``build`` inserted where the command is omitted: before the first
    option that is not a global one (``build.py --tag T``), or at the end (``build.py``).
    A word that is not a command is left for argparse to refuse by name."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("-h", "--help") or tok in COMMANDS:
            return argv
        if tok == "--matrix":
            i += 2
            continue
        if tok.startswith("--matrix="):
            i += 1
            continue
        if tok.startswith("-"):
            return [*argv[:i], DEFAULT_COMMAND, *argv[i:]]
        return argv  # an unknown word: argparse says "invalid choice"
    return [*argv, DEFAULT_COMMAND]


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = _parser()
    args, extra = parser.parse_known_args(_with_default_command(argv))
    if extra or getattr(args, "target", None) in COMMANDS:  # build.py --all plan
        misplaced = next((e for e in [getattr(args, "target", None), *extra] if e in COMMANDS), None)
        if misplaced:
            parser.error(f"`{misplaced}` must come before its options: build.py [--matrix FILE] "
                         f"{misplaced} [OPTIONS]")
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


_clip = argcheck.clip  # a user value as echoed back: bounded (a value can be megabytes)


def _select(specs: list[ImageSpec], args: argparse.Namespace, default_all: bool) -> list[ImageSpec]:
    target = getattr(args, "target", None)
    queries = list(args.tag) + ([target] if target else [])
    if getattr(args, "all", False):
        return specs
    if not queries:
        if default_all:
            return specs
        raise InputError.one("build.py", "no image chosen",
                             "pass --tag TAG (see --list) or --all")
    chosen: dict[str, ImageSpec] = {}
    for q in queries:
        if len(q) > MAX_TAG:  # Docker's own limit; no tag or alias can match
            raise InputError.one(f"--tag {_clip(q)}", f"longer than {MAX_TAG} characters, "
                                 "the most a Docker tag has", "pass a tag from --list")
        spec = resolve(specs, q)
        chosen[spec.tag] = spec
    return list(chosen.values())


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _counts(counts: dict[str, int]) -> str:
    """pytest's counts as words: ``20 passed, 1 failed``."""
    return ", ".join(f"{n} {word}" for word, n in counts.items()) or "no tests"


def _human_size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _load(args: argparse.Namespace) -> tuple[Matrix, list[ImageSpec]]:
    """The matrix of ``--matrix`` and every image it declares; raises ``InputError``."""
    matrix = load_matrix(args.matrix)
    return matrix, expand(matrix)


@command("list", "tags, aliases and stage chains of the matrix (also: build.py --list)",
         _selection, _json)
def cmd_list(args: argparse.Namespace) -> int:
    _, specs = _load(args)
    if args.tag or getattr(args, "target", None):  # --list --tag T: just those (an unknown T is an error)
        specs = _select(specs, args, default_all=True)
    if args.json:
        _emit_json([{"tag": s.tag, "aliases": list(s.aliases), "group": s.group,
                     "chain": list(s.chain), "selection": dict(s.selection)} for s in specs])
        return EXIT_OK
    width = max(len(s.tag) for s in specs)
    for s in specs:
        aliases = f"  (aliases: {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.tag:<{width}}  {' > '.join(s.chain)}{aliases}")
    return EXIT_OK


@command("render", "print one tag's complete multi-stage Dockerfile", _one_tag, _base_source,
         _platform, _output("the Dockerfile"))
def cmd_render(args: argparse.Namespace) -> int:
    from .plan import full_dockerfile

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    if len(chosen) != 1:
        raise InputError.one("render", "render takes exactly one tag", "pass one TAG")
    spec = chosen[0]
    from .lockfile import base_epoch, base_lock
    from .platforms import host_platform

    platforms = _platforms([spec], args)[spec.tag]  # several only without --platform
    if len(platforms) > 1:  # one Dockerfile per platform: the host's, else the first
        every = platforms
        platforms = (host_platform(),) if host_platform() in platforms else platforms[:1]
        _say(f"note: {spec.tag} is built for {', '.join(every)}; this is its Dockerfile for "
             f"{platforms[0]} (--platform OS/ARCH for another)")
    base = base_image(spec.base, args.base_source or ("pull" if "pull" in spec.base else None),
                      platforms[0], locked=base_lock(matrix, spec, platforms[0]),
                      source_date_epoch=base_epoch(matrix, spec, platforms[0]))
    text = full_dockerfile(matrix, spec, base, sourceinfo.revision(matrix.root),
                           sourceinfo.created(matrix.root))
    if args.output:
        _write_output("-o", args.output, text)
        _say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _plan(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace,
          wanted: dict[str, tuple[str, ...]] | None = None):
    from .plan import make_plan

    wanted = wanted if wanted is not None else _platforms(specs, args)
    specs = [s for s in specs if s.tag in wanted]
    from .lockfile import base_epoch, base_lock

    bases: dict[Any, BaseImage] = {
        (s.base["name"], p): base_image(s.base, getattr(args, "base_source", None), p,
                                        locked=base_lock(matrix, s, p),
                                        source_date_epoch=base_epoch(matrix, s, p))
        for s in specs for p in wanted[s.tag]}
    return make_plan(matrix, specs, bases,
                     sourceinfo.revision(matrix.root), sourceinfo.created(matrix.root),
                     getattr(args, "repository", None), wanted)


@command("plan", "stages, content keys, built or to build", _selection, _json, _repository,
         _base_source, _platform)
def cmd_plan(args: argparse.Namespace) -> int:
    matrix, specs = _load(args)
    return _show_plan(matrix, _select(specs, args, default_all=True), args)


def _show_plan(matrix: Matrix, chosen: list[ImageSpec], args: argparse.Namespace) -> int:
    from .engine import Engine

    plan = _plan(matrix, chosen, args)
    if getattr(args, "stage", None):
        from .plan import up_to_stage

        plan = up_to_stage(plan, args.stage)
    engine = Engine()
    rows = []
    for key, node in plan.nodes.items():
        built = engine.image_id(node.image_ref) is not None
        rows.append({"key": key, "stage": node.stage, "image": node.image_ref,
                     "parent": node.parent_key, "built": built, "tags": list(node.tags),
                     "platform": node.base.platform})
    bases = [{"name": b.name, "source": b.source, "ref": b.ref, "platform": b.platform,
              "present": engine.image_id(b.ref) is not None} for b in plan.bases]
    if args.json:
        _emit_json({"bases": bases, "stages": rows,
                    "images": [{"tag": i.spec.tag, "platform": i.platform, "keys": list(i.keys)}
                               for i in plan.images]})
        return EXIT_OK
    for b in bases:
        print(f"base   {b['name']:<10} {b['platform']:<12} "
              f"{'present ' if b['present'] else 'to make '} {b['ref']}")
    for i, r in enumerate(rows, 1):
        state = "built   " if r["built"] else "to build"
        print(f"{i:>3}. {r['stage']:<8} {r['platform']:<12} {r['key'][:12]} {state} "
              f"{', '.join(r['tags'])}")
    todo = sum(not r["built"] for r in rows)
    print(f"{len(rows)} stages, {todo} to build, {len(rows) - todo} already built", file=sys.stderr)
    return EXIT_OK


def _state_dir(matrix: Matrix, args: argparse.Namespace, create: bool = True) -> Path:
    """The state directory (``--state-dir``, default ``.stagecraft/`` beside the matrix),
    created when missing unless ``create`` is false (a command checks it that way first
    and makes it only once every check has passed: bad input creates nothing). Raises
    ``InputError`` when it is not, or cannot become, a writable directory."""
    path = Path(args.state_dir) if args.state_dir else matrix.root / ".stagecraft"
    where = f"--state-dir {_clip(str(path))}" if args.state_dir else str(path)
    why = argcheck.state_dir_problem(path)
    if why:
        raise InputError.one(where, why, "pass a directory you can write (made when missing)")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError.one(where, f"cannot create it ({exc.strerror or exc})",
                                 "pass a directory you can write") from None
    return path


def _write_output(option: str, path: str, text: str) -> None:
    """Write ``text`` to the file the user named with ``option`` (``-o``), whole or not
    at all, only over a regular file or nothing (``outfile``; ``argcheck`` refused
    anything else before the command ran). Raises ``InputError`` (exit 2) when it cannot
    be written there: the path is the user's."""
    from . import outfile

    try:
        outfile.write_text(path, text)
    except OSError as exc:
        raise InputError.one(f"{option} {_clip(path)}", f"cannot write ({exc.strerror or exc})",
                             "name a regular file in a directory you can write") from None


@command("build", "build images (the default command: build.py --tag T)", _selection,
         _build_options, _json, _repository, _base_source, _platform, _ca, _state, _registry,
         _push_options)
def cmd_build(args: argparse.Namespace) -> int:
    from .builder import BuildOptions, build_plan
    from .cabundle import find_ca_bundle
    from .engine import Engine

    matrix, specs = _load(args)
    if args.list:
        return cmd_list(args)
    chosen = _select(specs, args, default_all=False)
    if args.jobs < 1:
        raise InputError.one(f"--jobs {args.jobs}", "must be at least 1", "pass --jobs 1 or more")
    sourceinfo.created(matrix.root)  # a malformed SOURCE_DATE_EPOCH stops here, before any work
    if not args.dry_run:  # checked now; made once every check has passed
        _state_dir(matrix, args, create=False)
    bundle = find_ca_bundle(args.ca_bundle, args.no_ca_bundle)
    from . import cache

    cache_from = cache.parse(args.cache_from, "--cache-from") if args.cache_from else None
    cache_to = cache.parse(args.cache_to, "--cache-to") if args.cache_to else None
    if args.push:  # pushes only what passed its tests: check the registry before building
        from .publish import resolve_registry

        resolve_registry(args.registry, matrix.registry)
        args.test = True
    if cache_from or cache_to:  # what this engine cannot do is bad input: exit 2 at once
        from .capabilities import check_cache_options

        check_cache_options(Engine().facts(), args.cache_from, args.cache_to)
    if args.test and not args.dry_run:  # the tools the suites run on, before building
        from .testing import check_tools

        check_tools()
    if args.dry_run:
        return _show_plan(matrix, chosen, args)
    from .preflight import unreachable

    if args.stage:
        return _build_stages(matrix, chosen, args, bundle)
    wanted = _platforms(chosen, args)  # --platform against the tags, before the network
    skipped = unreachable(chosen, bundle)
    for tag, why in skipped.items():
        _say(f"{'skipping' if args.skip_unreachable else 'cannot build'} {tag}: {why}")
    chosen = [s for s in chosen if s.tag not in skipped]
    if not chosen:
        raise BuildError("nothing left to build on this host (see above)")
    wanted = {tag: ps for tag, ps in wanted.items() if tag not in skipped}
    engine = Engine()
    wanted = _check_platforms(engine, wanted, bool(args.platform))
    plan = _plan(matrix, chosen, args, wanted)
    _check_wheels(matrix, plan, engine, bundle)
    chosen = [s for s in chosen if s.tag in wanted]
    repository = args.repository or matrix.repository
    _say(f"stagecraft: {len(chosen)} image(s), {len(plan.nodes)} stage(s); BuildKit via "
         f"{engine.builder.describe()}; CA bundle: "
         f"{f'{bundle.path} ({bundle.origin})' if bundle else 'none'}")
    report = build_plan(engine, plan, matrix.root,
                        BuildOptions(repository, _state_dir(matrix, args), args.jobs, bundle,
                                     cache_from, cache_to, args.journal), _say)
    tests: dict[str, Any] = {}
    if args.test:
        from .testing import combine, run_suites, save_record

        for img in report.images:
            if img.status == "built":
                spec = next(s for s in chosen if s.tag == img.tag)
                per_platform = []
                for platform, one in img.platforms.items():
                    _say(f"testing {img.ref} on {platform} ({len(spec.tests)} suites)")
                    per_platform.append(run_suites(engine, matrix, spec, img.ref, _state_dir(matrix, args),
                                                   image=one["image_id"]))
                    _say(f"  {'passed' if per_platform[-1].passed else 'FAILED'}: "
                         f"{_counts(per_platform[-1].counts)}")
                tests[img.tag] = per_platform[0]
                if len(per_platform) > 1:  # the index passes when every platform passed
                    tests[img.tag] = combine(per_platform, img.image_id)
                    save_record(_state_dir(matrix, args), tests[img.tag])
    ok = report.ok and all(t.passed for t in tests.values())
    ok = ok and (args.skip_unreachable or not skipped)
    pushed: dict[str, Any] | None = None
    if args.push:
        if ok:
            run = _push(engine, matrix, chosen, args, repository)
            pushed, ok = run.to_json(), run.ok
        else:
            _say("not pushed: a build or its tests failed; nothing was moved")
            ok = False
    extra: dict[str, Any] = {"skipped": skipped} if skipped else {}
    if args.push:
        extra["push"] = pushed
    _summary(report, tests, args, extra or None)
    if skipped and not args.skip_unreachable:
        _say(f"{len(skipped)} image(s) not built here (unreachable index); --skip-unreachable "
             "makes that a success")
    return EXIT_OK if ok else EXIT_FAILED


def _build_stages(matrix: Matrix, chosen: list[ImageSpec], args: argparse.Namespace, bundle: Any) -> int:
    """``build --stage STAGE``: the chosen tags' chains up to STAGE, no tag moved; stage
    images on stdout (``--json``: the build report)."""
    from .builder import BuildOptions, build_plan
    from .engine import Engine
    from .plan import up_to_stage

    plan = up_to_stage(_plan(matrix, chosen, args), args.stage)
    engine = Engine()
    _check_wheels(matrix, plan, engine, bundle, stages_of=chosen)
    _say(f"stagecraft: {len(plan.nodes)} stage(s) up to {args.stage} for {', '.join(s.tag for s in chosen)}")
    report = build_plan(engine, plan, matrix.root,
                        BuildOptions(args.repository or matrix.repository, _state_dir(matrix, args),
                                     args.jobs, bundle), _say)
    ok = all(s.status in ("built", "cached") for s in report.stages.values())
    if args.json:
        _emit_json({"seconds": round(report.seconds, 1), "stages": [
            {**asdict(s), "image": plan.nodes[s.key].image_ref} for s in report.stages.values()]})
    else:
        for key, node in plan.nodes.items():
            if report.stages[key].status in ("built", "cached"):
                print(node.image_ref)
    return EXIT_OK if ok else EXIT_FAILED


def _check_wheels(matrix: Matrix, plan: Any, engine: Any, bundle: Any,
                  stages_of: list[ImageSpec] | None = None) -> None:
    """Every NVIDIA wheel pin of a stage still to build exists on PyPI; raises
    ``InputError`` naming each one that does not (see ``preflight``)."""
    from .preflight import missing_wheels, wheel_pins

    if stages_of is not None:  # a plan without images (--stage): its nodes, for each spec
        todo = [(spec, node.stage) for spec in stages_of for node in plan.nodes.values()
                if spec.tag in node.tags and engine.image_id(node.image_ref) is None]
    else:
        todo = [(img.spec, img.spec.chain[i]) for img in plan.images
                for i, key in enumerate(img.keys[:len(img.spec.chain)])
                if engine.image_id(plan.nodes[key].image_ref) is None]
    pins = wheel_pins(matrix, todo)
    if not pins:
        return
    problems, notes = missing_wheels(matrix, pins, bundle)
    for note in notes:
        _say(note)
    if problems:
        raise InputError(problems)


def _summary(report: Any, tests: dict[str, Any], args: argparse.Namespace,
             extra: dict[str, Any] | None = None) -> None:
    if args.json:
        _emit_json({"seconds": round(report.seconds, 1),
                    "images": [{**asdict(i), **({"test": asdict(tests[i.tag])} if i.tag in tests else {})}
                               for i in report.images],
                    "stages": [asdict(s) for s in report.stages.values()],
                    "warnings": list(report.warnings), **(extra or {})})
    built = sum(s.status == "built" for s in report.stages.values())
    cached = sum(s.status == "cached" for s in report.stages.values())
    kinds = {i.size_kind for i in report.images if i.status == "built"}
    size_head = "size*" if kinds else "size"
    _say(f"\n{'tag':<32} {'image id':<19} {size_head:>9} {'stages':>14} {'time':>8}")
    for i in report.images:
        stages = f"{i.built_stages} built/{i.cached_stages} cached"
        if i.status == "built":
            t = tests.get(i.tag)
            extra = "" if t is None else ("  tests passed" if t.passed else "  TESTS FAILED")
            _say(f"{i.tag:<32} {i.image_id[7:19]:<19} {_human_size(i.size):>9} {stages:>14} "
                 f"{i.seconds:>7.1f}s{extra}")
        else:
            _say(f"{i.tag:<32} FAILED: {i.error}")
    _say(f"{len(report.images)} image(s): {built} stage(s) built, {cached} already built, "
         f"{report.seconds:.1f} s" + ("; nothing to build" if built == 0 and report.ok else ""))
    for line in summary_notes(report):
        _say(line)
    if not args.json:
        for i in report.images:
            if i.status == "built":
                for name in [i.tag, *i.aliases]:
                    print(f"{i.ref.rsplit(':', 1)[0]}:{name}")


@command("test", "run the testinfra suites against built images", _selection, _json,
         _repository, _state, _platform)
def cmd_test(args: argparse.Namespace) -> int:
    from .builder import index_parts, index_ref
    from .engine import Engine
    from .testing import check_tools, combine, run_suites, save_record

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    _state_dir(matrix, args, create=False)  # made by the first suite run, after the checks
    check_tools()
    wanted = _platforms(chosen, args) if args.platform else {}  # before the engine
    engine = Engine()
    repository = args.repository or matrix.repository
    results = []
    for spec in chosen:
        ref = f"{repository}:{spec.tag}"
        if engine.image_id(ref) is None:
            raise InputError.one(f"--tag {spec.tag}", f"{ref} is not built",
                                 f"build it first: python3 build.py --tag {spec.tag}")
    # --platform: each platform's own image of the tag (the final stage of its chain).
    # Without it: the tag itself, unless it is the OCI image index of several platforms
    # that a build made; then every platform in it, and the index passes only when each
    # one did (its record is what `push` checks: testing the host's platform alone must
    # not clear the arm64 image for publishing).
    for spec in chosen:
        ref = f"{repository}:{spec.tag}"
        images: list[tuple[str, str | None]] = [("", None)]
        index_id = ""
        if spec.tag in wanted:
            plan = _plan(matrix, [spec], args, {spec.tag: wanted[spec.tag]})
            images = list(index_parts(plan, plan.images).items())
            missing = [image for _, image in images if engine.image_id(image) is None]
            if missing:
                raise InputError.one(f"--tag {spec.tag}", f"{missing[0]} is not built",
                                     f"build it first: python3 build.py --tag {spec.tag} "
                                     f"--platform {args.platform}")
        elif len(spec.platforms) > 1 and not engine.multi_platform():
            parts = _index_parts(engine, matrix, spec, args)
            if parts and engine.image_id(ref) == engine.image_id(index_ref(parts)):
                images, index_id = list(parts.items()), engine.image_id(ref) or ""
        tag_results = []
        for platform, image in images:
            _say(f"testing {ref}{' on ' + platform if platform else ''} ({', '.join(spec.tests)})")
            res = run_suites(engine, matrix, spec, ref, _state_dir(matrix, args), image=image)
            _say(res.output_tail if not res.passed else f"  {_counts(res.counts)} in {res.seconds:.1f} s")
            tag_results.append(res)
        results += tag_results
        if index_id:  # the index's own record: passed when every platform passed
            save_record(_state_dir(matrix, args), combine(tag_results, index_id))
    if args.json:
        _emit_json([asdict(r) for r in results])
    else:
        for r in results:
            print(f"{'PASS' if r.passed else 'FAIL'} {repository}:{r.tag} {r.platform} ({_counts(r.counts)})")
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def _index_parts(engine: Any, matrix: Matrix, spec: ImageSpec,
                 args: argparse.Namespace) -> dict[str, str]:
    """Platform -> final-stage image of each of ``spec``'s platforms, as a build on
    ``engine`` makes them ({} when one of them is not in the engine)."""
    from .builder import index_parts

    plan = _plan(matrix, [spec], args, {spec.tag: spec.platforms})
    parts = index_parts(plan, plan.images)
    return parts if all(engine.image_id(image) for image in parts.values()) else {}


def _push(engine: Any, matrix: Matrix, chosen: list[ImageSpec], args: argparse.Namespace,
          repository: str) -> Any:
    """Gate, push and verify ``chosen``; returns the run manifest (``publish.RunManifest``).
    Raises ``InputError`` when an image is refused (nothing pushed)."""
    from . import signing, tools
    from .publish import (
        EngineDaemon,
        RetryPolicy,
        gate,
        publish,
        remote_repository,
        resolve_registry,
    )

    registry, remote = remote_repository(resolve_registry(args.registry, matrix.registry),
                                         repository)
    daemon = EngineDaemon(engine)
    state = _state_dir(matrix, args, create=False)
    key = signing.key_path(getattr(args, "sign_key", None))  # its file: checked by argcheck
    candidates = gate(daemon, chosen, repository, state)  # refuses before anything is written
    _state_dir(matrix, args)
    kit: dict[str, str] = {}
    if key is not None:  # decrypted before anything is pushed (cosign fetched first)
        kit = tools.ensure(state, _say)
        pub = signing.public_key(kit["cosign"], key)
        problems = [f"--tag {c.spec.tag}: refused: {why}" for c in candidates
                    if (why := signing.check_record(kit["cosign"], pub, Path(c.test.record)))]
        if problems:
            from .errors import Problem

            raise InputError([Problem(p.split(": ", 1)[0], p.split(": ", 1)[1],
                                      "rerun: python3 build.py test --tag TAG with the key set")
                              for p in problems])
    _say(f"stagecraft: pushing {len(candidates)} image(s) to {registry}/{remote} "
         "(tags first, aliases after every tag is verified)")
    try:
        run = publish(daemon, candidates, registry, remote, state, _say,
                      RetryPolicy(attempts=args.retries + 1))
    except KeyboardInterrupt:
        local = (f"; locally, {args.journal.summary()}" if args.journal.state == "done" else "")
        print("interrupted: layers already uploaded stay in the registry and no alias was "
              f"moved; run push again to resume{local}", file=sys.stderr)
        raise SystemExit(130) from None
    _say(f"\n{'reference':<56} {'digest':<20} {'in registry':>11}  test record")
    for img in run.images:
        for ref in [img.push, *img.aliases]:
            pushed = ref.status == "pushed"
            size = f"{img.size / 1e6:>8.0f} MB" if pushed else f"{'-':>11}"
            _say(f"{ref.ref:<56} {ref.digest[:19] if pushed else ref.status.upper():<20} {size}"
                 f"  {img.test.sha256[7:19]} {img.test.counts}")
    _say(f"{sum(i.status == 'pushed' for i in run.images)}/{len(run.images)} image(s) pushed and "
         f"verified in {run.seconds:.1f} s; run manifest {run.path}")
    if key is not None:
        _sign_run(run, kit, key, state, engine, matrix, chosen, daemon.insecure(registry))
    else:
        _say("not signed: no --sign-key (or STAGECRAFT_COSIGN_KEY), so no SBOM, provenance or "
             "test record attached or attested; `build.py verify` will refuse these digests")
    if run.error:
        _say(f"failed: {run.error}")
    return run


def _sign_run(run: Any, kit: dict[str, str], key: Path, state: Path, engine: Any,
              matrix: Matrix, chosen: list[ImageSpec], insecure: bool) -> None:
    """Attach the SBOM, sign and attest every pushed digest of ``run``; a failure marks
    the run failed (exit 1)."""
    from . import signing
    from .builder import PROVENANCE_DIR
    from .testing import sbom_path, write_sbom

    specs = {s.tag: s for s in chosen}
    for img in run.images:
        if img.status not in ("pushed", "partial"):
            continue
        at = f"{img.ref.rsplit(':', 1)[0]}@{img.digest}"
        sbom = sbom_path(state, img.image_id)
        if not sbom.is_file():
            sbom = write_sbom(engine, matrix, specs[img.tag], img.ref, img.image_id, state)
        provenance = state / PROVENANCE_DIR / f"{img.digest.removeprefix('sha256:')}.intoto.json"
        if not provenance.is_file() and engine.rewrites_timestamps:
            _say(f"  {at[:80]}: no provenance for this digest in {provenance.parent} (it is kept "
                 "per image manifest, so an index of several platforms, an image built with another "
                 "--state-dir or with proxy settings has none there); pushed without one")
        try:
            done = signing.sign_pushed(kit, key, at, sbom, Path(img.test.record), insecure,
                                       provenance if provenance.is_file() else None)
        except BuildError as exc:
            run.ok, run.error = False, str(exc)
            _say(f"  FAILED: {exc}")
            continue
        _say(f"  {at[:80]}: {', '.join(done)}")


@command("verify", "check a pushed image: signature, SBOM of that digest, passed test record",
         _verify_options, _state)
def cmd_verify(args: argparse.Namespace) -> int:
    """Verify the digest REF names (``HOST/REPO:TAG`` or ``HOST/REPO@sha256:...``) with the
    public key: exit 0 when signature, SBOM and test record all hold, 1 when any fails."""
    from . import signing, tools
    from .publish import loopback as _loopback

    key = args.key or os.environ["STAGECRAFT_COSIGN_PUB"]  # one of them: checked by argcheck
    state = Path(args.state_dir) if args.state_dir else Path(".stagecraft")
    kit = tools.ensure(state, _say)
    host = args.ref.split("/", 1)[0]
    insecure = _loopback(host) or os.environ.get("STAGECRAFT_INSECURE_REGISTRY") == "1"
    v = signing.verify(kit, args.ref, Path(key), insecure)
    for name, ok, detail in v.checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name:<9} {detail}")
    print(f"{'verified' if v.ok else 'NOT VERIFIED'}: {args.ref}" + (f" ({v.digest})" if v.digest else ""))
    return EXIT_OK if v.ok else EXIT_FAILED


@command("push", "push tested images, tags first, then their aliases", _selection, _json,
         _repository, _registry, _push_options, _state)
def cmd_push(args: argparse.Namespace) -> int:
    from .engine import Engine

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    _state_dir(matrix, args, create=False)
    from .publish import resolve_registry

    resolve_registry(args.registry, matrix.registry)  # before the engine is asked anything
    repository = args.repository or matrix.repository
    run = _push(Engine(), matrix, chosen, args, repository)
    if args.json:
        _emit_json(run.to_json())
    else:
        for img in run.images:
            for ref in [img.push, *img.aliases]:
                if ref.status == "pushed":
                    print(f"{ref.ref}@{ref.digest}")
    return EXIT_OK if run.ok else EXIT_FAILED


def _bake_plan(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace):
    """The plan of the bake file and the CI matrix: every platform each image declares
    (remote builders and native runners build them; nothing is emulated here), bases
    pulled by digest unless ``--base-source`` says otherwise."""
    from .lockfile import base_epoch, base_lock
    from .plan import make_plan
    from .platforms import host_platform

    wanted = {s.tag: s.platforms or (host_platform(),) for s in specs}
    bases: dict[Any, BaseImage] = {
        (s.base["name"], p): base_image(s.base, args.base_source or
                                        ("pull" if "pull" in s.base else None), p,
                                        locked=base_lock(matrix, s, p),
                                        source_date_epoch=base_epoch(matrix, s, p))
        for s in specs for p in wanted[s.tag]}
    return make_plan(matrix, specs, bases, sourceinfo.revision(matrix.root),
                     sourceinfo.created(matrix.root), None, wanted)


def _insecure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--insecure", action="store_true",
                   help="the registry speaks plain HTTP (a local test registry)")


@command("verify-index", "check a pushed tag is an OCI image index of its platforms, by digest "
         "(skopeo)", _one_tag, _json, _repository, _registry, _insecure)
def cmd_verify_index(args: argparse.Namespace) -> int:
    """Fetch ``REGISTRY/REPOSITORY:TAG`` with skopeo, check it is an index holding exactly
    the platforms its group declares, each manifest by digest (``indexcheck``); print
    ``REF@DIGEST`` and each platform's digest. CI's merge job runs it before moving
    aliases. Exit 1 when the registry disagrees, 2 for bad input."""
    from .indexcheck import IndexMismatch, sha256, skopeo_runner, verify_index
    from .publish import remote_repository, resolve_registry

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    if len(chosen) != 1 or len(chosen[0].platforms) < 2:
        raise InputError.one("verify-index", "takes one tag built for several platforms",
                             "pass --tag TAG of a group with platforms: [...]")
    spec = chosen[0]
    repo = "/".join(remote_repository(resolve_registry(args.registry, matrix.registry),
                                      args.repository or matrix.repository))
    name = args.tag[0] if args.tag and args.tag[0] in spec.names else spec.tag
    run = skopeo_runner(tls_verify=not args.insecure)
    try:
        digest = sha256(run(["--raw", f"docker://{repo}:{name}"]))
        found = verify_index(repo, digest, spec.platforms, run)
    except IndexMismatch as exc:
        _say(f"error: {repo}:{name}: {exc}")
        return EXIT_FAILED
    if args.json:
        _emit_json({"ref": f"{repo}:{name}", "digest": digest,
                    "platforms": {p.platform: p.digest for p in found}})
    else:
        print(f"{repo}@{digest}")
        for p in found:
            _say(f"  {p.platform} {p.digest} verified")
    return EXIT_OK


@command("verify-reproducible", "build a tag, then every stage again with no cache: same "
         "digests?", _one_tag, _json, _repository, _platform, _ca, _state, _jobs)
def cmd_verify_reproducible(args: argparse.Namespace) -> int:
    """Build TAG (reusing what is built), then rebuild each of its stages, and its
    bootstrapped base, with no cache on the same parent, and compare digests
    (``reproduce.verify_plan``). Exit 0 when every stage gives the same image, 1 when one
    differs (the report names the files), 2 for bad input or an engine that cannot
    rewrite timestamps (Docker 20.10: ``doctor`` says why)."""
    from .builder import BuildOptions, build_plan
    from .cabundle import find_ca_bundle
    from .engine import Engine
    from .reproduce import verify_plan

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    if len(chosen) != 1:
        raise InputError.one("verify-reproducible", "takes one tag", "pass TAG or --tag TAG")
    bundle = find_ca_bundle(args.ca_bundle, args.no_ca_bundle)
    wanted = _platforms(chosen, args)  # the input first, then the engine
    engine = Engine()
    why = engine.reproducible()
    if why:
        raise InputError.one(f"verify-reproducible {chosen[0].tag}", f"impossible here: {why}",
                             "run it on Docker 25+ with buildx and the containerd image store")
    wanted = _check_platforms(engine, wanted, bool(args.platform))
    plan = _plan(matrix, chosen, args, wanted)
    if any(not b.source_date_epoch for b in plan.bases):
        _say("warning: no matrix.lock entry for this base, so no SOURCE_DATE_EPOCH: file times "
             "and the image config's dates are the build's and will differ (run `build.py lock`)")
    state = _state_dir(matrix, args)
    report = build_plan(engine, plan, matrix.root,
                        BuildOptions(args.repository or matrix.repository, state, args.jobs,
                                     bundle), _say)
    if not report.ok:
        _say(f"not checked: {chosen[0].tag} did not build ({report.images[0].error[:200]})")
        return EXIT_FAILED
    checked = verify_plan(engine, plan, matrix.root, state, _say, bundle)
    if args.json:
        _emit_json({"tag": chosen[0].tag, "reproducible": checked.ok,
                    "seconds": round(checked.seconds, 1),
                    "stages": [{**asdict(c), "same": c.same} for c in checked.checks]})
    differ = [c for c in checked.checks if not c.same]
    _say(f"{chosen[0].tag}: " + ("reproducible: every stage rebuilt to the same digest "
                                 f"({len(checked.checks)} checked, {checked.seconds:.0f} s)"
                                 if not differ else
                                 f"NOT reproducible: {', '.join(c.stage for c in differ)} differ"))
    return EXIT_OK if checked.ok else EXIT_FAILED


@command("matrix", "the CI job matrix, one entry per tag", _selection, _format, _repository,
         _registry, _base_source)
def cmd_matrix(args: argparse.Namespace) -> int:
    """The CI job matrix, from the same plan as ``bake`` (bases pulled by digest)."""
    from .ci import ci_matrix, github_indexes, github_matrix

    matrix, specs = _load(args)
    plan = _bake_plan(matrix, _select(specs, args, default_all=True), args)
    if args.format in ("github", "github-indexes"):  # one line: it goes into $GITHUB_OUTPUT
        doc = github_matrix(plan) if args.format == "github" else github_indexes(plan)
        sys.stdout.write(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    else:
        _emit_json({"repository": args.repository or matrix.repository,
                    "registry": args.registry or matrix.registry, "images": ci_matrix(plan)})
    return EXIT_OK


@command("bake", "the plan as a buildx bake file, each stage a target", _selection,
         _output("the bake file"), _bake_cache, _repository, _registry, _base_source)
def cmd_bake(args: argparse.Namespace) -> int:
    from .ci import bake_file, parse_bake_cache

    matrix, specs = _load(args)
    plan = _bake_plan(matrix, _select(specs, args, default_all=True), args)
    repository, registry = args.repository or matrix.repository, args.registry or matrix.registry
    if registry:  # the same names `push` gives (a namespace replaces the repository's own)
        from .publish import remote_repository, resolve_registry

        registry, repository = remote_repository(resolve_registry(registry, ""), repository)
    doc = bake_file(plan, repository, registry, parse_bake_cache(args.cache))
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if args.output:
        _write_output("-o", args.output, text)
        _say(f"wrote {args.output}: {len(doc['target'])} targets, "
             f"{len(doc['group']['default']['targets'])} tagged")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _prune_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true",
                   help="remove what the dry run lists (default: list only)")
    p.add_argument("--keep", type=int, default=0, metavar="N",
                   help="keep the N most recent previous keys of each stage (default: 0)")
    p.add_argument("--cache", metavar="type=local,dir=PATH",
                   help="also prune this local build cache directory (--cache-to's)")


@command("prune", "remove stage images (and local caches) no target of the plan uses",
         _prune_options, _json, _repository, _base_source)
def cmd_prune(args: argparse.Namespace) -> int:
    """List (default) or remove (``--yes``) the stage images and bootstrapped bases of
    this engine that no target of the current plan (every image of the matrix, every
    platform) references, with their sizes; never an image another name points at, never
    a name outside stagecraft's own repositories."""
    from . import cache, prune
    from .engine import Engine
    from .platforms import host_platform
    from .summary import SIZE_KINDS

    if args.keep < 0:
        raise InputError.one(f"--keep {args.keep}", "must be 0 or more", "pass --keep 1 or more")
    local = cache.parse(args.cache, "--cache") if args.cache else None
    if local is not None and local.kind != "local":
        raise InputError.one(f"--cache {_clip(args.cache)}", "prune takes a local cache directory",
                             "a registry's tags are pruned by the registry (its garbage collector)")
    matrix, specs = _load(args)
    plan = _plan(matrix, specs, args, {s.tag: s.platforms or (host_platform(),) for s in specs})
    engine = Engine()
    decisions = prune.plan_prune(prune.owned_images(engine.client), prune.referenced(plan), args.keep)
    entries = prune.local_cache_prune(local, plan, args.keep) if local else []
    going = [d for d in decisions if d.remove]
    spared = [d for d in decisions if not d.remove and d.why != "in the plan"]
    cache_going = [e for e in entries if e.remove]
    failed: list[tuple[Any, str]] = []
    freed: int | None = None
    if args.yes:
        before = prune.layers_size(engine.client) if going else 0
        failed = prune.remove(engine.client, going)
        prune.remove_cache_entries(cache_going)
        freed = before - prune.layers_size(engine.client) if going else 0
    kind = "compressed" if engine.containerd_store else "unpacked"
    if args.json:
        _emit_json({"removed" if args.yes else "would_remove":
                    [{"ref": d.image.ref, "image_id": d.image.image_id, "size": d.image.size,
                      "created": d.image.created} for d in going],
                    "kept": [{"ref": d.image.ref, "why": d.why} for d in decisions if not d.remove],
                    "cache": [{"path": str(e.path), "remove": e.remove, "why": e.why, "size": e.size}
                              for e in entries],
                    "size_kind": kind, "freed": freed,
                    "failed": [{"ref": d.image.ref, "error": e} for d, e in failed]})
    else:
        verb = "removed" if args.yes else "would remove"
        for d in going:
            print(f"{verb:<12} {d.image.ref:<52} {_human_size(d.image.size):>9}  {d.image.created[:19]}")
        for d in spared:
            print(f"{'kept':<12} {d.image.ref:<52} {_human_size(d.image.size):>9}  {d.why}")
        for e in entries:
            if e.remove or e.why != "in the plan":
                print(f"{verb if e.remove else 'kept':<12} {str(e.path):<52} {_human_size(e.size):>9}"
                      f"{'' if e.remove else '  ' + e.why}")
    _say(f"{len(going)} image name(s) {'removed' if args.yes else 'to remove'}, "
         f"{len(decisions) - len(going)} kept"
         + (f" (the engine's layers shrank by {_human_size(freed)})" if freed is not None else "")
         + (f"; {len(cache_going)} local cache entr{'y' if len(cache_going) == 1 else 'ies'} "
            f"({_human_size(sum(e.size for e in cache_going))})" if local else "")
         + ("" if args.yes or not (going or cache_going) else "; dry run: pass --yes to remove them"))
    _say(SIZE_KINDS[kind].replace("* size", "sizes") + "; each counts the layers it shares with "
         "other images, which stay while a kept image uses them")
    for d, error in failed:
        _say(f"not removed: {d.image.ref}: {error}")
    return EXIT_FAILED if failed else EXIT_OK


@command("freeze", "pins of a built image's venv, as constraints: for matrix.yaml", _one_tag,
         _json, _repository)
def cmd_freeze(args: argparse.Namespace) -> int:
    """Print what pip resolved in a built image's venv, as the framework's `constraints:`
    for matrix.yaml: pinning them makes the next build of that key install the same
    versions (its key changes once, then means one set of packages)."""
    import re

    from .engine import Engine

    matrix, specs = _load(args)
    chosen = _select(specs, args, default_all=False)
    if len(chosen) != 1:
        raise InputError.one("freeze", "freeze takes exactly one tag", "pass one TAG")
    spec = chosen[0]
    ref = f"{args.repository or matrix.repository}:{spec.tag}"
    engine = Engine()
    if engine.image_id(ref) is None:
        raise InputError.one(f"--tag {spec.tag}", f"{ref} is not built",
                             f"build it first: python3 build.py --tag {spec.tag}")
    out = engine.client.containers.run(ref, ["/opt/venv/bin/pip", "freeze"], remove=True,
                                       environment={"STAGECRAFT_QUIET": "1"}).decode()
    skip = {spec.framework["package"].lower()} | {
        re.split(r"[=<>!~ ]", r, maxsplit=1)[0].lower() for r in matrix.entrypoint.get("requirements", [])}
    for table in ("cuda", "accel"):  # NVIDIA's wheels: pinned by their stage, not the framework
        skip |= {p.lower() for p in ((spec.components.get(table) or {}).get("pypi") or {})}
    pins = sorted((ln.strip() for ln in out.splitlines() if "==" in ln), key=str.lower)
    pins = [p for p in pins if p.split("==")[0].lower().replace("_", "-") not in
            {x.replace("_", "-") for x in skip}]
    if args.json:
        _emit_json({"tag": spec.tag, "framework": spec.framework["name"], "constraints": pins})
    else:
        print(f"# components.framework.{spec.framework['name']}.constraints, from {ref}")
        print("constraints:")
        for pin in pins:
            print(f"  - {pin}")
    return EXIT_OK


def _lock_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true",
                   help="exit 2 naming what differs when matrix.lock does not match matrix.yaml "
                        "(offline; what CI runs)")
    g.add_argument("--upgrade", nargs="*", metavar="PACKAGE", default=None,
                   help="re-resolve (every entry, or those holding PACKAGE) and print "
                        "`package: old -> new`: the security-update workflow")


@command("lock", "write matrix.lock: every Debian package and Python distribution by "
         "version and SHA-256", _lock_options)
def cmd_lock(args: argparse.Namespace) -> int:
    """Write (or check) the lock beside the matrix. Entries whose inputs did not change
    are kept; new or changed ones are resolved (apt and debootstrap against the Debian
    mirror, ``uv pip compile`` against the Python index)."""
    from . import lockfile

    matrix, specs = _load(args)
    path = lockfile.lock_path(matrix)
    want = lockfile.wanted(matrix, specs)
    if args.check:
        lock = lockfile.read(path)
        problems = lockfile.check(lock, matrix, want, path.name)
        if problems:
            raise InputError(problems)
        n = len(lock.debian) + len(lock.python)
        print(f"{path.name}: in step with {matrix.path.name} ({n} entries)")
        return EXIT_OK
    from .resolve import update_lock

    old = lockfile.read(path) if path.exists() else None
    if old is not None and old.matrix != lockfile.matrix_identity(matrix):
        raise InputError(lockfile.check(old, matrix, want, path.name))
    if args.upgrade:
        if old is None:
            raise InputError.one("--upgrade", f"no {path.name} to upgrade",
                                 "run `python3 build.py lock` first")
        unknown = lockfile.unknown_packages(old, args.upgrade)
        if unknown:
            raise InputError.one(f"--upgrade {_clip(unknown[0])}", f"no package of that name in {path.name}",
                                 "name a locked Debian package or Python distribution")
    new = update_lock(lockfile.matrix_identity(matrix), want, old, args.upgrade, _say)
    text = lockfile.dumps(new)
    changed = lockfile.changes(old, new)
    if old is None or text != lockfile.dumps(old):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    for line in changed:
        print(line)
    _say(f"wrote {path.name}: {len(new.debian)} Debian and {len(new.python)} Python entries, "
         f"{len(changed)} package change(s)")
    return EXIT_OK


@command("doctor", "the engine, its BuildKit, the build path and what it can do", _json, _ca)
def cmd_doctor(args: argparse.Namespace) -> int:
    """The engine, its BuildKit version, the build path and each capability (cache
    export and import, multi-platform, OCI output, attestations), with the reason when
    one is missing."""
    from .cabundle import find_ca_bundle
    from .doctor import doctor_report, format_report
    from .engine import Engine

    engine = Engine()
    bundle = find_ca_bundle(args.ca_bundle, args.no_ca_bundle)
    report = doctor_report(engine.facts(), f"{bundle.path} ({bundle.origin})" if bundle else "none")
    why = engine.reproducible()
    report["reproducible"] = "yes (rewrite-timestamp exports)" if not why else f"impossible here: {why}"
    if args.json:
        _emit_json(report)
    else:
        print("\n".join(format_report(report)))
        print(f"{'reproducible':<12} {report['reproducible']}")
    return EXIT_OK


@command("probe", "this host's hardware and the best tag for it (no Docker)", _selection,
         _json, _repository)
def cmd_probe(args: argparse.Namespace) -> int:
    """Probe this host as the entrypoint would and name the tag of the matrix (or of
    ``--tag``) that suits it best (stagecraft.probecmd). Exit 0, or 1 when no image can
    run here."""
    from . import probecmd

    matrix, specs = _load(args)
    result = probecmd.probe(_select(specs, args, default_all=True), args.repository or matrix.repository)
    if args.json:
        _emit_json(result)
    else:
        print(probecmd.format_text(result))
    return EXIT_OK if result["best"]["tag"] else EXIT_FAILED


@command("catalog", "a static site of every tag: contents, hardware, which tag fits a machine",
         _selection, _repository, _registry, _state, _json, _catalog_options)
def cmd_catalog(args: argparse.Namespace) -> int:
    """Write the catalog site (stagecraft.catalog) for the chosen tags (default: all)."""
    from .catalog import cli as catalog_cli

    matrix, specs = _load(args)
    return catalog_cli.run(args, matrix, _select(specs, args, default_all=True), specs)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``build.py``; returns the exit status."""
    args = _parse(sys.argv[1:] if argv is None else list(argv))
    args.journal = TagJournal()  # what the run did to tags, whenever it ends
    try:
        signal.signal(signal.SIGTERM, _terminate)  # a supervisor's stop is handled as Ctrl-C
    except ValueError:  # not the main thread (embedded use): leave signals alone
        pass
    try:
        argcheck.check(args)  # every option and file, before any network, engine or write
        with run_scratch():  # every temporary file of the run, removed however it ends
            return args.run(args)
    except InputError as exc:
        for problem in exc.problems:
            print(f"error: {problem.line()}", file=sys.stderr)
        return EXIT_INPUT
    except BuildError as exc:
        print(one_line(f"failed: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(args.journal.interrupted(), file=sys.stderr)
        return 130
    except OSError as exc:  # a path given on the command line, the state directory, ...
        print(one_line(f"failed: {exc.filename or ''}: {exc.strerror or exc}; check the path "
                       "and its permissions"), file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        print(f"failed: internal error {type(exc).__name__}: {str(exc)[:300]}; please report "
              "it with the command line (STAGECRAFT_DEBUG=1 shows the traceback)", file=sys.stderr)
        if os.environ.get("STAGECRAFT_DEBUG") == "1":
            raise
        return EXIT_FAILED
