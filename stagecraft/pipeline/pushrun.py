"""``push`` (and ``build --push``): gate the chosen images on their test records, push
them tags first, aliases once every tag is verified, then sign what was pushed; and
``verify-index``, which checks a pushed multi-platform tag by digest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import signing, tagrecovery, tools
from ..errors import EXIT_FAILED, EXIT_OK, InputError, Problem
from ..expand import ImageSpec
from ..indexcheck import IndexMismatch, sha256, skopeo_runner, verify_index
from ..publish import EngineDaemon, gate, publish, remote_repository, resolve_registry
from ..retry import RetryPolicy
from ..runmanifest import RunManifest
from . import signrun
from .context import RunContext
from .output import emit_json, say


def push_tested(ctx: RunContext) -> int:
    """``push``: exit 0 when every chosen image was pushed and verified, 1 when one was
    not. Raises ``InputError`` for a bad registry or an image refused (nothing pushed)."""
    ctx.load()
    chosen = ctx.select(default_all=False)
    ctx.state_dir(create=False)
    resolve_registry(ctx.opts.registry, ctx.matrix.registry)  # before the engine is asked anything
    run = push(ctx, chosen)
    if ctx.opts.json:
        emit_json(run.to_json())
    else:
        for img in run.images:
            for ref in [img.push, *img.aliases]:
                if ref.status == "pushed":
                    print(f"{ref.ref}@{ref.digest}")
    return EXIT_OK if run.ok else EXIT_FAILED


def push(ctx: RunContext, chosen: list[ImageSpec]) -> RunManifest:
    """Gate, push and verify ``chosen``, then sign them (``--sign-key``); returns the run
    manifest. Raises ``InputError`` when an image is refused (nothing pushed); Ctrl-C
    during the push ends the run with status 130 and says what stays."""
    registry, remote = remote_repository(resolve_registry(ctx.opts.registry, ctx.matrix.registry),
                                         ctx.repository)
    daemon = EngineDaemon(ctx.engine)
    state = ctx.state_dir(create=False)
    key = signing.key_path(ctx.opts.sign_key)  # its file: checked by argcheck
    if state.is_dir():  # a run killed inside its tag phase: its names put back first
        tagrecovery.recover_now(ctx.engine, state, ctx.engine.identity(), say)
    candidates = gate(daemon, chosen, ctx.repository, state)  # refuses before anything is written
    ctx.state_dir()
    kit: dict[str, str] = {}
    if key is not None:  # decrypted before anything is pushed (cosign fetched first)
        kit = tools.ensure(state, say)
        _check_records(kit, key, candidates)
    say(f"stagecraft: pushing {len(candidates)} image(s) to {registry}/{remote} "
        "(tags first, aliases after every tag is verified)")
    try:
        run = publish(daemon, candidates, registry, remote, state, say,
                      RetryPolicy(attempts=ctx.opts.retries + 1))
    except KeyboardInterrupt:
        journal = ctx.journal
        local = f"; locally, {journal.summary()}" if journal.state == "done" else ""
        say("interrupted: layers already uploaded stay in the registry and no alias was "
            f"moved; run push again to resume{local}")
        raise SystemExit(130) from None
    _show(run)
    if key is not None:
        signrun.sign_run(ctx, run, kit, key, chosen, daemon.insecure(registry))
    else:
        say("not signed: no --sign-key (or STAGECRAFT_COSIGN_KEY), so no SBOM, provenance or "
            "test record attached or attested; `build.py verify` will refuse these digests")
    refs = [ref for img in run.images for ref in [img.push, *img.aliases]]
    missed = [ref for ref in refs if ref.status != "pushed"]
    if run.error:
        say(f"failed: {run.error}")
    elif missed:  # the last line says it (the signing note above does not)
        why = next((r for r in missed if r.error), missed[0])
        say(f"failed: {len(missed)} of {len(refs)} reference(s) not pushed ({why.ref}: "
            f"{(why.error or why.status)[:200]}); what was uploaded stays in the registry, "
            "no alias moved ahead of its tag: run push again to resume")
    return run


def _check_records(kit: dict[str, str], key: Path, candidates: list[Any]) -> None:
    pub = signing.public_key(kit["cosign"], key)
    problems = [f"--tag {c.spec.tag}: refused: {why}" for c in candidates
                if (why := signing.check_record(kit["cosign"], pub, Path(c.test.record)))]
    if problems:
        raise InputError([Problem(p.split(": ", 1)[0], p.split(": ", 1)[1],
                                  "rerun: python3 build.py test --tag TAG with the key set")
                          for p in problems])


def _show(run: RunManifest) -> None:
    say(f"\n{'reference':<56} {'digest':<20} {'in registry':>11}  test record")
    for img in run.images:
        for ref in [img.push, *img.aliases]:
            pushed = ref.status == "pushed"
            size = f"{img.size / 1e6:>8.0f} MB" if pushed else f"{'-':>11}"
            say(f"{ref.ref:<56} {ref.digest[:19] if pushed else ref.status.upper():<20} {size}"
                f"  {img.test.sha256[7:19]} {img.test.counts}")
    say(f"{sum(i.status == 'pushed' for i in run.images)}/{len(run.images)} image(s) pushed and "
        f"verified in {run.seconds:.1f} s; run manifest {run.path}")


def verify_pushed_index(ctx: RunContext) -> int:
    """``verify-index``: fetch ``REGISTRY/REPOSITORY:TAG`` with skopeo, check it is an
    index holding exactly the platforms its group declares, each manifest by digest
    (``indexcheck``); print ``REF@DIGEST`` and each platform's digest. CI's merge job runs
    it before moving aliases. Exit 1 when the registry disagrees; raises ``InputError``
    for bad input."""
    ctx.load()
    chosen = ctx.select(default_all=False)
    if len(chosen) != 1 or len(chosen[0].platforms) < 2:
        raise InputError.one("verify-index", "takes one tag built for several platforms",
                             "pass --tag TAG of a group with platforms: [...]")
    spec = chosen[0]
    repo = "/".join(remote_repository(resolve_registry(ctx.opts.registry, ctx.matrix.registry),
                                      ctx.repository))
    name = ctx.opts.tag[0] if ctx.opts.tag and ctx.opts.tag[0] in spec.names else spec.tag
    run = skopeo_runner(tls_verify=not ctx.opts.insecure)
    try:
        digest = sha256(run(["--raw", f"docker://{repo}:{name}"]))
        found = verify_index(repo, digest, spec.platforms, run)
    except IndexMismatch as exc:
        say(f"error: {repo}:{name}: {exc}")
        return EXIT_FAILED
    if ctx.opts.json:
        emit_json({"ref": f"{repo}:{name}", "digest": digest,
                   "platforms": {p.platform: p.digest for p in found}})
    else:
        print(f"{repo}@{digest}")
        for p in found:
            say(f"  {p.platform} {p.digest} verified")
    return EXIT_OK
