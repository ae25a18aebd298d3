"""Command line: the parser and each command's options, checked (``argcheck``) before
anything runs. The run itself is the pipeline's (``stagecraft.pipeline``): this module
dispatches to it and reports how it ended (one line on stderr, the exit status).

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

Adding a command: one function that adds its options to a parser, the run in
``stagecraft.pipeline`` (a function of the ``RunContext``, returning the exit status),
its ``NAME(args)`` in ``pipeline/commands.py``, and one ``command(NAME, SUMMARY,
*option_groups)(commands.NAME)`` line below. ``command`` also works as a decorator of a
``run(args) -> exit status``.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from . import argcheck
from .catalog.cli import options as _catalog_options
from .errors import EXIT_FAILED, EXIT_INPUT, BuildError, InputError
from .interrupts import redelivered_interrupts, terminate
from .pipeline import commands
from .safetext import cut_start, one_line
from .scratch import run_scratch
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
DEFAULT_COMMAND = "build"


def command(name: str, summary: str, *options: Callable[[argparse.ArgumentParser], None]):
    """Register ``run(args) -> int`` as the subcommand ``name`` with the option
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


def _insecure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--insecure", action="store_true",
                   help="the registry speaks plain HTTP (a local test registry)")


def _prune_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true",
                   help="remove what the dry run lists (default: list only)")
    p.add_argument("--keep", type=int, default=0, metavar="N",
                   help="keep the N most recent previous keys of each stage (default: 0)")
    p.add_argument("--cache", metavar="type=local,dir=PATH",
                   help="also prune this local build cache directory (--cache-to's)")


def _lock_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true",
                   help="exit 2 naming what differs when matrix.lock does not match matrix.yaml "
                        "(offline; what CI runs)")
    g.add_argument("--upgrade", nargs="*", metavar="PACKAGE", default=None,
                   help="re-resolve (every entry, or those holding PACKAGE) and print "
                        "`package: old -> new`: the security-update workflow")


_clip = argcheck.clip  # a user value as echoed back: bounded (a value can be megabytes)


# The commands, in the order `build.py --help` lists them (build first).
command("list", "tags, aliases and stage chains of the matrix (also: build.py --list)",
        _selection, _json)(commands.list_tags)
command("render", "print one tag's complete multi-stage Dockerfile", _one_tag, _base_source,
        _platform, _output("the Dockerfile"))(commands.render)
command("plan", "stages, content keys, built or to build", _selection, _json, _repository,
        _base_source, _platform)(commands.plan)
command("build", "build images (the default command: build.py --tag T)", _selection,
        _build_options, _json, _repository, _base_source, _platform, _ca, _state, _registry,
        _push_options)(commands.build)
command("test", "run the testinfra suites against built images", _selection, _json,
        _repository, _state, _platform)(commands.run_tests)
command("verify", "check a pushed image: signature, SBOM of that digest, passed test record",
        _verify_options, _state)(commands.verify)
command("push", "push tested images, tags first, then their aliases", _selection, _json,
        _repository, _registry, _push_options, _state)(commands.push)
command("verify-index", "check a pushed tag is an OCI image index of its platforms, by digest "
        "(skopeo)", _one_tag, _json, _repository, _registry, _insecure)(commands.verify_index)
command("verify-reproducible", "build a tag, then every stage again with no cache: same "
        "digests?", _one_tag, _json, _repository, _platform, _ca, _state,
        _jobs)(commands.verify_reproducible)
command("matrix", "the CI job matrix, one entry per tag", _selection, _format, _repository,
        _registry, _base_source)(commands.ci_matrix)
command("bake", "the plan as a buildx bake file, each stage a target", _selection,
        _output("the bake file"), _bake_cache, _repository, _registry, _base_source)(commands.bake)
command("prune", "remove stage images (and local caches) no target of the plan uses",
        _prune_options, _json, _repository, _base_source)(commands.prune)
command("freeze", "pins of a built image's venv, as constraints: for matrix.yaml", _one_tag,
        _json, _repository)(commands.freeze)
command("lock", "write matrix.lock: every Debian package and Python distribution by "
        "version and SHA-256", _lock_options)(commands.lock)
command("doctor", "the engine, its BuildKit, the build path and what it can do", _json,
        _ca)(commands.doctor)
command("probe", "this host's hardware and the best tag for it (no Docker)", _selection,
        _json, _repository)(commands.probe)
command("catalog", "a static site of every tag: contents, hardware, which tag fits a machine",
        _selection, _repository, _registry, _state, _json, _catalog_options)(commands.catalog)


def _from_engine(exc: BaseException) -> bool:
    """Whether ``exc`` came from talking to the engine (the docker SDK, or requests and
    urllib3 under it: a connection refused or cut when the engine stopped mid-run)."""
    return type(exc).__module__.split(".")[0] in ("docker", "requests", "urllib3")


def _engine_gone(exc: BaseException, journal: TagJournal) -> int:
    """One line for an engine that stopped answering mid-run (killed, restarted, its
    socket gone), or that answered with an error (an APIError: its own words, their end
    kept, e.g. a full data root): what failed, what the names are, what to do. Returns
    the exit code."""
    said, code = str(getattr(exc, "explanation", "") or ""), getattr(exc, "status_code", None)
    if said and code:  # docker.errors.APIError: it answered
        what = ("free space on the engine's data root (`docker system df`) and run the same command"
                if "no space left on device" in said.lower() else "run the same command")
        print(one_line(f"failed: the Docker engine refused a request ({code}: {cut_start(said, 240)}); "
                       f"{journal.summary()}; {what}"), file=sys.stderr)
        return EXIT_FAILED
    print(one_line(f"failed: the Docker engine stopped answering ({type(exc).__name__}: "
                   f"{cut_start(str(exc), 200)}); {journal.summary()}; when `docker info` answers again, "
                   "run the same command: complete stages are reused"), file=sys.stderr)
    return EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``build.py``; returns the exit status."""
    try:
        args = _parse(sys.argv[1:] if argv is None else list(argv))
        args.journal = TagJournal()  # what the run did to tags, whenever it ends
    except KeyboardInterrupt:  # Ctrl-C while the command line is read: nothing began
        print("interrupted while starting: nothing was done", file=sys.stderr)
        return 130
    try:  # the handler is set inside: a Ctrl-C meeting signal.signal's own check is handled
        try:
            signal.signal(signal.SIGTERM, terminate)  # a supervisor's stop is handled as Ctrl-C
        except ValueError:  # not the main thread (embedded use): leave signals alone
            pass
        argcheck.check(args)  # every option and file, before any network, engine or write
        with redelivered_interrupts(), run_scratch():  # every temporary file of the run, removed however it ends
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
        if _from_engine(exc):
            return _engine_gone(exc, args.journal)
        what = ("free space on its file system and run again" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                else "check the path and its permissions")
        where = exc.filename or "a file of the run"  # statefile.named gives state writes theirs
        print(one_line(f"failed: {where}: {exc.strerror or exc}; {args.journal.summary()}; {what}"),
              file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        if _from_engine(exc):
            return _engine_gone(exc, args.journal)
        print(f"failed: internal error {type(exc).__name__}: {str(exc)[:300]}; please report "
              "it with the command line (STAGECRAFT_DEBUG=1 shows the traceback)", file=sys.stderr)
        if os.environ.get("STAGECRAFT_DEBUG") == "1":
            raise
        return EXIT_FAILED
