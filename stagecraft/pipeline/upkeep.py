"""The commands that look after an engine and the lock: ``prune`` (stage images and
local caches no target uses), ``freeze`` (a built image's pins), ``lock`` (matrix.lock)
and ``doctor`` (what the engine can do)."""

from __future__ import annotations

import re
from typing import Any

from .. import cache, containers, lockfile, prune, statefile
from ..cabundle import find_ca_bundle
from ..doctor import doctor_report, format_report
from ..errors import EXIT_FAILED, EXIT_OK, InputError
from ..platforms import host_platform
from ..resolve import update_lock
from ..summary import SIZE_KINDS
from .context import RunContext, clip
from .output import emit_json, human_size, say
from .planning import plan_for


def prune_unused(ctx: RunContext) -> int:
    """``prune``: list (default) or remove (``--yes``) the stage images and bootstrapped
    bases of this engine that no target of the current plan (every image of the matrix,
    every platform) references, with their sizes; never an image another name points at,
    never a name outside stagecraft's own repositories. Exit 1 when one could not be
    removed; raises ``InputError`` for a bad ``--keep`` or ``--cache``."""
    opts = ctx.opts
    if opts.keep < 0:
        raise InputError.one(f"--keep {opts.keep}", "must be 0 or more", "pass --keep 0 or more")
    local = cache.parse(opts.cache, "--cache") if opts.cache else None
    if local is not None and local.kind != "local":
        raise InputError.one(f"--cache {clip(opts.cache or '')}", "prune takes a local cache directory",
                             "a registry's tags are pruned by the registry (its garbage collector)")
    _, specs = ctx.load()
    plan = plan_for(ctx, specs, {s.tag: s.platforms or (host_platform(),) for s in specs})
    engine = ctx.engine
    decisions = prune.plan_prune(prune.owned_images(engine.client), prune.referenced(plan), opts.keep)
    entries = prune.local_cache_prune(local, plan, opts.keep) if local else []
    going = [d for d in decisions if d.remove]
    cache_going = [e for e in entries if e.remove]
    failed: list[tuple[Any, str]] = []
    freed: int | None = None
    # Containers stagecraft made whose run ended without removing them (SIGKILL, or an
    # engine that refused the removal): they would hold their images.
    left, left_failed = containers.sweep(engine.client, dry_run=not opts.yes)
    if opts.yes:
        before = prune.layers_size(engine.client) if going else 0
        failed = prune.remove(engine.client, going)
        prune.remove_cache_entries(cache_going)
        freed = before - prune.layers_size(engine.client) if going else 0
    kind = "compressed" if engine.containerd_store else "unpacked"
    if opts.json:
        emit_json({"removed" if opts.yes else "would_remove":
                   [{"ref": d.image.ref, "image_id": d.image.image_id, "size": d.image.size,
                     "created": d.image.created} for d in going],
                   "kept": [{"ref": d.image.ref, "why": d.why} for d in decisions if not d.remove],
                   "cache": [{"path": str(e.path), "remove": e.remove, "why": e.why, "size": e.size}
                             for e in entries],
                   "removed_containers" if opts.yes else "would_remove_containers": left,
                   "size_kind": kind, "freed": freed,
                   "failed": [{"ref": d.image.ref, "error": e} for d, e in failed]
                   + [{"container": n, "error": e} for n, e in left_failed]})
    else:
        _prune_lines(opts.yes, decisions, entries)
        for name in left:
            print(f"{'removed' if opts.yes else 'would remove':<12} container {name} (its run ended without removing it)")
    _prune_summary(opts.yes, decisions, cache_going if local else None, freed, kind)
    if left:
        say(f"{len(left)} container(s) of ended runs {'removed' if opts.yes else 'to remove'}")
    for d, error in failed:
        say(f"not removed: {d.image.ref}: {error}")
    for n, error in left_failed:
        say(f"not removed: container {n}: {error}")
    return EXIT_FAILED if failed or left_failed else EXIT_OK


def _prune_lines(yes: bool, decisions: list[Any], entries: list[Any]) -> None:
    verb = "removed" if yes else "would remove"
    for d in decisions:
        if d.remove:
            print(f"{verb:<12} {d.image.ref:<52} {human_size(d.image.size):>9}  {d.image.created[:19]}")
    for d in decisions:
        if not d.remove and d.why != "in the plan":
            print(f"{'kept':<12} {d.image.ref:<52} {human_size(d.image.size):>9}  {d.why}")
    for e in entries:
        if e.remove or e.why != "in the plan":
            print(f"{verb if e.remove else 'kept':<12} {str(e.path):<52} {human_size(e.size):>9}"
                  f"{'' if e.remove else '  ' + e.why}")


def _prune_summary(yes: bool, decisions: list[Any], cache_going: list[Any] | None,
                   freed: int | None, kind: str) -> None:
    going = [d for d in decisions if d.remove]
    say(f"{len(going)} image name(s) {'removed' if yes else 'to remove'}, "
        f"{len(decisions) - len(going)} kept"
        + (f" (the engine's layers shrank by {human_size(freed)})" if freed is not None else "")
        + (f"; {len(cache_going)} local cache entr{'y' if len(cache_going) == 1 else 'ies'} "
           f"({human_size(sum(e.size for e in cache_going))})" if cache_going is not None else "")
        + ("" if yes or not (going or cache_going) else "; dry run: pass --yes to remove them"))
    say(SIZE_KINDS[kind].replace("* size", "sizes") + "; each counts the layers it shares with "
        "other images, which stay while a kept image uses them")


