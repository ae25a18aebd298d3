"""Is a tag bit-for-bit reproducible here? Every stage of its plan is built a second time
with no cache at all (``--no-cache``: every step runs again) on the same parent image, and
the two images are compared by digest; a bootstrapped base is bootstrapped and imported a
second time. Same parent and same stage give the same image at every step, so the whole
chain rebuilds to the same digest on any engine that passes (two runners agree).

Where two builds differ, the files that differ are listed (path and what differs:
content, mode, owner, time, or present in one only) from the two images' own layers
(``docker save``), with the config fields that differ; ``diffoscope``, where installed,
writes its full report of the two differing layers beside the list.

Needs an engine where ``Engine.reproducible()`` holds (BuildKit 0.13 through buildx with
the containerd image store: SOURCE_DATE_EPOCH dates the config and history, and the file
times the steps fix, ``steptimes``, are checked, or rewritten with ``rewrite-timestamp``;
BuildKit's docs/build-repro.md). I/O:
the engine and the state directory; the comparison of two file tables is pure
(``diff_tables``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .bases import bootstrap_rootfs
from .cabundle import SECRET_ID, CABundle
from .engine import Engine
from .errors import BuildError
from .plan import Plan
from .scratch import claimed_log
from .stagebuild import build_node_image, proxy_args

VERIFY_REPOSITORY = "stagecraft-verify"
SHOWN = 20  # differences listed in the report; the file beside it has them all


@dataclass
class StageCheck:
    """One stage (or base) built twice: ``first`` and ``second`` image ids (the manifest
    digest on the containerd image store), ``differences`` (``path: what`` lines, the
    first ``SHOWN``), ``details`` (the file with all of them, and diffoscope's report),
    ``log`` of the second build, ``seconds`` it took."""

    stage: str
    key: str
    platform: str
    first: str
    second: str = ""
    differences: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    error: str = ""

    @property
    def same(self) -> bool:
        """True when both builds gave one image."""
        return bool(self.first) and self.first == self.second and not self.error


@dataclass
class ReproReport:
    """Every check of a run, in build order, and the run's wall time in seconds."""

    checks: list[StageCheck] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every stage rebuilt to the same image."""
        return bool(self.checks) and all(c.same for c in self.checks)


def verify_plan(engine: Engine, plan: Plan, root: Path, state_dir: Path,
                say: Callable[[str], None], ca_bundle: CABundle | None = None) -> ReproReport:
    """Rebuild every base and stage of ``plan`` (already built: ``builder.build_plan``)
    with no cache and compare each with the image the plan's name holds. The second
    images are named ``stagecraft-verify/<stage>:<key>`` while compared, then the names
    are removed. Raises ``BuildError`` when a first image is missing."""
    start = time.monotonic()
    report = ReproReport()
    out = state_dir / "reproduce"
    out.mkdir(parents=True, exist_ok=True)
    secrets = {SECRET_ID: ca_bundle.path} if ca_bundle else {}
    made: list[str] = []

    def check_one(check: StageCheck, first_ref: str, ref: str, what: str,
                  second: Callable[[], str]) -> None:
        """Make the second image (named ``ref``) with ``second()``, then compare."""
        say(f"{check.stage}@{check.key[:12]} ({check.platform}): {what}")
        made.append(ref)  # before the build: a name left by an interrupted one goes too
        t0 = time.monotonic()
        try:
            check.second = second()
        except BuildError as exc:
            check.error = str(exc)
        check.seconds = time.monotonic() - t0
        _finish(engine, check, first_ref, ref, out, say)
        report.checks.append(check)

    try:
        for base in plan.bases:
            if base.source != "bootstrap":
                say(f"base {base.name}: pulled by digest ({base.ref}); not rebuilt")
                continue
            first = engine.image_id(base.ref)
            if not first:
                raise BuildError(f"base {base.ref} is not in the engine; build the tag first")
            check = StageCheck("base-image", base.identity.rsplit("@", 1)[-1], base.platform, first)
            ref = f"{VERIFY_REPOSITORY}/base-image:{check.key[:24]}"

            def bootstrap_again(base=base, ref=ref) -> str:
                with tempfile.TemporaryDirectory(prefix="stagecraft-rootfs-") as tmp:
                    tarball = bootstrap_rootfs(base, Path(tmp))
                    repo, tag = ref.rsplit(":", 1)
                    return engine.import_tarball(
                        tarball, repo, tag, changes=['CMD ["bash"]', "ENV LANG=C.UTF-8"],
                        platform=base.platform if base.foreign else "",
                        source_date_epoch=base.source_date_epoch)

            check_one(check, base.ref, ref, "debootstrap and import again", bootstrap_again)
        for key, node in plan.nodes.items():
            first = engine.image_id(node.image_ref)
            if not first:
                raise BuildError(f"{node.image_ref} is not in the engine; build the tag first")
            check = StageCheck(node.stage, key, node.base.platform, first)
            ref = f"{VERIFY_REPOSITORY}/{node.stage}:{key[:24]}"
            with claimed_log(out / f"{node.stage}-{key[:12]}.log") as log_path:
                check.log = str(log_path)
                check_one(check, node.image_ref, ref, "building again with no cache",
                          lambda node=node, ref=ref, log_path=log_path: build_node_image(
                              engine, node, root, log_path, secrets, proxy_args(),
                              ["--no-cache", "-t", ref]))
    finally:
        for ref in made:
            try:
                engine.untag(ref)
            except BuildError as exc:
                say(f"warning: {exc}")
    report.seconds = time.monotonic() - start
    return report


def _finish(engine: Engine, check: StageCheck, first_ref: str, second_ref: str, out: Path,
            say: Callable[[str], None]) -> None:
    name = f"{check.stage}@{check.key[:12]}"
    if check.error:
        say(f"  {name}: the second build failed: {check.error[:200]}")
        return
    if check.same:
        say(f"  {name}: same image {check.first[:19]} ({check.seconds:.1f} s)")
        return
    say(f"  {name}: DIFFERS: {check.first[:19]} and {check.second[:19]}; comparing their files")
    try:
        lines, details = compare_images(engine, first_ref, second_ref, out / f"{check.stage}-{check.key[:12]}")
    except (BuildError, OSError, tarfile.TarError, KeyError, ValueError) as exc:
        lines, details = [f"(the images could not be compared: {exc})"], []
    check.differences, check.details = lines[:SHOWN], details
    for line in check.differences:
        say(f"    {line}")
    if len(lines) > SHOWN:
        say(f"    ... {len(lines) - SHOWN} more in {details[0]}")


# One entry of a layer: (type, mode, uid, gid, mtime, size, link target, sha256 of content).
Entry = tuple[str, int, int, int, int, int, str, str]
_FIELDS = ("type", "mode", "uid", "gid", "mtime", "size", "link", "content")


def layer_table(layer: Path) -> dict[str, Entry]:
    """Every path of a layer tarball (any compression) with what a rebuild must keep."""
    table: dict[str, Entry] = {}
    with tarfile.open(layer, mode="r:*") as tf:
        for m in tf:
            digest = ""
            if m.isfile():
                h = hashlib.sha256()
                f = tf.extractfile(m)
                assert f is not None
                for chunk in iter(functools.partial(f.read, 1 << 20), b""):
                    h.update(chunk)
                digest = h.hexdigest()
            kind = ("file" if m.isfile() else "dir" if m.isdir() else "symlink" if m.issym()
                    else "hardlink" if m.islnk() else "other")
            table[m.name.removeprefix("./")] = (kind, m.mode, m.uid, m.gid, int(m.mtime),
                                                m.size, m.linkname, digest)
    return table


def diff_tables(first: dict[str, Entry], second: dict[str, Entry]) -> list[str]:
    """``path: what differs`` for every path whose entry differs between two layer
    tables, sorted by path (``only in the first/second build`` when absent from one)."""
    lines = []
    for path in sorted(set(first) | set(second)):
        a, b = first.get(path), second.get(path)
        if a == b:
            continue
        if a is None or b is None:
            lines.append(f"{path}: only in the {'second' if a is None else 'first'} build")
            continue
        what = [f"{n} {x!r} -> {y!r}" if n not in ("content",) else "content"
                for n, x, y in zip(_FIELDS, a, b, strict=True) if x != y]
        lines.append(f"{path}: {', '.join(what)}")
    return lines


def diff_configs(first: dict, second: dict) -> list[str]:
    """``config <field>: differs`` for each top-level field of two image configs (and of
    their ``config`` section) that differ."""
    lines = []
    for part, a, b in (("", first, second), ("config.", first.get("config") or {},
                                              second.get("config") or {})):
        for k in sorted(set(a) | set(b)):
            if k in ("config", "rootfs") and not part:
                continue
            if a.get(k) != b.get(k):
                lines.append(f"image config {part}{k}: differs")
    return lines


def _saved(engine: Engine, ref: str, into: Path) -> tuple[dict, list[Path]]:
    """``docker save`` of ``ref`` unpacked in ``into``: its config and its layer files."""
    into.mkdir(parents=True)
    archive = into / "image.tar"
    try:
        with archive.open("wb") as f:
            for chunk in engine.client.images.get(ref).save(named=False):
                f.write(chunk)
    except Exception as exc:  # docker SDK errors and transport errors alike
        raise BuildError(f"cannot save {ref}: {exc}") from None
    with tarfile.open(archive) as tf:
        tf.extractall(into, filter="data")
    archive.unlink()
    manifest = json.loads((into / "manifest.json").read_text())[0]
    config = json.loads((into / manifest["Config"]).read_text())
    return config, [into / layer for layer in manifest["Layers"]]


def compare_images(engine: Engine, first_ref: str, second_ref: str, stem: Path) -> tuple[list[str], list[str]]:
    """Where two images differ: config fields, then the files of each pair of layers
    whose diff ids differ. Returns ``(lines, detail files)``: the full list is written
    to ``<stem>.diff.txt``, diffoscope's report (when installed) to ``<stem>.diffoscope.txt``.
    Raises ``BuildError`` when an image cannot be saved."""
    with tempfile.TemporaryDirectory(prefix="stagecraft-compare-", dir=stem.parent) as tmp:
        ca, la = _saved(engine, first_ref, Path(tmp) / "first")
        cb, lb = _saved(engine, second_ref, Path(tmp) / "second")
        lines = diff_configs(ca, cb)
        ids_a = (ca.get("rootfs") or {}).get("diff_ids", [])
        ids_b = (cb.get("rootfs") or {}).get("diff_ids", [])
        if len(la) != len(lb):
            lines.append(f"layers: {len(la)} in the first build, {len(lb)} in the second")
        details = [str(stem.with_suffix(".diff.txt"))]
        for i, (a, b) in enumerate(zip(la, lb, strict=False)):  # counts differ: said above
            if i < len(ids_a) and i < len(ids_b) and ids_a[i] == ids_b[i]:
                continue
            lines += [f"layer {i + 1}: {line}" for line in diff_tables(layer_table(a), layer_table(b))]
            if shutil.which("diffoscope") and len(details) == 1:
                report = stem.with_suffix(".diffoscope.txt")
                with report.open("w") as f:
                    subprocess.run(["diffoscope", "--text", "-", str(a), str(b)], stdout=f,
                                   stderr=subprocess.STDOUT, timeout=900, check=False)
                details.append(str(report))
        if not lines:
            lines.append("the files and config are the same; the manifests differ (compression "
                         "or media types)")
    Path(details[0]).write_text("".join(f"{line}\n" for line in lines))
    return lines, details
