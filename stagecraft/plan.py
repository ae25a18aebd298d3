"""The stage graph of a set of images, each stage identified by a content key. Pure.

A stage's key is the SHA-256 of everything that decides its image: its name, its parent's
identity (the parent stage's key, or the base image's identity), its Dockerfile text
(which names the parent image by key) and the bytes, paths and modes of the files it
copies. Same key, same image: a key is built once, and a key already in the engine is
not built again. On top of each image's last stage sits a small ``label`` node that
applies the tag's own labels (version, revision, created), so every real stage is shared
by all tags that have it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .bases import BaseImage
from .errors import InputError
from .expand import ImageSpec
from .model import Matrix
from .render import (
    RenderedStage,
    final_labels,
    label_instruction,
    render_stages,
    stage_dockerfile,
    tag_dockerfile,
)

KEY_VERSION = "stagecraft-stage-key-v1"
STAGE_REPOSITORY = "stagecraft-stage"
LABEL_STAGE = "label"
# Never copied into an image, wherever they sit under a copied path.
EXCLUDED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class CopiedFile:
    """A file of the build context: ``path`` relative to the project root, its mode
    bits and the SHA-256 of its bytes (hex)."""

    path: str
    mode: int
    sha256: str


@dataclass(frozen=True)
class StageNode:
    """One stage to build: ``key`` (64 hex), its ``dockerfile`` (FROM line included),
    the ``files`` of its build context, the ``parent_key`` (None: on the base image),
    ``tags``, the canonical tags of the images that contain it, and ``line``, what the
    stage is for whatever its text (``stage_line``; empty for label stages)."""

    key: str
    stage: str
    dockerfile: str
    files: tuple[CopiedFile, ...]
    parent_key: str | None
    base: BaseImage
    tags: tuple[str, ...] = field(default=())
    line: str = ""

    @property
    def image_ref(self) -> str:
        """The local image name of this stage: ``stagecraft-stage/<stage>:<key[:24]>``."""
        return stage_ref(self.stage, self.key)


@dataclass(frozen=True)
class ImagePlan:
    """One image on one platform: its spec, the keys of its chain (base first, the label
    node last), the labels its label node applies, and the OCI ``platform`` it is built
    for (``linux/arm64``). A tag built for several platforms has one ImagePlan each."""

    spec: ImageSpec
    keys: tuple[str, ...]
    labels: dict[str, str]
    platform: str = ""

    @property
    def final_key(self) -> str:
        """Key of the node whose image receives the tag and aliases."""
        return self.keys[-1]


@dataclass(frozen=True)
class Plan:
    """Nodes in build order (every parent before its children) and the images."""

    nodes: dict[str, StageNode]
    images: tuple[ImagePlan, ...]
    bases: tuple[BaseImage, ...]


def stage_ref(stage: str, key: str) -> str:
    """Local image reference of a stage with content key ``key``."""
    return f"{STAGE_REPOSITORY}/{stage}:{key[:24]}"


def hash_files(root: Path, paths: tuple[str, ...]) -> tuple[CopiedFile, ...]:
    """Every file under the copied ``paths`` (relative to ``root``), sorted, with mode and
    SHA-256; caches and bytecode are skipped. Raises ``InputError`` for a missing path."""
    out: list[CopiedFile] = []
    for rel in paths:
        top = root / rel
        if not top.exists():
            raise InputError.one(rel, "copied path does not exist", "fix stages.*.copies")
        walk = [top] if top.is_file() else sorted(
            p for p in top.rglob("*")
            if p.is_file() and not (set(p.relative_to(root).parts) & EXCLUDED_NAMES)
            and not p.name.endswith(EXCLUDED_SUFFIXES))
        for p in walk:
            if p.is_symlink():  # COPY would copy the link itself; never copy its target
                raise InputError.one(str(p.relative_to(root)), "a copied path holds a symbolic link",
                                     "replace it with the file it points to")
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            mode = stat.S_IMODE(os.stat(p).st_mode) & 0o755
            out.append(CopiedFile(str(p.relative_to(root)), mode, digest))
    return tuple(sorted(out, key=lambda f: f.path))


def stage_key(stage: str, parent_identity: str, dockerfile: str,
              files: tuple[CopiedFile, ...]) -> str:
    """The content key (SHA-256 hex) of one stage from all of its inputs."""
    h = hashlib.sha256()
    for part in (KEY_VERSION, stage, parent_identity, dockerfile):
        h.update(part.encode())
        h.update(b"\0")
    for f in files:
        h.update(f"{f.path}\0{f.mode:o}\0{f.sha256}\0".encode())
    return h.hexdigest()


def stage_line(matrix: Matrix, spec: ImageSpec, index: int, platform: str = "") -> str:
    """What stage ``spec.chain[index]`` of ``spec`` is for, independent of its text: the
    stage's name, its base component, its platform and the component entries its stages
    up to it use (``runtime base=debian12 platform=linux/amd64
    framework=paddle-2.6.2-cpu``). Editing a template or a pin changes a stage's key but
    not its line, so a build cache exported under the line (``stagecraft.cache``) lets
    the next key reuse the steps that did not change."""
    parts = [spec.chain[index], f"base={spec.base['name']}"] + ([f"platform={platform}"] if platform else [])
    for name in spec.chain[:index + 1]:
        for table in matrix.stages[name].uses:
            comp = spec.components.get(table)
            parts.append(f"{table}={comp['name'] if comp else '-'}")
    return " ".join(dict.fromkeys(parts))


def make_plan(matrix: Matrix, specs: list[ImageSpec], bases: dict[str, BaseImage],
              revision: str, created: str, repository: str | None = None,
              platforms: dict[str, tuple[str, ...]] | None = None) -> Plan:
    """The stage graph for ``specs``, one chain per (image, platform).

    ``bases`` maps a base component name to the ``BaseImage`` its images build on, or
    ``(name, platform)`` to the base of one platform; ``platforms`` maps a tag to the
    platforms to build it for (default: one chain on its base's platform). The platform
    reaches every key through the base's identity (a bootstrapped base is made per
    Debian architecture; a pulled one names its platform), so each key is one
    (stage, platform). ``revision`` and ``created`` go into each tag's labels, with
    ``repository`` (default: the matrix's) in its title. Raises ``InputError`` from
    rendering.
    """
    nodes: dict[str, StageNode] = {}
    images: list[ImagePlan] = []
    file_cache: dict[tuple[str, ...], tuple[CopiedFile, ...]] = {}
    targets: list[tuple[ImageSpec, BaseImage]] = []
    for spec in specs:
        wanted = (platforms or {}).get(spec.tag)
        if wanted:
            targets += [(spec, bases[(spec.base["name"], p)]) for p in wanted]  # type: ignore[index]
        else:
            targets.append((spec, bases[spec.base["name"]]))
    for spec, base in targets:
        parent_key: str | None = None
        parent_identity = base.identity
        parent_ref = base.ref
        keys: list[str] = []
        for index, rs in enumerate(render_stages(matrix, spec, base.platform)):
            files = file_cache.setdefault(rs.copies, hash_files(matrix.root, rs.copies))
            dockerfile = stage_dockerfile(rs, parent_ref)
            key = stage_key(rs.name, parent_identity, dockerfile, files)
            node = nodes.get(key) or StageNode(key, rs.name, dockerfile, files, parent_key, base,
                                               line=stage_line(matrix, spec, index, base.platform))
            nodes[key] = _with_tag(node, spec.tag)
            keys.append(key)
            parent_key, parent_identity, parent_ref = key, key, stage_ref(rs.name, key)
        labels = final_labels(matrix, spec, revision, created, repository)
        label_stage = RenderedStage(LABEL_STAGE, label_instruction(labels), (), keys[-1])
        dockerfile = stage_dockerfile(label_stage, parent_ref)
        key = stage_key(LABEL_STAGE, parent_identity, dockerfile, ())
        nodes[key] = _with_tag(nodes.get(key) or StageNode(key, LABEL_STAGE, dockerfile, (),
                                                            parent_key, base), spec.tag)
        keys.append(key)
        images.append(ImagePlan(spec, tuple(keys), labels, base.platform))
    used_bases = tuple({b.identity: b for _, b in targets}.values())
    return Plan(nodes=nodes, images=tuple(images), bases=used_bases)


def up_to_stage(plan: Plan, stage: str) -> Plan:
    """The part of ``plan`` that builds each image's chain up to and including ``stage``,
    with no image to tag (``images`` empty). Raises ``InputError`` for an image whose
    chain lacks ``stage``."""
    keys: list[str] = []
    for img in plan.images:
        chain = list(img.spec.chain)
        if stage not in chain:
            raise InputError.one(f"--stage {stage}", f"{img.spec.tag} has no stage {stage!r} "
                                 f"(its chain: {' > '.join(chain)})", "pass one of its stages")
        keys += [k for k in img.keys[:chain.index(stage) + 1] if k not in keys]
    return Plan(nodes={k: n for k, n in plan.nodes.items() if k in keys}, images=(), bases=plan.bases)


def _with_tag(node: StageNode, tag: str) -> StageNode:
    if tag in node.tags:
        return node
    return StageNode(node.key, node.stage, node.dockerfile, node.files, node.parent_key,
                     node.base, node.tags + (tag,), node.line)


def full_dockerfile(matrix: Matrix, spec: ImageSpec, base: BaseImage,
                    revision: str, created: str) -> str:
    """The multi-stage Dockerfile of one tag, buildable by plain ``docker build``."""
    return tag_dockerfile(matrix, spec, render_stages(matrix, spec, base.platform), base.ref,
                          final_labels(matrix, spec, revision, created))
