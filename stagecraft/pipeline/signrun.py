"""Signing what ``push`` pushed (SBOM attached, digest signed, SBOM, provenance and test
record attested, with cosign and oras) and ``verify``, which checks all of that for a
pushed reference with the public key."""

from __future__ import annotations

import os
from pathlib import Path

from .. import signing, tools
from ..builder import PROVENANCE_DIR
from ..errors import EXIT_FAILED, EXIT_OK, BuildError
from ..expand import ImageSpec
from ..registry import loopback
from ..runmanifest import RunManifest
from ..testing import sbom_path, write_sbom
from .context import RunContext
from .output import say


def sign_run(ctx: RunContext, run: RunManifest, kit: dict[str, str], key: Path,
             chosen: list[ImageSpec], insecure: bool) -> None:
    """Attach the SBOM, sign and attest every pushed digest of ``run`` with the cosign
    private ``key`` (``kit``: tool name -> path, from ``tools.ensure``); a failure marks
    the run failed (exit 1) and the next digest is still signed."""
    state, engine = ctx.state_dir(), ctx.engine
    specs = {s.tag: s for s in chosen}
    for img in run.images:
        if img.status not in ("pushed", "partial"):
            continue
        at = f"{img.ref.rsplit(':', 1)[0]}@{img.digest}"
        sbom = sbom_path(state, img.image_id)
        if not sbom.is_file():
            sbom = write_sbom(engine, ctx.matrix, specs[img.tag], img.ref, img.image_id, state)
        provenance = state / PROVENANCE_DIR / f"{img.digest.removeprefix('sha256:')}.intoto.json"
        if not provenance.is_file() and engine.rewrites_timestamps:
            say(f"  {at[:80]}: no provenance for this digest in {provenance.parent} (it is kept "
                "per image manifest, so an index of several platforms, an image built with another "
                "--state-dir or with proxy settings has none there); pushed without one")
        try:
            done = signing.sign_pushed(kit, key, at, sbom, Path(img.test.record), insecure,
                                       provenance if provenance.is_file() else None)
        except BuildError as exc:
            run.ok, run.error = False, str(exc)
            say(f"  FAILED: {exc}")
            continue
        say(f"  {at[:80]}: {', '.join(done)}")


def verify(ctx: RunContext) -> int:
    """``verify``: check the digest REF names (``HOST/REPO:TAG`` or
    ``HOST/REPO@sha256:...``) with the public key: exit 0 when signature, SBOM and test
    record all hold, 1 when any fails. The tools live in ``--state-dir`` (default
    ``.stagecraft`` in the current directory: no matrix is read)."""
    opts = ctx.opts
    key = opts.key or os.environ["STAGECRAFT_COSIGN_PUB"]  # one of them: checked by argcheck
    state = Path(opts.state_dir) if opts.state_dir else Path(".stagecraft")
    kit = tools.ensure(state, say)
    host = opts.ref.split("/", 1)[0]
    insecure = loopback(host) or os.environ.get("STAGECRAFT_INSECURE_REGISTRY") == "1"
    v = signing.verify(kit, opts.ref, Path(key), insecure)
    for name, ok, detail in v.checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name:<9} {detail}")
    print(f"{'verified' if v.ok else 'NOT VERIFIED'}: {opts.ref}" + (f" ({v.digest})" if v.digest else ""))
    return EXIT_OK if v.ok else EXIT_FAILED
