"""Loading a build's OCI layout into the engine (the export path of reproducible builds:
``Engine.build`` with ``rewrite-timestamp``), keeping its SLSA provenance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import staleingest, stalesnapshot, statefile
from .buildlog import LOST_RE
from .buildpath import Builder
from .errors import BuildError
from .ocilayout import single_image
from .safetext import cut_middle


def load_layout(b: Builder, layout: Path, log_path: Path, provenance_dir: Path | None,
                image_id: Callable[[str], str | None], answers: Callable[[], bool] = lambda: True,
                stopped: Callable[[], bool] = lambda: False) -> str:
    """Load the single image of the OCI layout directory ``layout`` (a build's
    ``--output type=oci,tar=false``) into the engine through the client of ``b``
    (``docker load`` of it as a tar stream); returns its manifest digest, the engine's id
    for it (``image_id`` must then find it). When the layout holds an index of the image
    and BuildKit's attestation manifest, the SLSA provenance statement is written to
    ``provenance_dir`` (when given) and the image manifest alone is loaded, under the
    index's name annotations. ``docker load``'s output is appended to ``log_path``. A load
    refused for what a crash of the engine left is made once more, for each of the two
    leftovers at most once: a directory at a new snapshot's id (``stalesnapshot``), an
    interrupted load's ``index.json`` (``staleingest``: after a load that consumes it);
    never once ``stopped()`` says a stop was asked for (Ctrl-C, SIGTERM). Raises
    ``BuildError``, naming the engine when it stopped answering (``answers()`` false, or
    the client's words say the connection broke)."""
    try:
        manifest, statements = single_image(layout)
    except (OSError, ValueError, KeyError) as exc:
        raise BuildError(f"the build's OCI layout is not one image ({exc}); log: {log_path}") from None
    if provenance_dir is not None:
        for statement in statements:
            if statement.get("predicateType", "").startswith("https://slsa.dev/provenance/"):
                provenance_dir.mkdir(parents=True, exist_ok=True)
                out = provenance_dir / f"{manifest.removeprefix('sha256:')}.intoto.json"
                try:  # whole or not at all: a full disk must not leave half a statement
                    statefile.write_atomic(out, json.dumps(statement, indent=1, sort_keys=True) + "\n")
                except OSError as exc:
                    raise BuildError(f"cannot write the build's provenance {out} "
                                     f"({exc.strerror or exc}); free space there and run again") from None
    rc, tar_rc, tar_said, said = _load(b, layout, log_path, stopped)
    tar_failed = tar_rc not in (0, -signal.SIGPIPE)  # SIGPIPE: docker load stopped reading
    if tar_failed:
        last = cut_middle(tar_said.splitlines()[-1], 200) if tar_said else "nothing on stderr"
        raise BuildError(f"reading the build's OCI layout failed (tar exit {tar_rc}: {last}; "
                         f"docker load exit {rc}); log: {log_path}")
    if rc != 0 or tar_rc != 0:
        if LOST_RE.search(said) or not answers():
            raise BuildError(f"the Docker engine stopped answering while the built image was "
                             f"loaded (docker load said{said or ' nothing'}); when `docker info` "
                             f"answers again, run the same command; log: {log_path}")
        raise BuildError(f"loading the built image failed (docker load exit {rc}, "
                         f"tar exit {tar_rc}{said}); log: {log_path}")
    if image_id(manifest) is None:
        raise BuildError(f"the engine has no image {manifest[:19]} after loading it; log: {log_path}")
    return manifest


def _load(b: Builder, layout: Path, log_path: Path, stopped: Callable[[], bool]) -> tuple[int, int, str, str]:
    """``_load_once``, made once more for each of the engine's two crash leftovers its
    words show (``load_layout``), never after ``stopped()``. Returns the last load's
    ``(docker load's exit status, tar's, tar's stderr, ": <docker load's last line>" or
    "")``: its own words, not the flush's after them."""
    index_digest = staleingest.file_digest(layout / "index.json")
    why, seen = "", set()
    while True:
        start, rc, tar_rc, tar_said = _load_once(b, layout, log_path, why=why)
        said = _last_line(log_path, start)
        if rc == 0 or tar_rc not in (0, -signal.SIGPIPE) or stopped():
            return rc, tar_rc, tar_said, said
        kind = staleingest.leftover(_said_since(log_path, start), index_digest, seen)
        if not kind:
            return rc, tar_rc, tar_said, said
        why = stalesnapshot.WHY if kind == "snapshot" else staleingest.WHY
        if kind == "ingest":
            _flush(b, log_path)
            if stopped():
                return rc, tar_rc, tar_said, said


def _load_once(b: Builder, layout: Path, log_path: Path, why: str = "") -> tuple[int, int, int, str]:
    """``tar -C layout -cf - . | <client> load`` once, its command line (after ``why``, a
    ``# stagecraft:`` line, when given) and docker load's output appended to ``log_path``.
    Returns ``(offset in the log where docker load's words start, docker load's exit
    status, tar's, tar's own stderr: its first 4 KiB)``. Raises ``BuildError`` past an hour."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"# stagecraft: {why}\n" * bool(why) + f"$ tar -C {layout} -cf - . | {b.client} load\n")
        log.flush()
        start = log.tell()  # what docker load says comes after this
        tar_err = tempfile.TemporaryFile()  # tar's own words, apart from docker load's
        tar = subprocess.Popen(["tar", "-C", str(layout), "-cf", "-", "."], stdout=subprocess.PIPE,
                               stderr=tar_err)
        try:
            proc = subprocess.run([b.client, "load"], stdin=tar.stdout, stdout=log,
                                  stderr=subprocess.STDOUT, env={**os.environ, **dict(b.env)},
                                  timeout=3600)
        except subprocess.TimeoutExpired:
            tar.kill()
            raise BuildError(f"loading the built image took over an hour; log: {log_path}") from None
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            tar.wait()
        tar_err.seek(0)
        tar_said = tar_err.read(4096).decode("utf-8", "replace").strip()
        tar_err.close()
        if tar.returncode not in (0, -signal.SIGPIPE) and tar_said:
            log.write(f"tar: {tar_said}\n")
    return start, proc.returncode, tar.returncode, tar_said


def _flush(b: Builder, log_path: Path) -> None:
    """``docker load`` of ``staleingest.flush_tar()`` (refused as no image by design: it is
    there to consume a stale ``tar-index.json`` ingest), its words appended to ``log_path``
    after a ``# stagecraft:`` line. At most 5 minutes; its outcome is not checked (the
    load made after it says whether the ingest is gone)."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"# stagecraft: {b.client} load < (a tar of one index.json of "
                  f"{staleingest.FLUSH_BYTES} spaces, to consume the stale ingest)\n")
        log.flush()
        try:
            subprocess.run([b.client, "load"], input=staleingest.flush_tar(), stdout=log,
                           stderr=subprocess.STDOUT, env={**os.environ, **dict(b.env)}, timeout=300)
        except subprocess.TimeoutExpired:
            log.write("# stagecraft: the load of that tar took over 5 minutes, stopped\n")


def _said_since(log_path: Path, start: int, limit: int = 65536) -> str:
    """The text written to ``log_path`` at or after byte ``start`` (at most its last
    ``limit`` bytes); "" when it cannot be read."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(f.seek(0, 2) - limit, start))
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(log_path: Path, start: int = 0, limit: int = 4096) -> str:
    """``": <the log's last non-empty line>"`` written at or after byte ``start`` (what
    docker load said: a full disk, ...), read from at most its last ``limit`` bytes; ""
    when there is none."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(f.seek(0, 2) - limit, start))
            lines = [ln.strip() for ln in f.read(limit).decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {cut_middle(lines[-1], 200)}" if lines else ""  # its end: the cause
