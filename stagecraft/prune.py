"""``build.py prune``: what stagecraft made that the current plan no longer needs.

Stage images (``stagecraft-stage/<stage>:<key24>``) and bootstrapped bases
(``stagecraft-base/...``) are named by content key, so every template edit, pin or
revision leaves the previous key behind (the CUDA stage alone is 3 GB). ``plan_prune``
decides, purely, which of them go: those no target of the current plan references,
less the ``keep`` most recent previous keys of each stage, less any image that a name
stagecraft does not own points at (a final tag or alias, or a user's own tag: an image
that is someone's is never removed). Images of other repositories are never looked at.
``local_cache_prune`` does the same for the scope directories of a local build cache
(``stagecraft.cache``): key scopes outside the plan, except those a current line links
to (the previous key a changed stage reuses its steps from), and saved bases no base of
the plan uses.

The I/O (listing images, removing them by name) is ``owned_images`` and ``remove``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .bases import BASE_REPOSITORY
from .cache import CacheSpec
from .plan import STAGE_REPOSITORY, Plan, stage_ref

if TYPE_CHECKING:
    import docker

OWNED = (f"{STAGE_REPOSITORY}/", f"{BASE_REPOSITORY}/")


@dataclass(frozen=True)
class OwnedImage:
    """One name stagecraft owns: ``ref``, the ``image_id`` it points at, when that image
    was ``created`` (RFC 3339, sorts as time), its ``size`` in bytes as the engine
    reports it, and ``others``: the names outside stagecraft's repositories that point at
    the same image."""

    ref: str
    image_id: str
    created: str
    size: int
    others: tuple[str, ...] = ()

    @property
    def repository(self) -> str:
        """``stagecraft-stage/runtime``: the stage (or base) this name belongs to."""
        return self.ref.rsplit(":", 1)[0]


@dataclass(frozen=True)
class Decision:
    """What prune does with one name: ``remove`` True or False, and ``why``."""

    image: OwnedImage
    remove: bool
    why: str


def owned(ref: str) -> bool:
    """True for a name in one of stagecraft's own repositories."""
    return ref.startswith(OWNED)


def referenced(plan: Plan) -> set[str]:
    """Every name the plan's targets use: each stage's key and each base."""
    return {stage_ref(n.stage, n.key) for n in plan.nodes.values()} | {b.ref for b in plan.bases}


def plan_prune(images: Iterable[OwnedImage], keep_refs: set[str], keep: int = 0) -> list[Decision]:
    """A decision for every owned name in ``images``: kept when ``keep_refs`` (the plan's
    names) has it, when another name points at its image, or when it is one of the
    ``keep`` most recent (by creation) previous names of its repository; removed
    otherwise. Ordered by repository, newest first."""
    out: list[Decision] = []
    by_repo: dict[str, list[OwnedImage]] = {}
    for img in images:
        by_repo.setdefault(img.repository, []).append(img)
    for repo in sorted(by_repo):
        previous = 0
        for img in sorted(by_repo[repo], key=lambda i: (i.created, i.ref), reverse=True):
            if img.ref in keep_refs:
                out.append(Decision(img, False, "in the plan"))
            elif img.others:
                out.append(Decision(img, False, f"{img.others[0]} points at it"))
            elif previous < keep:
                previous += 1
                out.append(Decision(img, False, f"--keep {keep}: previous key {previous} of {repo}"))
            else:
                out.append(Decision(img, True, "no target of the plan uses it"))
    return out


def owned_images(client: docker.DockerClient) -> list[OwnedImage]:
    """Every name in stagecraft's repositories on the engine of ``client``, with the
    other names of its image."""
    out: list[OwnedImage] = []
    for image in client.images.list():
        names = list(image.tags)
        others = tuple(sorted(n for n in names if not owned(n)))
        for ref in names:
            if owned(ref):
                out.append(OwnedImage(ref, image.id, str(image.attrs.get("Created", "")),
                                      int(image.attrs.get("Size") or 0), others))
    return out


def layers_size(client: docker.DockerClient) -> int:
    """Bytes of all image layers the engine holds (``docker system df``: LayersSize)."""
    return int(client.df().get("LayersSize") or 0)


def remove(client: docker.DockerClient, decisions: Iterable[Decision]) -> list[tuple[Decision, str]]:
    """Remove every name decided so, by name (an image still named otherwise stays);
    returns ``(decision, error)`` for those the engine refused (a container using it)."""
    import docker.errors

    failed: list[tuple[Decision, str]] = []
    for d in decisions:
        if not d.remove:
            continue
        assert owned(d.image.ref), d.image.ref  # never a name stagecraft does not own
        try:
            client.images.remove(d.image.ref)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            failed.append((d, str(exc.explanation or exc)[:200]))
    return failed


@dataclass(frozen=True)
class CacheEntry:
    """One entry of a local cache directory: ``path``, ``remove`` and ``why``, its
    ``size`` in bytes (files under it) and ``mtime`` (seconds)."""

    path: Path
    remove: bool
    why: str
    size: int
    mtime: float


def local_cache_prune(spec: CacheSpec, plan: Plan, keep: int = 0) -> list[CacheEntry]:
    """Decisions for the entries of the local cache ``spec``: key scopes of the plan and
    the scopes its lines link to are kept, so are saved bases of the plan's bases and
    the ``keep`` most recent other scopes of each stage; other key scopes and saved
    bases go. Line links are kept (they are rewritten by the next build); anything
    else in the directory is not stagecraft's and is left alone."""
    root = Path(spec.location)
    if not root.is_dir():
        return []
    keys = {Path(spec.scope(n.stage, n.key)).name for n in plan.nodes.values()}
    lines = {Path(spec.line_scope(n.stage, n.line)).name for n in plan.nodes.values() if n.line}
    linked = {p.resolve().name for p in root.iterdir() if p.is_symlink() and p.name in lines}
    bases = {Path(spec.base_location(b)).name for b in plan.bases}
    stages = {n.stage for n in plan.nodes.values()}
    entries: list[CacheEntry] = []
    previous: dict[str, int] = {}
    candidates = [p for p in root.iterdir() if not p.is_symlink()]
    for p in sorted(candidates, key=lambda p: p.stat().st_mtime, reverse=True):
        name = p.name
        stage, _, rest = name.rpartition("-")
        is_scope = p.is_dir() and len(rest) == 24 and all(c in "0123456789abcdef" for c in rest)
        is_base = p.is_file() and name.startswith("base-") and name.endswith(".tar")
        if not (is_scope or is_base):
            continue  # not a cache entry stagecraft writes
        size = p.stat().st_size if is_base else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        mtime = p.stat().st_mtime
        if name in keys or name in bases:
            entries.append(CacheEntry(p, False, "in the plan", size, mtime))
        elif name in linked:
            entries.append(CacheEntry(p, False, "the previous key of a stage's line", size, mtime))
        elif is_scope and previous.get(stage, 0) < keep and stage in stages:
            previous[stage] = previous.get(stage, 0) + 1
            entries.append(CacheEntry(p, False, f"--keep {keep}: previous key {previous[stage]} of {stage}",
                                      size, mtime))
        else:
            entries.append(CacheEntry(p, True, "no target of the plan uses it", size, mtime))
    return entries


def remove_cache_entries(entries: Iterable[CacheEntry]) -> None:
    """Delete the entries decided so."""
    for e in entries:
        if not e.remove:
            continue
        if e.path.is_dir():
            shutil.rmtree(e.path)
        else:
            e.path.unlink(missing_ok=True)
