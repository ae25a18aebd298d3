"""``test``, and the tests ``build --test`` runs: the testinfra suites against built
images, each platform of a multi-platform tag on its own; a tag's record (what ``push``
checks) passes only when every platform passed."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..builder import BuildReport, index_parts, index_ref
from ..errors import EXIT_FAILED, EXIT_OK, InputError
from ..expand import ImageSpec
from ..testing import TestResult, check_tools, combine, run_suites, save_record
from .context import RunContext
from .output import counts, emit_json, say
from .planning import choose_platforms, plan_for


def suites_after_build(ctx: RunContext, report: BuildReport, chosen: list[ImageSpec]) -> dict[str, TestResult]:
    """Tag -> the result of the suites on each image ``report`` built (a tag of several
    platforms: every platform, combined, and that record saved). Runs before the tag
    phase (``BuildOptions.before_tags``): each image is tested by its id, under the name
    it is to get."""
    tests: dict[str, TestResult] = {}
    for img in report.images:
        if img.status != "built":
            continue
        spec = next(s for s in chosen if s.tag == img.tag)
        per_platform = []
        for platform, one in img.platforms.items():
            say(f"testing {img.ref} on {platform} ({len(spec.tests)} suites)")
            per_platform.append(run_suites(ctx.engine, ctx.matrix, spec, img.ref, ctx.state_dir(),
                                           image=one["image_id"], say=say))
            say(f"  {'passed' if per_platform[-1].passed else 'FAILED'}: "
                f"{counts(per_platform[-1].counts)}")
            for failure in per_platform[-1].failures[:5]:
                say(f"    {failure}")
        tests[img.tag] = per_platform[0]
        if len(per_platform) > 1:  # the index passes when every platform passed
            tests[img.tag] = combine(per_platform, img.image_id)
            save_record(ctx.state_dir(), tests[img.tag])
    return tests


def run_tests(ctx: RunContext) -> int:
    """``test``: the suites of each chosen tag against its built image; exit 0 when all
    passed, 1 when one failed. Raises ``InputError`` for an image not built."""
    ctx.load()
    chosen = ctx.select(default_all=False)
    ctx.state_dir(create=False)  # made by the first suite run, after the checks
    check_tools()
    wanted = choose_platforms(ctx, chosen) if ctx.opts.platform else {}  # before the engine
    engine, repository = ctx.engine, ctx.repository
    for spec in chosen:
        ref = f"{repository}:{spec.tag}"
        if engine.image_id(ref) is None:
            raise InputError.one(f"--tag {spec.tag}", f"{ref} is not built",
                                 f"build it first: python3 build.py --tag {spec.tag}")
    results = []
    for spec in chosen:
        results += _test_tag(ctx, spec, wanted)
    if ctx.opts.json:
        emit_json([asdict(r) for r in results])
    else:
        for r in results:
            print(f"{'PASS' if r.passed else 'FAIL'} {repository}:{r.tag} {r.platform} ({counts(r.counts)})")
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def _test_tag(ctx: RunContext, spec: ImageSpec, wanted: dict[str, tuple[str, ...]]) -> list[TestResult]:
    # --platform: each platform's own image of the tag (the final stage of its chain).
    # Without it: the tag itself, unless it is the OCI image index of several platforms
    # that a build made; then every platform in it, and the index passes only when each
    # one did (its record is what `push` checks: testing the host's platform alone must
    # not clear the arm64 image for publishing).
    engine = ctx.engine
    ref = f"{ctx.repository}:{spec.tag}"
    images: list[tuple[str, str | None]] = [("", None)]
    index_id = ""
    if spec.tag in wanted:
        plan = plan_for(ctx, [spec], {spec.tag: wanted[spec.tag]})
        images = list(index_parts(plan, plan.images).items())
        missing = [image for _, image in images if engine.image_id(image) is None]
        if missing:
            raise InputError.one(f"--tag {spec.tag}", f"{missing[0]} is not built",
                                 f"build it first: python3 build.py --tag {spec.tag} "
                                 f"--platform {ctx.opts.platform}")
    elif len(spec.platforms) > 1 and not engine.multi_platform():
        parts = built_index_parts(ctx, spec)
        if parts and engine.image_id(ref) == engine.image_id(index_ref(parts)):
            images, index_id = list(parts.items()), engine.image_id(ref) or ""
    results = []
    for platform, image in images:
        say(f"testing {ref}{' on ' + platform if platform else ''} ({', '.join(spec.tests)})")
        res = run_suites(engine, ctx.matrix, spec, ref, ctx.state_dir(), image=image, say=say)
        say(res.output_tail if not res.passed else f"  {counts(res.counts)} in {res.seconds:.1f} s")
        results.append(res)
    if index_id:  # the index's own record: passed when every platform passed
        save_record(ctx.state_dir(), combine(results, index_id))
    return results


def built_index_parts(ctx: RunContext, spec: ImageSpec) -> dict[str, Any]:
    """Platform -> final-stage image of each of ``spec``'s platforms, as a build on the
    engine makes them ({} when one of them is not in the engine)."""
    plan = plan_for(ctx, [spec], {spec.tag: spec.platforms})
    parts = index_parts(plan, plan.images)
    return parts if all(ctx.engine.image_id(image) for image in parts.values()) else {}
