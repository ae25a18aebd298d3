"""Write the catalog: plain files with relative links (no server; works offline and on
GitHub Pages) rendered from Jinja2 templates kept beside this module.

    DIR/index.html          every tag against GPU generations, CPU levels and platforms
    DIR/select.html         "which tag for my machine" (the answers table embedded as JSON)
    DIR/changes.html        what changed between two builds of a tag, or two tags
    DIR/tags/TAG.html       one page per tag
    DIR/style.css, DIR/select.js, DIR/facts.json (the facts the site was made from: a
                            later run's --previous reads them), DIR/.stagecraft-catalog
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from . import hardware

HERE = Path(__file__).resolve().parent
MARKER = ".stagecraft-catalog"  # a directory holding it is a catalog this command may replace
STATIC = ("style.css", "select.js")


def _size(n: int | None) -> str:
    """Bytes as a person reads them: ``"1.2 GB"`` (decimal units, as docker prints), "unknown"."""
    if n is None:
        return "unknown"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _delta(n: int | None) -> str:
    return "unknown" if n is None else ("+" if n >= 0 else "-") + _size(abs(n))


def environment() -> jinja2.Environment:
    """The templates' environment: autoescaped HTML, undefined names are errors."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["size"] = _size
    env.filters["delta"] = _delta
    return env


def embedded_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: every ``<`` written as
    ``\\u003c``, so no text of the matrix can end the element or open a comment in it."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).replace("<", "\\u003c")


def render(views: Sequence[Mapping[str, Any]], table: Mapping[str, Any], changes: Sequence[Mapping[str, Any]],
           notes: Sequence[str], source: str) -> dict[str, str]:
    """Every page of the site: relative path -> text. ``views``: tag_view dicts in matrix
    order; ``table``: answers.table; ``changes``: diff.change entries; ``notes``: lines the
    selector page states (what the table does not model); ``source``: where the facts came
    from, in words."""
    env = environment()
    gens = [(g, ccs) for g, ccs in hardware.GENERATIONS]
    common = {"gens": gens, "cpus": hardware.CPUS, "platforms": hardware.PLATFORMS, "source": source}
    pages = {"index.html": env.get_template("index.html.j2").render(root="", views=views, **common),
             "changes.html": env.get_template("changes.html.j2").render(root="", changes=changes, **common)}
    choices = {"cpus": [{"key": k, "label": v[0], "platform": v[1]} for k, v in hardware.CPUS.items()],
               "gpus": [{"label": f"{m} (cc {cc})", "cc": cc, "name": m} for m, cc in hardware.GPU_MODELS],
               "ccs": [{"cc": cc, "generation": g} for g, ccs in gens for cc in ccs],
               "tags": {v["tag"]: f"tags/{v['tag']}.html" for v in views}}
    pages["select.html"] = env.get_template("select.html.j2").render(
        root="", table_json=embedded_json(table), choices_json=embedded_json(choices), notes=notes,
        grid=table["grid"], **common)
    tag_tpl = env.get_template("tag.html.j2")
    for v in views:
        pages[f"tags/{v['tag']}.html"] = tag_tpl.render(root="../", v=v, **common)
    for name in STATIC:
        pages[name] = (HERE / "templates" / name).read_text()
    return pages


def write(out: Path, pages: Mapping[str, str], facts: Mapping[str, Any]) -> None:
    """Write ``pages`` and ``facts`` (as facts.json) to ``out``, whole or not at all: into
    a new directory beside it, then swapped in place of ``out`` (a previous catalog, or
    an empty directory, is replaced). The caller has checked ``out`` (``check_output``)."""
    out = out.absolute()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for rel, text in pages.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (tmp / "facts.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
        (tmp / MARKER).write_text("made by `build.py catalog`; the next run replaces this directory\n")
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
        tmp.rename(out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
