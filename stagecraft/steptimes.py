"""File times fixed where the files are made (issue 23 item 2): the reproducible export
without BuildKit's rewrite pass.

BuildKit 0.13's ``rewrite-timestamp=true`` makes a layer's file times the build's
SOURCE_DATE_EPOCH by running every new layer through decompress, rewrite, recompress
after the export (``util/converter``; BENCHMARKS.md "Reproducible export": it costs as
much as the export itself). stagecraft's templates fix the times in the steps instead:
every RUN ends with ``FIX_TIMES``, which sets each file the step made or changed and that
is newer than the epoch to the epoch, and copies from the build context are made by RUN
steps too (a ``COPY`` dates the directories it creates and fills with the build's time,
which no step can change afterwards). The config and history take the epoch from the
``SOURCE_DATE_EPOCH`` build argument without a rewrite (BuildKit's docs/build-repro.md).

A build is then exported as it is, and ``newer_entries`` checks the claim on what was
exported: no entry of a layer the build made is newer than the epoch. Where one is (a
template of one's own with a plain RUN, a ``WORKDIR`` that creates its directory), or a
layer cannot be read here, the build runs again from the cache it just made and exports
with ``rewrite-timestamp`` (``Engine.build``, ``again_args``). A Dockerfile with ``COPY``
or ``ADD`` (``makes_dated_layers``) goes that way at once. The two routes give different
manifests for the same files (the rewrite annotates the layers it made), each
reproducible: what decides the route is the Dockerfile and what its steps write.
"""

from __future__ import annotations

import json
import re
import tarfile
import zlib
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO

try:  # ISA-L's inflate (python-isal): 2.5x zlib's here (BENCHMARKS.md, "Reproducible export")
    from isal.igzip import BadGzipFile
    from isal.igzip import IGzipFile as GzipReader
    from isal.isal_zlib import error as InflateError
except ImportError:  # no wheel for this platform: the standard library's, slower
    from gzip import BadGzipFile
    from gzip import GzipFile as GzipReader
    from zlib import error as InflateError

from .ocilayout import image_manifest
from .safetext import clip

# The end of every RUN of the templates (``{{ fix_times }}``): each file this step made
# or changed and that is newer than SOURCE_DATE_EPOCH (seconds) gets that time, links
# themselves (-h) included. "This step's": its status changed after the container's /dev
# was made (-cnewer /dev: the runtime makes /dev, a tmpfs, as the step's container
# starts), so a file of a lower layer is never touched (a touch would copy it up whole
# into the new layer). What the step mounts is pruned (the engine's /etc/hosts,
# resolv.conf and hostname, BuildKit's secrets, and, by -xdev, /proc, /sys, /dev with
# the build context mounted under it). A directory keeps the time set here: touching a
# file does not change its directory's time. Without the build argument it does
# nothing. A touch that fails (a read-only mount of one's own) fails the step.
FIX_TIMES = (
    '{ [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \\( -path /proc -o -path /sys '
    '-o -path /dev -o -path /run/secrets -o -path /etc/hosts '
    '-o -path /etc/resolv.conf -o -path /etc/hostname \\) -prune '
    '-o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev '
    '-exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }'
)

# Where the templates mount build-context paths in a RUN step: inside the container's own
# /dev (a tmpfs), because BuildKit 0.8 (Docker 20.10) leaves in the layer the empty
# directories it makes for mount targets elsewhere (BuildKit 0.13 removes them).
CONTEXT_MOUNT = "/dev/stagecraft-context"

_DATED = re.compile(r"^\s*(COPY|ADD)\s", re.IGNORECASE | re.MULTILINE)

# Layer media types read here (OCI and Docker's), compressed with gzip or not at all.
LAYER_TYPES = ("application/vnd.oci.image.layer.v1.tar+gzip",
               "application/vnd.oci.image.layer.v1.tar",
               "application/vnd.docker.image.rootfs.diff.tar.gzip")
# The manifest and config of one image are small JSON documents.
MAX_JSON = 4 * 1024 * 1024


def makes_dated_layers(dockerfile: str) -> bool:
    """Whether ``dockerfile`` (its text) has a ``COPY`` or ``ADD`` line: a layer whose
    directories carry the build's time, so its export needs ``rewrite-timestamp``. A
    line inside a RUN's continuation that starts with either word counts too (a false
    yes costs only the rewrite pass)."""
    return bool(_DATED.search(dockerfile))


@dataclass(frozen=True)
class NewerEntry:
    """An entry of an exported layer whose time is after the epoch: ``layer`` (0-based,
    in the image's order), its ``path`` in the layer and its ``mtime`` (s)."""

    layer: int
    path: str
    mtime: float


def _json(layout: Path, digest: str) -> dict:
    algo, _, hexdigest = digest.partition(":")
    if algo != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
        raise ValueError(f"not a sha256 digest: {digest[:80]!r}")
    path = layout / "blobs" / "sha256" / hexdigest
    if path.stat().st_size > MAX_JSON:
        raise ValueError(f"blob {digest[:19]} is larger than {MAX_JSON} bytes")
    return json.loads(path.read_bytes())


