"""Where two builds of a stage differ (stagecraft.reproduce): the file tables of real
layer tarballs and the comparison of two of them, and of two image configs."""

from __future__ import annotations

import gzip
import io
import tarfile

from stagecraft.reproduce import diff_configs, diff_tables, layer_table


def _layer(path, files, gz=False, mtime=1700000000):
    """A layer tarball: ``files`` maps name -> bytes (a file), None (a directory) or
    ``("->", target)`` (a symbolic link)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            if body is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            elif isinstance(body, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, body[1]
                tf.addfile(info)
            else:
                info.size, info.mode = len(body), 0o644
                tf.addfile(info, io.BytesIO(body))
    data = buf.getvalue()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def test_same_layers_give_no_differences(tmp_path):
    files = {"./usr": None, "./usr/lib/x.pyc": b"\x00pyc", "./bin": ("->", "usr/bin")}
    a = layer_table(_layer(tmp_path / "a.tar", files))
    b = layer_table(_layer(tmp_path / "b.tar.gz", files, gz=True))  # compression does not matter
    assert a == b
    assert diff_tables(a, b) == []
    assert a["usr/lib/x.pyc"][0] == "file" and a["bin"][0] == "symlink"


def test_each_kind_of_difference_is_named(tmp_path):
    a = layer_table(_layer(tmp_path / "a.tar", {
        "./var/cache/ldconfig/aux-cache": b"inode 1", "./etc/shadow": b"worker:!:20000:",
        "./only-first": b"x", "./link": ("->", "one")}))
    b = layer_table(_layer(tmp_path / "b.tar", {
        "./var/cache/ldconfig/aux-cache": b"inode 2", "./etc/shadow": b"worker:!:20000:",
        "./only-second": b"y", "./link": ("->", "two")}, mtime=1800000000))
    lines = diff_tables(a, b)
    assert lines == [
        "etc/shadow: mtime 1700000000 -> 1800000000",
        "link: mtime 1700000000 -> 1800000000, link 'one' -> 'two'",
        "only-first: only in the first build",
        "only-second: only in the second build",
        "var/cache/ldconfig/aux-cache: mtime 1700000000 -> 1800000000, content",
    ]


def test_config_fields_that_differ_are_named():
    one = {"created": "2024-01-01T00:00:00Z", "architecture": "amd64",
           "config": {"Labels": {"a": "1"}, "Env": ["X=1"]}, "history": [1],
           "rootfs": {"diff_ids": ["sha256:aa"]}}
    two = {"created": "2026-12-02T00:00:00Z", "architecture": "amd64",
           "config": {"Labels": {"a": "2"}, "Env": ["X=1"]}, "history": [1],
           "rootfs": {"diff_ids": ["sha256:bb"]}}
    assert diff_configs(one, two) == ["image config created: differs",
                                      "image config config.Labels: differs"]
    assert diff_configs(one, one) == []