def freeze(ctx: RunContext) -> int:
    """``freeze``: print what pip resolved in a built image's venv, as the framework's
    `constraints:` for matrix.yaml: pinning them makes the next build of that key install
    the same versions (its key changes once, then means one set of packages). Raises
    ``InputError`` for more than one tag or an image not built."""
    matrix, _ = ctx.load()
    chosen = ctx.select(default_all=False)
    if len(chosen) != 1:
        raise InputError.one("freeze", "freeze takes exactly one tag", "pass one TAG")
    spec = chosen[0]
    ref = f"{ctx.repository}:{spec.tag}"
    engine = ctx.engine
    if engine.image_id(ref) is None:
        raise InputError.one(f"--tag {spec.tag}", f"{ref} is not built",
                             f"build it first: python3 build.py --tag {spec.tag}")
    out = containers.run_once(engine.client, ref, ["/opt/venv/bin/pip", "freeze"], "freeze", name=ref,
                              environment={"STAGECRAFT_QUIET": "1"}).decode("utf-8", "replace")
    skip = {spec.framework["package"].lower()} | {
        re.split(r"[=<>!~ ]", r, maxsplit=1)[0].lower() for r in matrix.entrypoint.get("requirements", [])}
    for table in ("cuda", "accel"):  # NVIDIA's wheels: pinned by their stage, not the framework
        skip |= {p.lower() for p in ((spec.components.get(table) or {}).get("pypi") or {})}
    pins = sorted((ln.strip() for ln in out.splitlines() if "==" in ln), key=str.lower)
    pins = [p for p in pins if p.split("==")[0].lower().replace("_", "-") not in
            {x.replace("_", "-") for x in skip}]
    if ctx.opts.json:
        emit_json({"tag": spec.tag, "framework": spec.framework["name"], "constraints": pins})
    else:
        print(f"# components.framework.{spec.framework['name']}.constraints, from {ref}")
        print("constraints:")
        for pin in pins:
            print(f"  - {pin}")
    return EXIT_OK


def lock(ctx: RunContext) -> int:
    """``lock``: write (or ``--check``) the lock beside the matrix. Entries whose inputs
    did not change are kept; new or changed ones are resolved (apt and debootstrap against
    the Debian mirror, ``uv pip compile`` against the Python index). Raises
    ``InputError`` when the lock does not match the matrix (``--check``, or a lock of
    another matrix) or ``--upgrade`` names no locked package."""
    matrix, specs = ctx.load()
    path = lockfile.lock_path(matrix)
    want = lockfile.wanted(matrix, specs)
    if ctx.opts.check:
        current = lockfile.read(path)
        problems = lockfile.check(current, matrix, want, path.name)
        if problems:
            raise InputError(problems)
        n = len(current.debian) + len(current.python)
        print(f"{path.name}: in step with {matrix.path.name} ({n} entries)")
        return EXIT_OK
    old = lockfile.read(path) if path.exists() else None
    if old is not None and old.matrix != lockfile.matrix_identity(matrix):
        raise InputError(lockfile.check(old, matrix, want, path.name))
    upgrade = list(ctx.opts.upgrade) if ctx.opts.upgrade is not None else None
    if upgrade:
        if old is None:
            raise InputError.one("--upgrade", f"no {path.name} to upgrade",
                                 "run `python3 build.py lock` first")
        unknown = lockfile.unknown_packages(old, upgrade)
        if unknown:
            raise InputError.one(f"--upgrade {clip(unknown[0])}", f"no package of that name in {path.name}",
                                 "name a locked Debian package or Python distribution")
    new = update_lock(lockfile.matrix_identity(matrix), want, old, upgrade, say)
    text = lockfile.dumps(new)
    changed = lockfile.changes(old, new)
    if old is None or text != lockfile.dumps(old):
        statefile.write_atomic(path, text)  # whole or not at all, never over a non-file
    for line in changed:
        print(line)
    say(f"wrote {path.name}: {len(new.debian)} Debian and {len(new.python)} Python entries, "
        f"{len(changed)} package change(s)")
    return EXIT_OK


def doctor(ctx: RunContext) -> int:
    """``doctor``: the engine, its BuildKit version, the build path and each capability
    (cache export and import, multi-platform, OCI output, attestations), with the reason
    when one is missing."""
    engine = ctx.engine
    bundle = find_ca_bundle(ctx.opts.ca_bundle, ctx.opts.no_ca_bundle)
    report = doctor_report(engine.facts(), f"{bundle.path} ({bundle.origin})" if bundle else "none")
    why = engine.reproducible()
    report["reproducible"] = "yes (rewrite-timestamp exports)" if not why else f"impossible here: {why}"
    if ctx.opts.json:
        emit_json(report)
    else:
        print("\n".join(format_report(report)))
        print(f"{'reproducible':<12} {report['reproducible']}")
    return EXIT_OK
