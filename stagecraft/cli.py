"""Command line: a thin layer over the pure modules and the engine.

    python build.py --tag 2.6.0-gpu-cuda11.8      build one image (tag, alias or prefix)
    python build.py --all [--jobs N]              build every image of the matrix
    python build.py --list                        tags and aliases
    python build.py render TAG                    the tag's multi-stage Dockerfile
    python build.py plan [--tag T | --all]        stages: built, to build, order
    python build.py test [--tag T | --all]        testinfra suites against built images
    python build.py doctor                        the engine and BuildKit path found

Progress and logs go to stderr; results (built ``repo:tag`` lines, or JSON with
``--json``) to stdout. Exit status: 0 ok, 1 a build or test failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from . import sourceinfo
from .bases import BaseImage, base_image
from .errors import EXIT_FAILED, EXIT_INPUT, EXIT_OK, BuildError, InputError
from .expand import ImageSpec, expand, resolve
from .matrix import Matrix, load_matrix

COMMANDS = ("build", "render", "plan", "test", "list", "doctor")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(EXIT_INPUT, f"{self.prog}: {message}; see {self.prog} --help\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="build.py", description="Build, test and render the images of matrix.yaml.",
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("command", nargs="?", default="build", choices=COMMANDS,
                   help="what to do (default: build)")
    p.add_argument("target", nargs="?", help="tag for `render` (same as --tag)")
    p.add_argument("--matrix", default="matrix.yaml", help="matrix file (default: matrix.yaml)")
    p.add_argument("-t", "--tag", action="append", default=[],
                   help="tag, alias or unique prefix; repeatable")
    p.add_argument("--all", action="store_true", help="every image of the matrix")
    p.add_argument("--list", action="store_true", help="list tags and aliases, then exit")
    p.add_argument("--dry-run", action="store_true", help="show the plan; build nothing")
    p.add_argument("--json", action="store_true", help="machine-readable results on stdout")
    p.add_argument("--jobs", type=int, default=1, help="stages built at once (default: 1)")
    p.add_argument("--repository", help="repository of the final tags (default: from matrix)")
    p.add_argument("--base-source", choices=("bootstrap", "pull"),
                   help="where base images come from (default: per base in matrix.yaml; "
                        "`render` defaults to pull)")
    p.add_argument("--ca-bundle", metavar="PATH",
                   help="CA bundle for pip inside builds (default: found in the environment "
                        "and pip.conf); passed as a BuildKit secret only")
    p.add_argument("--no-ca-bundle", action="store_true", help="do not pass any CA bundle")
    p.add_argument("--cache-from", metavar="SPEC",
                   help="import build cache per stage key: type=local,dir=PATH or "
                        "type=registry,ref=HOST/REPO")
    p.add_argument("--cache-to", metavar="SPEC", help="export build cache per stage key (same forms)")
    p.add_argument("--test", action="store_true", help="after building, run the testinfra suites")
    p.add_argument("--state-dir", default=None,
                   help="logs, test records (default: .stagecraft/ beside matrix.yaml)")
    p.add_argument("-o", "--output", help="`render`: write the Dockerfile here")
    return p


def _select(specs: list[ImageSpec], args: argparse.Namespace, default_all: bool) -> list[ImageSpec]:
    queries = list(args.tag) + ([args.target] if args.target else [])
    if args.all:
        return specs
    if not queries:
        if default_all:
            return specs
        raise InputError.one("build.py", "no image chosen",
                             "pass --tag TAG (see --list) or --all")
    chosen: dict[str, ImageSpec] = {}
    for q in queries:
        spec = resolve(specs, q)
        chosen[spec.tag] = spec
    return list(chosen.values())


def _bases(matrix: Matrix, specs: list[ImageSpec], source: str | None) -> dict[str, BaseImage]:
    return {s.base["name"]: base_image(s.base, source) for s in specs}


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _human_size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def cmd_list(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace) -> int:
    if args.json:
        _emit_json([{"tag": s.tag, "aliases": list(s.aliases), "group": s.group,
                     "chain": list(s.chain), "selection": dict(s.selection)} for s in specs])
        return EXIT_OK
    width = max(len(s.tag) for s in specs)
    for s in specs:
        aliases = f"  (aliases: {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.tag:<{width}}  {' > '.join(s.chain)}{aliases}")
    return EXIT_OK


def cmd_render(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace) -> int:
    from .plan import full_dockerfile

    chosen = _select(specs, args, default_all=False)
    if len(chosen) != 1:
        raise InputError.one("render", "render takes exactly one tag", "pass one TAG")
    spec = chosen[0]
    base = base_image(spec.base, args.base_source or ("pull" if "pull" in spec.base else None))
    text = full_dockerfile(matrix, spec, base, sourceinfo.revision(matrix.root),
                           sourceinfo.created(matrix.root))
    if args.output:
        Path(args.output).write_text(text)
        _say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _plan(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace):
    from .plan import make_plan

    return make_plan(matrix, specs, _bases(matrix, specs, args.base_source),
                     sourceinfo.revision(matrix.root), sourceinfo.created(matrix.root))


def cmd_plan(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace,
             engine: Any | None = None) -> int:
    from .engine import Engine

    chosen = _select(specs, args, default_all=True)
    plan = _plan(matrix, chosen, args)
    engine = engine or Engine()
    rows = []
    for key, node in plan.nodes.items():
        built = engine.image_id(node.image_ref) is not None
        rows.append({"key": key, "stage": node.stage, "image": node.image_ref,
                     "parent": node.parent_key, "built": built, "tags": list(node.tags)})
    bases = [{"name": b.name, "source": b.source, "ref": b.ref,
              "present": engine.image_id(b.ref) is not None} for b in plan.bases]
    if args.json:
        _emit_json({"bases": bases, "stages": rows,
                    "images": [{"tag": i.spec.tag, "keys": list(i.keys)} for i in plan.images]})
        return EXIT_OK
    for b in bases:
        print(f"base   {b['name']:<10} {'present ' if b['present'] else 'to make '} {b['ref']}")
    for i, r in enumerate(rows, 1):
        state = "built   " if r["built"] else "to build"
        print(f"{i:>3}. {r['stage']:<8} {r['key'][:12]} {state} {', '.join(r['tags'])}")
    todo = sum(not r["built"] for r in rows)
    print(f"{len(rows)} stages, {todo} to build, {len(rows) - todo} already built", file=sys.stderr)
    return EXIT_OK


def _state_dir(matrix: Matrix, args: argparse.Namespace) -> Path:
    return Path(args.state_dir) if args.state_dir else matrix.root / ".stagecraft"


def cmd_build(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace) -> int:
    from .builder import BuildOptions, build_plan
    from .cabundle import find_ca_bundle
    from .engine import Engine

    chosen = _select(specs, args, default_all=False)
    if args.jobs < 1:
        raise InputError.one(f"--jobs {args.jobs}", "must be at least 1", "pass --jobs 1 or more")
    bundle = find_ca_bundle(args.ca_bundle, args.no_ca_bundle)
    from . import cache

    cache_from = cache.parse(args.cache_from, "--cache-from") if args.cache_from else None
    cache_to = cache.parse(args.cache_to, "--cache-to") if args.cache_to else None
    if args.dry_run:
        return cmd_plan(matrix, chosen, args)
    engine = Engine()
    plan = _plan(matrix, chosen, args)
    repository = args.repository or matrix.repository
    _say(f"stagecraft: {len(chosen)} image(s), {len(plan.nodes)} stage(s); BuildKit via "
         f"{engine.builder.describe()}; CA bundle: "
         f"{f'{bundle.path} ({bundle.origin})' if bundle else 'none'}")
    report = build_plan(engine, plan, matrix.root,
                        BuildOptions(repository, _state_dir(matrix, args), args.jobs, bundle,
                                     cache_from, cache_to), _say)
    tests: dict[str, Any] = {}
    if args.test:
        from .testing import run_suites

        for img in report.images:
            if img.status == "built":
                spec = next(s for s in chosen if s.tag == img.tag)
                _say(f"testing {img.ref} ({len(spec.tests)} suites)")
                tests[img.tag] = run_suites(engine, matrix, spec, img.ref, _state_dir(matrix, args))
                _say(f"  {'passed' if tests[img.tag].passed else 'FAILED'} {tests[img.tag].counts}")
    _summary(report, tests, args)
    ok = report.ok and all(t.passed for t in tests.values())
    return EXIT_OK if ok else EXIT_FAILED


def _summary(report: Any, tests: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        _emit_json({"seconds": round(report.seconds, 1),
                    "images": [{**asdict(i), **({"test": asdict(tests[i.tag])} if i.tag in tests else {})}
                               for i in report.images],
                    "stages": [asdict(s) for s in report.stages.values()]})
    built = sum(s.status == "built" for s in report.stages.values())
    cached = sum(s.status == "cached" for s in report.stages.values())
    _say(f"\n{'tag':<32} {'image id':<19} {'size':>9} {'stages':>14} {'time':>8}")
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
    if not args.json:
        for i in report.images:
            if i.status == "built":
                for name in [i.tag, *i.aliases]:
                    print(f"{i.ref.rsplit(':', 1)[0]}:{name}")


def cmd_test(matrix: Matrix, specs: list[ImageSpec], args: argparse.Namespace) -> int:
    from .engine import Engine
    from .testing import run_suites

    chosen = _select(specs, args, default_all=False)
    engine = Engine()
    repository = args.repository or matrix.repository
    results = []
    for spec in chosen:
        ref = f"{repository}:{spec.tag}"
        if engine.image_id(ref) is None:
            raise InputError.one(f"--tag {spec.tag}", f"{ref} is not built",
                                 f"build it first: python build.py --tag {spec.tag}")
    for spec in chosen:
        ref = f"{repository}:{spec.tag}"
        _say(f"testing {ref} ({', '.join(spec.tests)})")
        res = run_suites(engine, matrix, spec, ref, _state_dir(matrix, args))
        _say(res.output_tail if not res.passed else f"  passed {res.counts} in {res.seconds:.1f} s")
        results.append(res)
    if args.json:
        _emit_json([asdict(r) for r in results])
    else:
        for r in results:
            print(f"{'PASS' if r.passed else 'FAIL'} {repository}:{r.tag} {r.counts}")
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def cmd_doctor(matrix: Matrix | None, args: argparse.Namespace) -> int:
    from .cabundle import find_ca_bundle
    from .engine import Engine

    engine = Engine()
    info = engine.client.version()
    bundle = find_ca_bundle(args.ca_bundle, args.no_ca_bundle)
    lines = {"engine": f"Docker {info.get('Version')} (API {info.get('ApiVersion')})",
             "buildkit": engine.builder.describe(),
             "ca_bundle": f"{bundle.path} ({bundle.origin})" if bundle else "none"}
    if args.json:
        _emit_json(lines)
    else:
        for k, v in lines.items():
            print(f"{k:<10} {v}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``build.py``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "doctor":
            return cmd_doctor(None, args)
        matrix = load_matrix(args.matrix)
        specs = expand(matrix)
        if args.list or args.command == "list":
            return cmd_list(matrix, specs, args)
        handler = {"render": cmd_render, "plan": cmd_plan, "test": cmd_test,
                   "build": cmd_build}[args.command]
        return handler(matrix, specs, args)
    except InputError as exc:
        for problem in exc.problems:
            print(f"error: {problem.line()}", file=sys.stderr)
        return EXIT_INPUT
    except BuildError as exc:
        print(f"failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted: no tag was moved; the next run resumes from the stages that "
              "finished", file=sys.stderr)
        return 130
