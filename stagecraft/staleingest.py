"""An interrupted ``docker load``'s ``index.json``, and how the next load gets past it.

On Docker's containerd image store, ``docker load`` hands the archive to containerd's
importer, which writes every member of the tar but ``oci-layout`` and ``manifest.json``
to the content store under the ingest reference ``tar-<member name>``, with no expected
digest (containerd ``archive/importer.go``, ``ImportIndex`` and ``onUntarBlob``). A
blob's name is its digest, so a write resumed under ``tar-blobs/sha256/<hex>`` resumes
the same bytes. ``index.json`` has one name for every archive: an engine killed while an
import wrote it keeps the ingest ``tar-index.json``, its first bytes and its size, and
the next import of any archive meets it (containerd ``content/local/store.go``,
``writer`` and ``resumeStatus``):

- where the new ``index.json`` has the size recorded (BuildKit's index of a stage differs
  from the last build's of it by its ``org.opencontainers.image.created`` time alone),
  the import keeps the stale bytes, skips as many of the
  new member, commits a blob of some other digest and cannot find the one it computed::

      content digest sha256:<the digest of the index.json sent>: not found

  That import removed the ingest: the same load made again succeeds;
- where the sizes differ, the store writes the new member over the stale bytes without
  cutting the file, so stale bytes longer than the new member make the commit fail
  ("unexpected commit size") and the ingest stays, now with the new size recorded: every
  later load whose ``index.json`` is shorter than those bytes is refused, at the commit
  or where it cannot skip them::

      failed to ingest "./index.json": unable to resume write to tar-index.json: unable to discard to offset

Reproduced on Docker 26.1.5 with containerd 1.7.24 by leaving the ingest with ``ctr
content ingest`` killed mid-write; met by the fault suite (seed 20261398, trial 46: the
engine killed during a stage's load, the next run's load of the same stage refused with
the first words).

There is no Docker request that drops an ingest, but an import consumes one: a tar whose
only member is an ``index.json`` of ``FLUSH_BYTES`` (more than any index the stale bytes
can have come from) is written over them whole and committed, and the import is then
refused as no image (``flush_tar``). ``met(text, index_digest)`` finds either refusal in
``docker load``'s words; ``layoutload`` and ``imagetransfer.load_image`` then load the
flush tar and make their load once more.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path

from . import stalesnapshot

# An image index names a few manifests: BuildKit's layouts and `docker save`'s hold 0.3 to
# 4 KB. A flush member this long covers any stale bytes such an index can have left.
FLUSH_BYTES = 1024 * 1024
# The second refusal: the import wrote the member over longer stale bytes and could not
# commit the file at the member's size, or could not skip the stale bytes of an ingest
# whose recorded size is the member's.
REFUSED_RE = re.compile(r'failed to ingest "(?:\./)?index\.json": (?:unable to resume write to tar-index\.json'
                        r'|failed commit on ref "tar-index\.json": commit failed: unexpected commit size)')
WHY = ("containerd met an interrupted load's index.json (the ingest tar-index.json, what an engine "
       "killed during a load leaves): loading a tar that consumes what is left of it, then the image once more")
MAX_INDEX = 1024 * 1024  # an index.json read to find its digest: anything longer is not an index


def met(text: str, index_digest: str | None) -> bool:
    """Whether ``text`` (``docker load``'s words) is containerd's refusal of a load that
    met a stale ``tar-index.json`` ingest (module docstring): "content digest D: not
    found" for ``index_digest``, the digest of the ``index.json`` the load sent (when
    known), or the refusal to resume or commit that ingest."""
    if REFUSED_RE.search(text):
        return True
    return bool(index_digest) and f"content digest {index_digest}: not found" in text


def leftover(text: str, index_digest: str | None, seen: set[str]) -> str:
    """Which of an engine crash's two leftovers a refused load's words ``text`` show that
    ``seen`` does not hold yet, added to it: "snapshot" (a directory at a new snapshot's
    id, ``stalesnapshot``), "ingest" (an interrupted load's ``index.json``, ``met``); ""
    for neither. A load is made once more for each, at most once (``layoutload``,
    ``imagetransfer.load_image``); for "ingest", after ``flush_tar`` was loaded."""
    for kind, shown in (("snapshot", stalesnapshot.said), ("ingest", lambda t: met(t, index_digest))):
        if kind not in seen and shown(text):
            seen.add(kind)
            return kind
    return ""


def flush_tar() -> bytes:
    """A tar (``FLUSH_BYTES`` and its headers) whose one member is an ``index.json`` of
    ``FLUSH_BYTES`` spaces: ``docker load`` of it consumes a stale ``tar-index.json``
    ingest, commits a blob nothing refers to (removed by the engine's garbage collection),
    and is refused as no image."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        member = tarfile.TarInfo("index.json")
        member.size = FLUSH_BYTES
        tar.addfile(member, io.BytesIO(b" " * FLUSH_BYTES))
    return out.getvalue()


def file_digest(path: Path) -> str | None:
    """``sha256:<hex>`` of the file ``path`` (a layout's ``index.json``), or None when it
    cannot be read or is longer than ``MAX_INDEX`` bytes."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INDEX + 1)
    except OSError:
        return None
    return None if len(data) > MAX_INDEX else "sha256:" + hashlib.sha256(data).hexdigest()


def archive_index_digest(path: Path) -> str | None:
    """``sha256:<hex>`` of the ``index.json`` member of the uncompressed tar ``path``
    (``docker save``'s archive), or None when it has none, it is longer than ``MAX_INDEX``
    bytes, or the tar cannot be read. Reads the members' headers and that member alone."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            for member in tar:
                if member.isfile() and member.name.removeprefix("./") == "index.json":
                    if member.size > MAX_INDEX:
                        return None
                    data = tar.extractfile(member)
                    return None if data is None else "sha256:" + hashlib.sha256(data.read()).hexdigest()
    except (OSError, tarfile.TarError):
        return None
    return None
