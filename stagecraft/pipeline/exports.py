"""The plan for other builders: ``matrix`` (the CI job matrix) and ``bake`` (a buildx
bake file, each stage a target), both from one plan of every platform each image
declares (``planning.bake_plan``). Each returns its exit status."""

from __future__ import annotations

import json
import sys

from ..ci import bake_file, ci_matrix, github_indexes, github_matrix, parse_bake_cache
from ..errors import EXIT_OK
from ..publish import remote_repository, resolve_registry
from .context import RunContext
from .output import emit_json, say, write_output
from .planning import bake_plan


def ci_jobs(ctx: RunContext) -> int:
    """``matrix``: the CI job matrix, from the same plan as ``bake`` (bases pulled by
    digest); ``--format github``/``github-indexes`` on one line for $GITHUB_OUTPUT."""
    ctx.load()
    the_plan = bake_plan(ctx, ctx.select(default_all=True))
    if ctx.opts.format in ("github", "github-indexes"):  # one line: it goes into $GITHUB_OUTPUT
        doc = github_matrix(the_plan) if ctx.opts.format == "github" else github_indexes(the_plan)
        sys.stdout.write(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    else:
        emit_json({"repository": ctx.repository, "registry": ctx.opts.registry or ctx.matrix.registry,
                   "images": ci_matrix(the_plan)})
    return EXIT_OK


def bake(ctx: RunContext) -> int:
    """``bake``: the plan as a buildx bake file, each stage a target."""
    ctx.load()
    the_plan = bake_plan(ctx, ctx.select(default_all=True))
    repository, registry = ctx.repository, ctx.opts.registry or ctx.matrix.registry
    if registry:  # the same names `push` gives (a namespace replaces the repository's own)
        registry, repository = remote_repository(resolve_registry(registry, ""), repository)
    doc = bake_file(the_plan, repository, registry, parse_bake_cache(ctx.opts.cache))
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if ctx.opts.output:
        write_output("-o", ctx.opts.output, text)
        say(f"wrote {ctx.opts.output}: {len(doc['target'])} targets, "
            f"{len(doc['group']['default']['targets'])} tagged")
    else:
        sys.stdout.write(text)
    return EXIT_OK
