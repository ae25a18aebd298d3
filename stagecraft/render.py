"""Render stage templates into Dockerfile text. Pure: no Docker, no network.

Each stage template renders with ``base``, the components its stage ``uses``, ``stage``
(its name), ``image_json`` (the image manifest the entrypoint reads) and ``entrypoint``
(the matrix's entrypoint settings), ``build_tools`` (pinned tools the build uses and
removes), under ``StrictUndefined``: a template that reads
anything else fails at render time with ``template:line``. Output is deterministic: the
same inputs give the same bytes.

A stage's text has no ``FROM`` line; the caller adds one: ``FROM <parent image>`` when a
stage is built on its own (``stage_dockerfile``), ``FROM <parent> AS <stage>`` in the
multi-stage Dockerfile of a tag (``tag_dockerfile``), which plain ``docker build`` builds
anywhere with the project directory as build context.

Every value stays inside its own line and quoting: the strings a template can reach
are checked before rendering (one line of printable text, ``safetext``), the filters
``shquote`` (a POSIX shell word) and ``dquote`` (a double-quoted Dockerfile word, as in
``LABEL`` and ``ENV``) escape what their quoting needs and refuse what no quoting can
hold, and the rendered text is checked to have no line break but ``\n``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from . import compat, kernels, stagelock, steptimes
from .cabundle import SECRET_ID
from .errors import InputError
from .expand import ImageSpec
from .model import Matrix
from .safetext import clip, cut, describe, first_unsafe, unsafe_positions

MANIFEST_PATH = "/etc/stagecraft/image.json"
# What the runtime stage measured from the framework's binaries (probes/fatbin.py).
MEASURED_PATH = "/opt/stagecraft/measured-kernels.json"


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
    env.filters["dquote"] = dquote
    env.filters["tojson_sorted"] = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))
    # The end of every RUN (file times fixed where the files are made, so that the
    # reproducible export needs no rewrite pass) and where a RUN mounts the build context.
    env.globals["fix_times"] = steptimes.FIX_TIMES
    env.globals["context_mount"] = steptimes.CONTEXT_MOUNT
    return env


class UnsafeValue(ValueError):
    """A value holds a character no quoting can keep on its line (``safetext``)."""


def _checked(value: Any) -> str:
    text = str(value)
    bad = first_unsafe(text)
    if bad is not None:
        raise UnsafeValue(f"the value {clip(text, 60)} holds {describe(bad)}")
    return text


def _shquote(value: Any) -> str:
    """One POSIX shell word that the shell reads back as ``value`` exactly: single
    quotes, each ``'`` written as ``'"'"'``. Raises ``UnsafeValue`` for a line break or
    another unsafe character (the Dockerfile parser would split the line first)."""
    return "'" + _checked(value).replace("'", "'\"'\"'") + "'"


def dquote(value: Any) -> str:
    """One double-quoted Dockerfile word (``LABEL k=WORD``, ``ENV k=WORD``) that
    BuildKit's parser reads back as ``value`` exactly: ``\\``, ``"`` and ``$`` escaped
    with a backslash (the only characters its double-quote processing treats
    specially), everything else, non-ASCII included, as it is (UTF-8).
    Source: moby/buildkit frontend/dockerfile/shell/lex.go, ``processDoubleQuote``.
    Raises ``UnsafeValue`` for a line break or another unsafe character."""
    text = _checked(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _guard_context(value: Any, path: str, depth: int = 0) -> None:
    """Every string a template can reach (keys too) is one line of printable text."""
    if isinstance(value, str):
        bad = first_unsafe(value)
        if bad is not None:
            raise InputError.one(path, f"the value {clip(value, 60)} holds {describe(bad)}",
                                 "values are single lines of printable text")
    elif isinstance(value, dict) and depth < 64:
        for key, item in value.items():
            _guard_context(key, path, depth + 1)
            _guard_context(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)) and depth < 64:
        for i, item in enumerate(value):
            _guard_context(item, f"{path}.{i}", depth + 1)


def image_manifest(matrix: Matrix, spec: ImageSpec, platform: str = "") -> dict[str, Any]:
    """What the image says about itself at ``/etc/stagecraft/image.json``.

    Shape: ``{"schema": 1, "framework": {"name", "package", "version"}, "device",
    "components": {"cuda", "cudnn", "nccl", "min_driver", "min_driver_compat", ...},
    "kernel_sets": [...], "device_strings": {family: template}}`` (the last when the
    framework declares them). Tag-independent, so one runtime stage serves all aliases.
    ``platform`` (``linux/arm64``; '' for the host's) drops the kernel sets whose
    ``requires.arch`` excludes that platform's CPU.
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
    kernel_sets = kernels.for_platform(kernels.complete(fw, spec.components), platform)
    out = {"schema": 1,
           "framework": {"name": fw["name"], "package": fw["package"], "version": fw["version"]},
           "device": fw["device"], "components": comps, "kernel_sets": kernel_sets}
    if fw.get("device_strings"):
        out["device_strings"] = dict(fw["device_strings"])
    return out


def render_stages(matrix: Matrix, spec: ImageSpec, platform: str = "") -> list[RenderedStage]:
    """Render every stage of ``spec``'s chain, base first, for ``platform`` ('' for the
    host's; see ``image_manifest``).

    Raises ``InputError`` with ``templates/<file>:<line>`` when a template has a syntax
    error or reads a variable its stage does not get.
    """
    env = _environment(matrix)
    manifest = json.dumps(image_manifest(matrix, spec, platform), sort_keys=True, separators=(",", ":"))
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
            "measured_path": MEASURED_PATH,
            "entrypoint": matrix.entrypoint,
            "build_tools": matrix.build_tools,
            "pip_ca_secret": SECRET_ID,
        }
        for table in stage.uses:
            context[table] = spec.components[table]
        # What matrix.lock fixes for this stage (None: the matrix has no lock).
        context["lock"] = stagelock.stage_lock(matrix, spec, name, platform)
        context["tools_lock"] = stagelock.tools_lock(matrix, spec, platform) if name == "runtime" else None
        if "cuda" in stage.uses:
            context["cuda_facts"] = compat.cuda_facts(str(spec.components["cuda"]["cuda"])) or {}
        for key, value in context.items():
            _guard_context(value, f"stage {name!r} for {spec.tag}: {key}")
        text = _render_template(env, stage.template, name, spec.tag, context)
        out.append(RenderedStage(name=name, text=_tidy(text), copies=stage.copies, parent=parent))
        parent = name
    return out


