"""File times fixed where the files are made (stagecraft/steptimes.py, issue 23 item 2):
the templates' promise (every RUN ends with FIX_TIMES, nothing copied by COPY or ADD), the
check of an exported OCI layout against SOURCE_DATE_EPOCH, and the build log's verdict.
The check runs on layouts written here in the format BuildKit writes (image-spec
image-layout.md); the engine's side is tests/integration/test_reproducible.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from stagecraft.bases import base_image
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.plan import full_dockerfile
from stagecraft.steptimes import (
    FIX_TIMES,
    NewerEntry,
    again_args,
    check_export,
    describe,
    from_images,
    makes_dated_layers,
    newer_entries,
)
from tests.conftest import ROOT
from tests.unit.dockerfile_model import instructions

EPOCH = 1783764997
MATRIX = load_matrix(ROOT / "matrix.yaml")
CASES = [(s, p) for s in expand(MATRIX) for p in (s.platforms or ("linux/amd64",))]


@pytest.mark.parametrize(("spec", "platform"), CASES, ids=[f"{s.tag}@{p}" for s, p in CASES])
def test_every_step_of_every_tag_fixes_its_file_times(spec, platform):
    base = base_image(spec.base, "pull" if "pull" in spec.base else None, platform)
    text = full_dockerfile(MATRIX, spec, base, "0" * 40, "1970-01-01T00:00:00Z")
    found = instructions(text)
    runs = [i for i in found if i.keyword == "run"]
    assert runs
    for i in runs:
        assert i.args.rstrip().endswith(FIX_TIMES), f"line {i.line}: RUN does not end with FIX_TIMES"
    assert [i.line for i in found if i.keyword in ("copy", "add")] == []
    assert not makes_dated_layers(text)


def test_copy_and_add_lines_are_found_and_scratch_is_no_parent():
    assert makes_dated_layers("FROM a\nCOPY x /x\n")
    assert makes_dated_layers("FROM a\n  add https://example.org/k.deb /tmp/\n")
    assert not makes_dated_layers("FROM a\nRUN echo COPY x\n#COPY in a comment\n")
    assert from_images("FROM --platform=linux/arm64 stagecraft-stage/base:abc AS runtime\n"
                       "ARG SOURCE_DATE_EPOCH\nFROM scratch\nfrom other:1\n") == [
        "stagecraft-stage/base:abc", "other:1"]


def _blob(layout: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def _layer(entries: list[tuple[str, float]], compress: bool = True) -> tuple[bytes, str]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mtime in entries:
            info = tarfile.TarInfo(name)
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
            else:
                info.size = 3
            info.mtime = mtime
            tar.addfile(info, io.BytesIO(b"abc") if info.size else None)
    data = raw.getvalue()
    diff_id = f"sha256:{hashlib.sha256(data).hexdigest()}"
    return (gzip.compress(data, mtime=0) if compress else data), diff_id


def _layout(tmp_path: Path, layers: list[list[tuple[str, float]]], attested: bool = False,
            media: str = "application/vnd.oci.image.layer.v1.tar+gzip") -> tuple[Path, list[str]]:
    layout = tmp_path / "iid.oci"
    descriptors, diff_ids = [], []
    for entries in layers:
        data, diff_id = _layer(entries, compress=media.endswith("gzip"))
        descriptors.append({"mediaType": media, "digest": _blob(layout, data), "size": len(data)})
        diff_ids.append(diff_id)
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {
        "mediaType": "application/vnd.oci.image.config.v1+json", "digest": _blob(layout, config),
        "size": len(config)}, "layers": descriptors}).encode()
    top = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
           "digest": _blob(layout, manifest), "size": len(manifest)}
    if attested:  # BuildKit's index: the image and an attestation manifest about it
        att = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
               "digest": _blob(layout, b'{"layers": []}'), "size": 14,
               "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                               "vnd.docker.reference.digest": top["digest"]}}
        index = json.dumps({"schemaVersion": 2, "manifests": [top, att]}).encode()
        top = {"mediaType": "application/vnd.oci.image.index.v1+json",
               "digest": _blob(layout, index), "size": len(index)}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return layout, diff_ids


def test_a_layout_whose_new_layers_keep_to_the_epoch_passes(tmp_path):
    layout, _ = _layout(tmp_path, [[("etc/", EPOCH - 5), ("etc/x", EPOCH)], [("opt/y", 0)]],
                        attested=True)
    before = (layout / "index.json").read_text()
    assert newer_entries(layout, EPOCH, set()) == []
    assert (layout / "index.json").read_text() == before  # only read: load_layout keeps the provenance


def test_an_entry_after_the_epoch_is_named_with_its_layer_and_parents_are_not_read(tmp_path):
    layout, diff_ids = _layout(tmp_path, [[("usr/", EPOCH + 9)],
                                          [("opt/", EPOCH), ("opt/x/", EPOCH + 1), ("opt/x/f", EPOCH + 2)]])
    assert newer_entries(layout, EPOCH, {diff_ids[0]}) == [
        NewerEntry(1, "opt/x", EPOCH + 1), NewerEntry(1, "opt/x/f", EPOCH + 2)]
    assert newer_entries(layout, EPOCH, set(), limit=1) == [NewerEntry(0, "usr", EPOCH + 9)]
    assert newer_entries(layout, EPOCH, set(diff_ids)) == []


def test_an_uncompressed_layer_is_read_and_another_media_type_is_refused(tmp_path):
    layout, _ = _layout(tmp_path, [[("a", EPOCH + 1)]], media="application/vnd.oci.image.layer.v1.tar")
    assert newer_entries(layout, EPOCH, set()) == [NewerEntry(0, "a", EPOCH + 1)]
    zstd, _ = _layout(tmp_path / "z", [[("a", 0)]], media="application/vnd.oci.image.layer.v1.tar+zstd")
    with pytest.raises(ValueError, match="tar\\+zstd"):
        newer_entries(zstd, EPOCH, set())


def test_the_log_says_the_verdict_and_a_broken_layout_names_the_log(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("#12 DONE\n")
    good, _ = _layout(tmp_path / "g", [[("a", EPOCH)]])
    assert check_export(good, "FROM p\nRUN x\n", EPOCH, lambda ref: [], log) is False
    bad, diff_ids = _layout(tmp_path / "b", [[("p", EPOCH + 7)], [("a/", EPOCH + 1)]])
    asked = []
    assert check_export(bad, "FROM p:1\nRUN x\n", EPOCH, lambda ref: asked.append(ref) or diff_ids[:1],
                        log) is True
    assert asked == ["p:1"]
    lines = log.read_text().splitlines()
    assert lines[0] == "#12 DONE"
    assert lines[1] == (f"stagecraft: no entry of a new layer is newer than SOURCE_DATE_EPOCH={EPOCH}: "
                        "exported as the steps left it (no rewrite pass)")
    assert lines[2] == (f"stagecraft: entries newer than SOURCE_DATE_EPOCH={EPOCH} (layer 1: a "
                        f"({EPOCH + 1})): exporting again with rewrite-timestamp")
    # A layer that cannot be read here (a gzip stream cut short, a zstd layer, an engine
    # that fails to say a parent's layers) takes the rewrite route: it is made right anyway.
    blob = next(p for p in (bad / "blobs" / "sha256").iterdir() if p.stat().st_size > 100)
    blob.write_bytes(b"\x1f\x8b\x08\x00 not gzip at all")
    assert check_export(bad, "FROM p:1\n", EPOCH, lambda ref: [], log) is True
    zstd, _ = _layout(tmp_path / "z", [[("a", 0)]], media="application/vnd.oci.image.layer.v1.tar+zstd")
    assert check_export(zstd, "FROM p:1\n", EPOCH, lambda ref: [], log) is True

    def engine_gone(ref):
        raise ConnectionError("engine gone")
    assert check_export(good, "FROM p:1\n", EPOCH, engine_gone, log) is True
    said = log.read_text().splitlines()[3:]
    assert [ln.split(" (")[0] for ln in said] == [
        "stagecraft: the build's OCI layout could not be checked"] * 3
    assert all(ln.endswith("): exporting again with rewrite-timestamp") for ln in said)
    assert "tar+zstd" in said[1] and "engine gone" in said[2]


def test_the_second_build_only_exports():
    assert again_args(["--platform", "linux/arm64", "--no-cache", "-t", "x:1",
                       "--cache-from=type=local,src=/c", "--cache-to=type=local,dest=/c,mode=max",
                       "--cache-to", "type=registry,ref=r/c"]) == [
        "--platform", "linux/arm64", "-t", "x:1", "--cache-from=type=local,src=/c"]


def test_the_description_names_three_and_counts_the_rest():
    entries = [NewerEntry(2, f"f{i}", EPOCH + i) for i in range(1, 6)]
    assert describe(entries, EPOCH).endswith(
        f"(layer 2: f1 ({EPOCH + 1}), layer 2: f2 ({EPOCH + 2}), layer 2: f3 ({EPOCH + 3}) and 2 more): "
        "exporting again with rewrite-timestamp")


@pytest.mark.parametrize("reader", ["installed", "standard library"])
def test_a_gzip_layer_cut_short_or_not_gzip_is_a_value_error_with_either_inflater(tmp_path, monkeypatch, reader):
    """The layers are inflated by ISA-L where python-isal is installed, by the standard
    library's gzip where not: the same entries, and a broken layer is the same
    ``ValueError`` (check_export's rewrite route) with either, never another exception."""
    import gzip as stdlib_gzip

    from stagecraft import steptimes

    if reader == "standard library":
        monkeypatch.setattr(steptimes, "GzipReader", stdlib_gzip.GzipFile)
    entries = [(f"d{i}/", EPOCH) for i in range(200)] + [("late", EPOCH + 3)]
    layout, _ = _layout(tmp_path, [entries])
    assert newer_entries(layout, EPOCH, set()) == [NewerEntry(0, "late", EPOCH + 3)]
    blob = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.stat().st_size > 1000)
    whole = blob.read_bytes()
    for broken in (whole[: len(whole) // 2], b"\x1f\x8b\x08\x00 not gzip at all", whole[:5]):
        blob.write_bytes(broken)
        with pytest.raises(ValueError, match="^layer 0 is not a readable tar"):
            newer_entries(layout, EPOCH, set())


def _header(name: str, size_field: bytes, kind: bytes = b"0", mtime: int = EPOCH) -> bytes:
    """A ustar header with the 12-byte size field as given (octal or base-256, as a
    hostile or broken layer may carry it), checksum right."""
    block = bytearray(512)
    block[0:len(name)] = name.encode()
    block[100:108], block[108:116], block[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    block[124:136] = size_field
    block[136:148] = b"%011o\0" % mtime
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _base256(n: int) -> bytes:
    return bytes([0xFF]) + ((1 << 88) + n).to_bytes(11, "big") if n < 0 else bytes([0x80]) + n.to_bytes(11, "big")


_READ_LAYER = """import sys; sys.path.insert(0, sys.argv[1])
from pathlib import Path
from stagecraft.steptimes import newer_entries
try:
    print("entries", newer_entries(Path(sys.argv[2]), int(sys.argv[3]), set()))
except ValueError as exc:
    print("ValueError", exc)
"""


@pytest.mark.parametrize("case", ["size -512: its own header again", "PAX size -1024: the start, read as the end",
                                  "GNU long name of 2^62 bytes", "PAX header of 2^40 bytes"])
def test_a_hostile_size_is_a_value_error_not_a_loop_a_miss_or_an_allocation(tmp_path, case):
    """Review s41: tarfile's seekable mode follows a negative size backwards (the new
    reader allowed it: the same member for ever, or the archive's start read as its end,
    hiding a later entry) and reads a long-name header of any size at once (MemoryError).
    Each is now the ValueError that takes the rewrite route, within seconds."""
    first = _header("first", b"%011o\0" % 0)
    late = _header("late", b"%011o\0" % 0, mtime=EPOCH + 5)
    if case.startswith("size -512"):
        data = first + _header("loop", _base256(-512), mtime=EPOCH + 5)
    elif case.startswith("PAX size"):
        record = b"14 size=-1024\n"
        data = (first + _header("././@PaxHeader", b"%011o\0" % len(record), kind=b"x")
                + record.ljust(512, b"\0") + _header("f", b"%011o\0" % 0) + late)
    elif case.startswith("GNU"):
        data = first + _header("././@LongLink", _base256(1 << 62), kind=b"L") + b"A" * 1024 + late
    else:
        data = first + _header("././@PaxHeader", _base256(1 << 40), kind=b"x") + b"A" * 1024 + late
    layout, _ = _layout(tmp_path, [[("placeholder", EPOCH)]])
    blob = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.stat().st_size > 100)
    blob.write_bytes(gzip.compress(data + b"\0" * 4096, mtime=0))
    proc = subprocess.run([sys.executable, "-c", _READ_LAYER, str(ROOT), str(layout), str(EPOCH)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ValueError layer 0 is not a readable tar"), proc.stdout


def test_a_layer_of_several_gzip_members_is_read_to_its_end(tmp_path):
    """A gzip stream may be several members one after another (RFC 1952): the entries of
    every member are read (the tarfile stream used before stopped after the first)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, mtime in [("a", EPOCH), ("b", EPOCH), ("late", EPOCH + 2)]:
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            tar.addfile(info)
    data = raw.getvalue()
    layout, _ = _layout(tmp_path, [[("placeholder", EPOCH)]])
    blob = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.stat().st_size > 100)
    blob.write_bytes(gzip.compress(data[:512], mtime=0) + gzip.compress(data[512:], mtime=0))
    assert newer_entries(layout, EPOCH, set()) == [NewerEntry(0, "late", EPOCH + 2)]