def newer_entries(layout: Path, epoch: int, parent_diff_ids: set[str],
                  limit: int = 5) -> list[NewerEntry]:
    """The first ``limit`` entries newer than ``epoch`` (s) in the layers of the one image
    of the OCI layout directory ``layout`` (``ocilayout.image_manifest``; the layout is
    only read) that its parents do not have (``parent_diff_ids``: their
    ``RootFS.Layers``); ``[]`` when every one is at or before it. Each such layer is read once, as a stream (gzip or
    plain tar; ``_inflated``). Raises ``ValueError`` (a layer of another
    media type, a blob that is not JSON, a broken tar), ``OSError`` or ``KeyError``."""
    man = _json(layout, image_manifest(layout))
    config = _json(layout, man["config"]["digest"])
    diff_ids = config["rootfs"]["diff_ids"]
    layers = man["layers"]
    if len(diff_ids) != len(layers):
        raise ValueError(f"{len(layers)} layers but {len(diff_ids)} diff_ids")
    found: list[NewerEntry] = []
    for i, (layer, diff_id) in enumerate(zip(layers, diff_ids, strict=True)):
        if diff_id in parent_diff_ids:
            continue
        if layer.get("mediaType") not in LAYER_TYPES:
            raise ValueError(f"layer {i} is {layer.get('mediaType')!r}, not a tar or tar+gzip layer")
        algo, _, hexdigest = layer["digest"].partition(":")
        if algo != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
            raise ValueError(f"layer {i}: not a sha256 digest")
        try:
            with open(layout / "blobs" / "sha256" / hexdigest, "rb") as f, _inflated(f, layer) as raw, \
                    tarfile.open(fileobj=_Forward(raw), mode="r:") as tar:
                while (member := tar.next()) is not None:
                    tar.members = []  # keep no list of what was read
                    if member.mtime > epoch:
                        found.append(NewerEntry(i, member.name, member.mtime))
                        if len(found) >= limit:
                            return found
        except (tarfile.TarError, EOFError, BadGzipFile, InflateError, zlib.error, OverflowError,
                MemoryError) as exc:  # OverflowError: ISA-L's for a gzip header over 512 KiB
            raise ValueError(f"layer {i} is not a readable tar ({exc})") from None
    return found


class _Forward:
    """A layer's tar for ``tarfile``'s seekable mode, which it reads forward only: a seek
    back (a negative size in a broken header: the same member again and again, or the
    archive's start, read as its end) and a header of more than ``MAX_HEADER`` bytes (a
    PAX or GNU long-name header whose size is hostile) are a ``tarfile.ReadError``, as
    they were for a tarfile stream."""

    MAX_HEADER = 16 * 1024 * 1024

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def tell(self) -> int:
        return self._raw.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos < self._raw.tell():
            raise tarfile.ReadError("seeking backwards is not allowed")
        return self._raw.seek(pos)

    def read(self, size: int = -1) -> bytes:
        if size is None or not 0 <= size <= self.MAX_HEADER:
            raise tarfile.ReadError(f"a header of {size} bytes")
        return self._raw.read(size)


def _inflated(f: IO[bytes], layer: dict) -> IO[bytes]:
    """Layer blob ``f`` as its tar: inflated for a gzip media type, as it is otherwise. A
    tar read from it skips each file's data by a forward seek (inflating, not copying it
    through Python in 10 KiB records, as a tarfile stream would: 4.4 s for a 250 MB layer
    against 1.6 s with ISA-L, BENCHMARKS.md)."""
    if str(layer.get("mediaType", "")).endswith("gzip"):
        return GzipReader(fileobj=f, mode="rb")  # type: ignore[return-value]
    return nullcontext(f)  # type: ignore[return-value]


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)


def from_images(dockerfile: str) -> list[str]:
    """The image references of ``dockerfile``'s FROM lines (``scratch`` left out)."""
    return [ref for ref in _FROM.findall(dockerfile) if ref.lower() != "scratch"]


def describe(entries: list[NewerEntry], epoch: int) -> str:
    """The build log's line on ``entries`` (``newer_entries``): the first three found and
    that the layout is exported again, or that none was found."""
    if not entries:
        return (f"no entry of a new layer is newer than SOURCE_DATE_EPOCH={epoch}: exported "
                "as the steps left it (no rewrite pass)")
    shown = ", ".join(f"layer {e.layer}: {e.path} ({int(e.mtime)})" for e in entries[:3])
    more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
    return (f"entries newer than SOURCE_DATE_EPOCH={epoch} ({shown}{more}): exporting again "
            "with rewrite-timestamp")


def check_export(layout: Path, dockerfile: str, epoch: int,
                 layers_of: Callable[[str], list[str]], log_path: Path) -> bool:
    """Whether the build of ``dockerfile`` exported to ``layout`` must be exported again
    with ``rewrite-timestamp``: an entry of a layer its FROM images lack (``layers_of``:
    an image reference's diff ids, [] when the engine has no such image) is newer than
    ``epoch`` (s), or such a layer cannot be read here (zstd, a broken or hostile tar:
    the rewrite makes it right all the same). The verdict is appended to the build log
    ``log_path`` (``describe``, or what could not be read). Raises ``OSError`` when the
    log cannot be written."""
    try:
        parents = {d for ref in from_images(dockerfile) for d in layers_of(ref)}
        newer = newer_entries(layout, epoch, parents)
        again, verdict = bool(newer), describe(newer, epoch)
    except Exception as exc:  # noqa: BLE001 - any reading failure takes the rewrite route
        again = True
        verdict = (f"the build's OCI layout could not be checked ({clip(str(exc) or type(exc).__name__, 200)}): "
                   "exporting again with rewrite-timestamp")
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"stagecraft: {verdict}\n")
    return again


def again_args(extra_args: Iterable[str]) -> list[str]:
    """The build options of the second build that exports with ``rewrite-timestamp``,
    from the first's: without ``--no-cache`` (the first build just cached every step, so
    the second only exports) and without ``--cache-to`` (the first exported the cache)."""
    out: list[str] = []
    skip = False
    for arg in extra_args:
        if skip:
            skip = False
        elif arg == "--no-cache" or arg.startswith("--cache-to="):
            pass
        elif arg == "--cache-to":
            skip = True
        else:
            out.append(arg)
    return out
