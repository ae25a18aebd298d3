"""Render stage templates into Dockerfile text. Pure: no Docker, no network.

Each stage template renders with ``base``, the components its stage ``uses``, ``stage``
(its name), ``image_json`` (the image manifest the entrypoint reads) and ``entrypoint``
(the matrix's entrypoint settings), under ``StrictUndefined``: a template that reads
anything else fails at render time with ``template:line``. Output is deterministic: the
same inputs give the same bytes.

A stage's text has no ``FROM`` line; the caller adds one: ``FROM <parent image>`` when a
stage is built on its own (``stage_dockerfile``), ``FROM <parent> AS <stage>`` in the
multi-stage Dockerfile of a tag (``tag_dockerfile``), which plain ``docker build`` builds
anywhere with the project directory as build context.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import jinja2

from . import compat, kernels
from .cabundle import SECRET_ID
from .errors import InputError
from .expand import ImageSpec
from .matrix import Matrix

MANIFEST_PATH = "/etc/stagecraft/image.json"


@dataclass(frozen=True)
class RenderedStage:
    """A stage of one image: ``text`` (no FROM line), the build-context paths it
    ``copies``, and ``parent``, the stage below it (None for the first stage, which
    builds on the base image)."""

    name: str
    text: str
    copies: tuple[str, ...]
    parent: str | None


def _environment(matrix: Matrix) -> jinja2.Environment:
    return _environment_for(str(matrix.templates_dir))


@functools.lru_cache(maxsize=8)
def _environment_for(templates_dir: str) -> jinja2.Environment:
    # One environment per templates directory: it caches compiled templates (checking
    # their mtime), so a plan over many images compiles each template once.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shquote"] = _shquote
    env.filters["tojson_sorted"] = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))
    return env


def _shquote(value: Any) -> str:
    text = str(value)
    return "'" + text.replace("'", "'\"'\"'") + "'"


def image_manifest(matrix: Matrix, spec: ImageSpec) -> dict[str, Any]:
    """What the image says about itself at ``/etc/stagecraft/image.json``.

    Shape: ``{"schema": 1, "framework": {"name", "package", "version"}, "device",
    "components": {"cuda", "cudnn", "nccl", "min_driver", "min_driver_compat", ...},
    "kernel_sets": [...]}``. Tag-independent, so one runtime stage serves all aliases.
    """
    fw = spec.framework
    comps: dict[str, str] = {"python": spec.base["python"],
                             "os": f"{spec.base['os']} {spec.base['version']}"}
    cuda = spec.components.get("cuda")
    if cuda:
        comps["cuda"] = str(cuda["cuda"])
        if cuda.get("cudnn"):
            comps["cudnn"] = str(cuda["cudnn"])
        facts = compat.cuda_facts(str(cuda["cuda"])) or {}
        comps.update({k: str(v) for k, v in facts.items()})
    accel = spec.components.get("accel")
    for lib in ("nccl", "tensorrt"):
        if accel and accel.get(lib):
            comps[lib] = str(accel[lib])
    kernel_sets = kernels.complete(fw, spec.components)
    return {"schema": 1,
            "framework": {"name": fw["name"], "package": fw["package"], "version": fw["version"]},
            "device": fw["device"], "components": comps, "kernel_sets": kernel_sets}


def render_stages(matrix: Matrix, spec: ImageSpec) -> list[RenderedStage]:
    """Render every stage of ``spec``'s chain, base first.

    Raises ``InputError`` with ``templates/<file>:<line>`` when a template has a syntax
    error or reads a variable its stage does not get.
    """
    env = _environment(matrix)
    manifest = json.dumps(image_manifest(matrix, spec), sort_keys=True, separators=(",", ":"))
    # The manifest travels inside a single-quoted shell word: keep it free of quotes.
    manifest = manifest.replace("'", "\\u0027")
    out: list[RenderedStage] = []
    parent: str | None = None
    for name in spec.chain:
        stage = matrix.stages[name]
        context: dict[str, Any] = {
            "stage": name,
            "base": spec.base,
            "image_json": manifest,
            "manifest_path": MANIFEST_PATH,
            "entrypoint": matrix.entrypoint,
            "pip_ca_secret": SECRET_ID,
        }
        for table in stage.uses:
            context[table] = spec.components[table]
        if "cuda" in stage.uses:
            context["cuda_facts"] = compat.cuda_facts(str(spec.components["cuda"]["cuda"])) or {}
        try:
            text = env.get_template(stage.template).render(**context)
        except jinja2.TemplateSyntaxError as exc:
            raise InputError.one(f"templates/{stage.template}:{exc.lineno}",
                                 f"template syntax error: {exc.message}", "fix the template") from None
        except jinja2.UndefinedError as exc:
            raise InputError.one(f"templates/{stage.template}:{_template_line(exc)}",
                                 f"stage {name!r} for {spec.tag}: {exc.message}",
                                 f"add the table to stages.{name}.uses or fix the name") from None
        out.append(RenderedStage(name=name, text=_tidy(text), copies=stage.copies, parent=parent))
        parent = name
    return out


def _template_line(exc: Exception) -> str:
    tb = exc.__traceback__
    line = "?"
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(".j2"):
            line = str(tb.tb_lineno)
        tb = tb.tb_next
    return line


def _tidy(text: str) -> str:
    lines = [ln.rstrip() for ln in text.strip("\n").splitlines()]
    tidy: list[str] = []
    for ln in lines:
        if ln == "" and tidy and tidy[-1] == "":
            continue
        tidy.append(ln)
    return "\n".join(tidy) + "\n"


def final_labels(matrix: Matrix, spec: ImageSpec, revision: str, created: str,
                 repository: str | None = None) -> dict[str, str]:
    """OCI labels of the tag itself, applied on its last stage.

    ``created`` is RFC 3339 (the source revision's commit time, so a rebuild of the
    same revision is byte-identical); ``revision`` the source control revision.
    See https://github.com/opencontainers/image-spec/blob/main/annotations.md
    """
    fw = spec.framework
    labels = {
        "org.opencontainers.image.title": f"{repository or matrix.repository}:{spec.tag}",
        "org.opencontainers.image.description":
            f"{fw['package']} {fw['version']} ({fw['device']}) on {spec.base['os']} "
            f"{spec.base['version']}, Python {spec.base['python']}",
        "org.opencontainers.image.version": spec.tag,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.ref.name": spec.tag,
    }
    if matrix.source:
        labels["org.opencontainers.image.source"] = matrix.source
    if matrix.vendor:
        labels["org.opencontainers.image.vendor"] = matrix.vendor
    labels["io.stagecraft.matrix.group"] = spec.group
    labels["io.stagecraft.matrix.selection"] = ",".join(
        f"{axis}={name}" for axis, name in spec.selection if name is not None)
    return labels


def label_instruction(labels: dict[str, str]) -> str:
    """A ``LABEL`` instruction, one label per line, keys sorted."""
    parts = [f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())]
    return "LABEL " + " \\\n      ".join(parts) + "\n"


def stage_dockerfile(stage: RenderedStage, parent_ref: str, trailer: str = "") -> str:
    """The Dockerfile that builds one stage on its own, on the image ``parent_ref``."""
    return f"FROM {parent_ref}\n{stage.text}{trailer}"


def tag_dockerfile(matrix: Matrix, spec: ImageSpec, stages: list[RenderedStage],
                   base_ref: str, labels: dict[str, str]) -> str:
    """The full multi-stage Dockerfile of one tag (no ``# syntax=`` line: the engine's
    embedded frontend is used). Build it with the project directory as context:
    ``docker build -f Dockerfile.<tag> --target <last stage> .``"""
    head = (f"# {matrix.repository}:{spec.tag}, rendered by stagecraft from matrix.yaml "
            f"(image group {spec.group!r}).\n"
            f"# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t {matrix.repository}:"
            f"{spec.tag} [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR\n")
    parts = [head]
    for i, stage in enumerate(stages):
        parent = stage.parent or base_ref
        parts.append(f"\nFROM {parent} AS {stage.name}\n{stage.text}")
        if i == len(stages) - 1:
            parts.append(label_instruction(labels))
    return "".join(parts)
