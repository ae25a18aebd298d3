"""Read the facts of built images from the Docker engine and the state directory (I/O).

Per tag: ``docker image inspect`` and ``history`` of ``REPOSITORY:TAG``; its packages
from the SBOM the test run wrote (``.stagecraft/sbom/<id>.cdx.json``), else from one
short container (``stagecraft.sbom.inventory``); /etc/stagecraft/image.json copied out
of a created, never started, container; the test record and whether a signature lies
beside it. The shape returned is the one ``view`` documents; ``load_facts`` reads the
same shape from a JSON file (``--facts``: fixtures, or a catalog's facts.json).
"""
from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import containers, render, signing, statefile, testing
from ..errors import InputError

FACTS_SCHEMA = 1
READERS = 4  # images read at once


def inventory_from_sbom(doc: dict[str, Any]) -> dict[str, Any]:
    """A CycloneDX document (``sbom.make_bom``'s) as ``sbom.inventory``'s shape: debian
    and python package lists (name, version), read from the components' package URLs."""
    inv: dict[str, Any] = {"python_prefix": "", "debian": [], "python": []}
    for c in doc.get("components", []):
        purl = str(c.get("purl", ""))
        kind = "debian" if purl.startswith("pkg:deb/") else "python" if purl.startswith("pkg:pypi/") else None
        if kind:
            inv[kind].append({"name": c.get("name", ""), "version": c.get("version", "")})
    return inv


# An image manifest is a few KB; a file larger than this is not one stagecraft wrote.
MANIFEST_LIMIT_BYTES = 4 * 1024 * 1024


def _manifest(client: Any, ref: str) -> dict[str, Any] | None:
    """/etc/stagecraft/image.json of ``ref``, from a created container (never started)."""
    # Labelled as the run's, without a sweep per image: a catalog reads many images, and
    # the next run that starts a container (or `prune --yes`) sweeps what a kill left.
    box = containers.create(client, ref, "catalog", sweep_first=False, entrypoint=["/bin/true"],
                            network_disabled=True)
    try:
        stream, _ = box.get_archive(render.MANIFEST_PATH)
        data = bytearray()
        for chunk in stream:  # the file and its tar header, read up to the limit
            data += chunk
            if len(data) > MANIFEST_LIMIT_BYTES:
                return None
        with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
            member = tar.next()
            f = tar.extractfile(member) if member else None
            return json.loads(f.read(MANIFEST_LIMIT_BYTES)) if f else None
    except Exception:  # noqa: BLE001 - an image without the file: no manifest
        return None
    finally:
        containers.remove(box)


def read_image(client: Any, ref: str, state_dir: Path) -> dict[str, Any] | None:
    """The facts of one local image ``ref``; None when the engine has no such image."""
    import docker

    from .. import sbom

    try:
        ins = client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return None
    image_id = ins["Id"]
    keep = {k: ins.get(k) for k in ("Id", "RepoDigests", "Size", "Os", "Architecture", "Created")}
    keep["Config"] = {"Labels": (ins.get("Config") or {}).get("Labels") or {}}
    keep["RootFS"] = {"Layers": (ins.get("RootFS") or {}).get("Layers") or []}
    history = [{"CreatedBy": h.get("CreatedBy", ""), "Size": h.get("Size", 0)} for h in client.api.history(ref)]
    bom = testing.sbom_path(state_dir, image_id)
    if bom.is_file():
        inv = inventory_from_sbom(json.loads(bom.read_text()))
    else:
        inv = sbom.inventory(type("E", (), {"client": client})(), ref)
    rec_path = testing.record_path(state_dir, image_id)
    try:
        record = testing.load_record(state_dir, image_id)
    except statefile.Unreadable:  # half a record is no record (shown as not tested)
        record = None
    if record:
        record = {k: record.get(k) for k in ("passed", "counts", "seconds", "suites", "platform")}
    return {"platform": testing.image_platform(ins), "inspect": keep, "history": history,
            "inventory": inv, "manifest": _manifest(client, ref), "compressed_size": None,
            "test_record": record,
            "signature": ("signed" if signing.sig_path(rec_path).exists() else "unsigned") if record else "not tested"}


def read_engine(refs: dict[str, str], state_dir: Path) -> tuple[dict[str, Any], str]:
    """(tag -> facts for the tags whose ``refs[tag]`` the engine has, where they came from
    in words). No engine: no facts, and the words say so (every tag is then listed as not
    built, with the matrix's intent)."""
    try:
        import docker

        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - no engine: a catalog of intent
        return {}, f"the matrix only (no Docker engine answered: {str(exc)[:120]})"
    from concurrent.futures import ThreadPoolExecutor

    # A few images at once: an image without an SBOM costs a short container run.
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        images = dict(zip(refs, pool.map(lambda ref: read_image(client, ref, state_dir), refs.values()),
                          strict=True))
    out = {tag: {"ref": refs[tag], "images": [image]} for tag, image in images.items() if image is not None}
    return out, f"the images in the local Docker engine and {state_dir}"


def load_facts(path: Path, tags: Sequence[str]) -> dict[str, Any]:
    """The ``tags`` facts of a facts file (``{"schema": 1, "tags": {tag: facts}}``), the
    tags with at least one image. Raises InputError when it is not one."""
    where = f"--facts {str(path)[:200]}"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError.one(where, f"cannot read it as JSON ({str(exc)[:120]})",
                             "pass a facts.json written by build.py catalog") from None
    if not isinstance(data, dict) or data.get("schema") != FACTS_SCHEMA or not isinstance(data.get("tags"), dict):
        raise InputError.one(where, f'not a facts file (want {{"schema": {FACTS_SCHEMA}, "tags": {{...}}}})',
                             "pass a facts.json written by build.py catalog")
    return {t: f for t, f in data["tags"].items()
            if t in tags and isinstance(f, dict) and isinstance(f.get("images"), list) and f["images"]}


def merge_facts(files: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several facts files' tags as one: a tag's images from every file, one per platform
    (a later file's image of a platform replaces an earlier one's)."""
    out: dict[str, Any] = {}
    for tags in files:
        for tag, f in tags.items():
            have = out.setdefault(tag, {**f, "images": []})
            for image in f.get("images") or []:
                at = next((n for n, i in enumerate(have["images"]) if i.get("platform") == image.get("platform")), None)
                if at is None:
                    have["images"].append(image)
                else:
                    have["images"][at] = image
    return out