def _render_template(env: jinja2.Environment, template: str, stage: str, tag: str,
                     context: dict[str, Any]) -> str:
    where = f"templates/{template}"
    try:
        text = env.get_template(template).render(**context)
    except jinja2.TemplateSyntaxError as exc:
        name = exc.filename or exc.name or template
        raise InputError.one(f"templates/{_short(name, template)}:{exc.lineno}",
                             f"template syntax error: {exc.message}", "fix the template") from None
    except jinja2.TemplateNotFound as exc:
        raise InputError.one(f"{where}:{_template_line(exc)}", f"stage {stage!r} for {tag}: "
                             f"template {clip(exc.name, 80)} not found under templates/",
                             "fix the name in the include or import") from None
    except jinja2.UndefinedError as exc:
        raise InputError.one(f"{where}:{_template_line(exc)}",
                             f"stage {stage!r} for {tag}: {cut(exc.message or str(exc))}",
                             f"add the table to stages.{stage}.uses or fix the name") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        name = _undecodable(env, template)
        raise InputError.one(f"templates/{name}:{line}", f"not UTF-8 text (byte "
                             f"0x{exc.object[exc.start]:02x})", "save the template as UTF-8") from None
    except UnsafeValue as exc:
        raise InputError.one(f"{where}:{_template_line(exc)}", f"stage {stage!r} for {tag}: "
                             f"{exc}", "values are single lines of printable text") from None
    except InputError:
        raise
    except RecursionError:
        raise InputError.one(where, f"stage {stage!r} for {tag}: the template recurses "
                             "too deeply", "fix the template") from None
    except Exception as exc:  # noqa: BLE001 - a template is input: any failure is its error
        raise InputError.one(f"{where}:{_template_line(exc)}", f"stage {stage!r} for {tag}: "
                             f"{type(exc).__name__}: {cut(str(exc))}",
                             "fix the template") from None
    found = unsafe_positions(text, allow="\n")
    if found:
        line = text.count("\n", 0, found[0]) + 1
        raise InputError.one(f"{where}", f"stage {stage!r} for {tag}: the rendered text holds "
                             f"{describe(text[found[0]])} (its line {line})",
                             "write only printable text and \\n line breaks in the template")
    return text


