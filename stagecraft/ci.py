"""What CI and remote BuildKit builders need from a plan: a job matrix and a bake file. Pure.

``ci_matrix(plan)`` gives one entry per tag, for a GitHub Actions strategy matrix
(``python build.py matrix --format github`` prints ``{"include": [...]}``): the tag, its
aliases, the bake target that builds it, and the stage keys of its chain with the cache
scope of each (``<stage>-<key24>``, the scopes ``stagecraft.cache`` uses), so matrix cells
that share a stage share its cache.

``bake_file(plan, ...)`` gives a ``docker-bake.json`` (https://docs.docker.com/build/bake/
reference/): each stage of the plan is a target whose ``dockerfile-inline`` is the stage's
own Dockerfile; a stage's ``FROM <parent image>`` is bound to the parent's target through
``contexts`` (``"<parent image ref>": "target:<parent target>"``, buildx named contexts),
so one ``docker buildx bake`` solves the whole graph and builds a shared stage once. The
label targets (one per tag) carry the final tags; the ``default`` group holds them all.
Each stage reads and writes the cache scope of its key; stages that mount the pip CA
bundle get the ``pip-ca`` secret from ``${PIP_CA_BUNDLE}`` (a bake variable). Bake reads
JSON strings as HCL templates, so the Dockerfile text is escaped (``hcl_literal``).
Run ``docker buildx bake -f docker-bake.json [TARGET]`` from the project root: the
build context of every target is ``.``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .cabundle import SECRET_ID
from .cache import EXPORT_OPTS, CacheSpec
from .errors import InputError
from .plan import LABEL_STAGE, Plan
from .render import index_dockerfile

TARGET_RE = re.compile(r"[^A-Za-z0-9_-]")
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def stage_target(stage: str, key: str) -> str:
    """Bake target name of a stage: ``<stage>-<key[:12]>``."""
    return f"{stage}-{key[:12]}"


def image_target(tag: str) -> str:
    """Bake target name of a tag's label stage (bake names allow ``[A-Za-z0-9_-]``):
    ``image-2_6_2-cpu`` for ``2.6.2-cpu``."""
    return "image-" + TARGET_RE.sub("_", tag)


def hcl_literal(text: str) -> str:
    """``text`` as a literal in a bake file: bake evaluates JSON strings as HCL templates,
    so ``${`` and ``%{`` (shell parameter expansions in RUN lines) are escaped as
    ``$${`` and ``%%{``."""
    return text.replace("${", "$${").replace("%{", "%%{")


def cache_scope(stage: str, key: str) -> str:
    """The cache scope of one stage key: ``<stage>-<key[:24]>`` (as ``stagecraft.cache``)."""
    return f"{stage}-{key[:24]}"


@dataclass(frozen=True)
class BakeCache:
    """Cache backend of a bake file: ``gha`` (GitHub Actions cache service), ``local``
    (a directory) or ``registry`` (a repository); ``location`` unused for gha."""

    kind: str
    location: str = ""

    def entries(self, stage: str, key: str) -> tuple[str, str]:
        """``(cache-from, cache-to)`` entries of one stage. Exports carry
        ``ignore-error=true``, as ``build.py``'s do: a cache that cannot be written (a
        registry that does not answer, or answers 500 to two targets uploading the same
        blob at once, docker/buildx#4057) costs the cache, never the image."""
        scope = cache_scope(stage, key)
        if self.kind == "gha":
            return f"type=gha,scope={scope}", f"type=gha,scope={scope}{EXPORT_OPTS}"
        loc = CacheSpec(self.kind, self.location).scope(stage, key)
        if self.kind == "local":
            return f"type=local,src={loc}", f"type=local,dest={loc}{EXPORT_OPTS}"
        return f"type=registry,ref={loc}", f"type=registry,ref={loc}{EXPORT_OPTS}"


def parse_bake_cache(text: str | None) -> BakeCache | None:
    """``type=gha``, ``type=local,dir=PATH`` or ``type=registry,ref=REPO``; None for none.
    Raises ``InputError`` for another form."""
    from .cache import parse

    if not text:
        return None
    if text.strip() == "type=gha":
        return BakeCache("gha")
    spec = parse(text, "--cache")
    return BakeCache(spec.kind, spec.location)


# GitHub-hosted runners by platform: each platform builds natively where one exists
# (https://docs.github.com/en/actions/using-github-hosted-runners: ubuntu-24.04-arm).
RUNNERS = {"linux/amd64": "ubuntu-latest", "linux/arm64": "ubuntu-24.04-arm"}


def _multi(plan: Plan) -> set[str]:
    """Tags the plan builds for more than one platform (an OCI image index each)."""
    seen: dict[str, int] = {}
    for img in plan.images:
        seen[img.spec.tag] = seen.get(img.spec.tag, 0) + 1
    return {tag for tag, n in seen.items() if n > 1}


def platform_target(tag: str, platform: str) -> str:
    """Bake target of one platform's image of a multi-platform tag:
    ``image-3_2_2-cpu-linux-arm64``."""
    return f"{image_target(tag)}-{TARGET_RE.sub('-', platform)}"


def ci_matrix(plan: Plan) -> list[dict[str, Any]]:
    """One entry per tag and platform: ``tag``, ``platform``, ``runner`` (a native runner
    for it, ``RUNNERS``), ``index`` (True when the tag is an index of several platforms),
    ``aliases`` (list), ``target`` (bake target), ``stages`` (list of ``{"stage", "key",
    "scope"}``, base first, label last)."""
    multi = _multi(plan)
    out = []
    for img in plan.images:
        stages = [{"stage": plan.nodes[k].stage, "key": k,
                   "scope": cache_scope(plan.nodes[k].stage, k)} for k in img.keys]
        index = img.spec.tag in multi
        out.append({"tag": img.spec.tag, "platform": img.platform,
                    "runner": RUNNERS.get(img.platform, RUNNERS["linux/amd64"]), "index": index,
                    "aliases": list(img.spec.aliases),
                    "target": platform_target(img.spec.tag, img.platform) if index
                    else image_target(img.spec.tag), "stages": stages})
    return out


def github_matrix(plan: Plan) -> dict[str, Any]:
    """The strategy matrix object for GitHub Actions: ``{"include": [entry, ...]}``,
    entries compact (``aliases`` and ``keys`` as space-separated strings, ``index`` the
    string ``"true"`` or ``""``)."""
    return {"include": [{"tag": e["tag"], "target": e["target"], "platform": e["platform"],
                         "runner": e["runner"], "index": "true" if e["index"] else "",
                         "aliases": " ".join(e["aliases"]),
                         "keys": " ".join(s["scope"] for s in e["stages"])}
                        for e in ci_matrix(plan)]}


def github_indexes(plan: Plan) -> dict[str, Any]:
    """The merge jobs' strategy matrix: one entry per multi-platform tag, ``tag``,
    ``aliases`` and ``platforms`` (space-separated), ``artifacts`` (the digest artifacts'
    name prefix its per-platform cells upload). ``{"include": []}`` when there is none."""
    multi = _multi(plan)
    out: dict[str, dict[str, Any]] = {}
    for img in plan.images:
        if img.spec.tag in multi:
            e = out.setdefault(img.spec.tag, {"tag": img.spec.tag,
                                              "aliases": " ".join(img.spec.aliases),
                                              "platforms": [],
                                              "artifacts": f"digest-{image_target(img.spec.tag)}-"})
            e["platforms"].append(img.platform)
    return {"include": [{**e, "platforms": " ".join(e["platforms"])} for e in out.values()]}


def bake_file(plan: Plan, repository: str, registry: str = "",
              cache: BakeCache | None = None) -> dict[str, Any]:
    """The bake file of ``plan`` (a JSON-ready dict). Tags are
    ``[<registry>/]<repository>:<name>`` for every tag and alias. Raises ``InputError``
    when a base is not pullable (a bootstrapped base exists only in one engine)."""
    for base in plan.bases:
        if base.source != "pull":
            raise InputError.one(f"base {base.name}", "the bake file needs bases pulled by "
                                 "digest (remote builders cannot see a local bootstrap)",
                                 "pass --base-source pull (components.base.*.pull)")
    prefix = f"{registry}/{repository}" if registry else repository
    targets: dict[str, dict[str, Any]] = {}
    multi = _multi(plan)
    label_of = {img.final_key: img for img in plan.images}
    for key, node in plan.nodes.items():
        t: dict[str, Any] = {"context": ".", "dockerfile-inline": hcl_literal(node.dockerfile),
                             "platforms": [node.base.platform]}
        if node.parent_key is not None:
            parent = plan.nodes[node.parent_key]
            t["contexts"] = {parent.image_ref: f"target:{stage_target(parent.stage, parent.key)}"}
        if node.base.source_date_epoch:  # the Dockerfile's ARG SOURCE_DATE_EPOCH
            t["args"] = {"SOURCE_DATE_EPOCH": str(node.base.source_date_epoch)}
        if f"id={SECRET_ID}" in node.dockerfile:
            t["secret"] = [f"id={SECRET_ID},src=${{PIP_CA_BUNDLE}}"]
        if cache is not None:
            cache_from, cache_to = cache.entries(node.stage, key)
            t["cache-from"], t["cache-to"] = [cache_from], [cache_to]
        img = label_of.get(key) if node.stage == LABEL_STAGE else None
        if img is None:
            targets[stage_target(node.stage, key)] = t
        elif img.spec.tag in multi:  # one platform of an index: untagged, the index target tags
            targets[platform_target(img.spec.tag, img.platform)] = t
        else:
            t["tags"] = [f"{prefix}:{name}" for name in img.spec.names]
            targets[image_target(img.spec.tag)] = t
    for tag in sorted(multi):
        imgs = [i for i in plan.images if i.spec.tag == tag]
        refs = {i.platform: plan.nodes[i.final_key].image_ref for i in imgs}
        targets[image_target(tag)] = {
            "context": ".", "dockerfile-inline": hcl_literal(index_dockerfile(refs)),
            "platforms": sorted(refs),
            "contexts": {plan.nodes[i.final_key].image_ref: f"target:{platform_target(tag, i.platform)}"
                         for i in imgs},
            "tags": [f"{prefix}:{name}" for name in imgs[0].spec.names]}
    return {
        "variable": {"PIP_CA_BUNDLE": {"default": DEFAULT_CA_BUNDLE}},
        "group": {"default": {"targets": list(dict.fromkeys(image_target(i.spec.tag)
                                                            for i in plan.images))}},
        "target": targets,
    }