def _undecodable(env: jinja2.Environment, template: str) -> str:
    """The template (``template`` or one it includes or imports) that is not UTF-8."""
    for name in [template, *sorted(env.list_templates())]:
        try:
            (Path(env.loader.searchpath[0]) / name).read_text(encoding="utf-8")  # type: ignore[union-attr]
        except UnicodeDecodeError:
            return name
        except OSError:
            continue
    return template


def _short(name: str, fallback: str) -> str:
    return name.rsplit("templates/", 1)[-1] if name else fallback


def _template_line(exc: Exception) -> str:
    tb = exc.__traceback__
    line = "?"
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(".j2"):
            line = str(tb.tb_lineno)
        tb = tb.tb_next
    return line


def _tidy(text: str) -> str:
    # Lines are split at "\n" only: the Dockerfile parser's one line break (the text
    # holds no other, see _render_template).
    lines = [ln.rstrip() for ln in text.strip("\n").split("\n")]
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
    """A ``LABEL`` instruction, one label per line, keys sorted; each value a ``dquote``
    word, so the image's label equals the text exactly (``$``, ``\\``, quotes,
    non-ASCII). Raises ``InputError`` for a value with an unsafe character."""
    parts = []
    for key, value in sorted(labels.items()):
        if not _LABEL_KEY.fullmatch(key):
            raise InputError.one(f"label {clip(key, 60)}", "not a label key",
                                 "keys are reverse-DNS names like org.example.name")
        try:
            parts.append(f"{key}={dquote(value)}")
        except UnsafeValue as exc:
            raise InputError.one(f"label {key}", str(exc),
                                 "values are single lines of printable text") from None
    return "LABEL " + " \\\n      ".join(parts) + "\n"


_LABEL_KEY = re.compile(r"[a-z0-9]+([._-][a-z0-9]+)*")


# After each FROM: the stage's RUN steps see the SOURCE_DATE_EPOCH build argument when a
# build passes one (stagecraft passes the lock's), so what they write is dated by it and
# Python compiles hash-based .pyc files (py_compile, PEP 552): a rebuild gives the same
# bytes. Without the argument the ARG is unset and changes nothing.
EPOCH_ARG = "ARG SOURCE_DATE_EPOCH\n"


def stage_dockerfile(stage: RenderedStage, parent_ref: str, trailer: str = "") -> str:
    """The Dockerfile that builds one stage on its own, on the image ``parent_ref``."""
    return f"FROM {parent_ref}\n{EPOCH_ARG}{stage.text}{trailer}"


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
        parts.append(f"\nFROM {parent} AS {stage.name}\n{EPOCH_ARG}{stage.text}")
        if i == len(stages) - 1:
            parts.append(label_instruction(labels))
    return "".join(parts)


def index_dockerfile(images: dict[str, str]) -> str:
    """A Dockerfile that makes one multi-platform image from per-platform images without
    rebuilding them (``images``: platform ``linux/arm64`` -> image reference): a stage per
    platform, the last one ``FROM`` the stage of the platform being built. Built with
    ``--platform`` listing them all, the result is an OCI image index."""
    lines = [f"FROM {ref} AS platform-{platform.replace('/', '-')}"
             for platform, ref in sorted(images.items())]
    # TARGETOS/TARGETARCH are BuildKit's automatic platform arguments: undeclared they
    # expand in FROM (a global `ARG TARGETARCH` without a value would blank them).
    lines.append("FROM platform-${TARGETOS}-${TARGETARCH}")
    return "\n".join(lines) + "\n"
