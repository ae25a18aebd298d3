"""A bootstrapped base against matrix.lock (bases.check_locked_rootfs), on a fixture
root file system: what debootstrap left in var/lib/dpkg/status and its .deb cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from stagecraft.bases import BaseImage, check_locked_rootfs
from stagecraft.errors import BuildError

DEB = b"!<arch>\nnot really a deb, but bytes with a hash\n"
SHA = hashlib.sha256(DEB).hexdigest()


def _rootfs(tmp_path: Path, installed: dict[str, str]) -> Path:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/cache/apt/archives").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("".join(
        f"Package: {p}\nStatus: install ok installed\nVersion: {v}\n\n" for p, v in installed.items()))
    (tmp_path / "var/cache/apt/archives/bsdutils_1%3a2.38.1-5_amd64.deb").write_bytes(DEB)
    return tmp_path


def _base(locked) -> BaseImage:
    return BaseImage("debian12", "bootstrap", "r", "i", locked=tuple(sorted(locked)))


def test_exactly_the_lock_passes(tmp_path):
    root = _rootfs(tmp_path, {"bsdutils": "1:2.38.1-5", "dash": "0.5.12-2"})
    check_locked_rootfs(root, _base([("bsdutils", "1:2.38.1-5", SHA), ("dash", "0.5.12-2", "a" * 64)]))


def test_hash_mismatch_names_package_and_both_hashes(tmp_path):
    root = _rootfs(tmp_path, {"bsdutils": "1:2.38.1-5"})
    with pytest.raises(BuildError, match=f"hash mismatch for bsdutils 1:2.38.1-5: lock sha256:{'b' * 64}, "
                                         f"downloaded sha256:{SHA}"):
        check_locked_rootfs(root, _base([("bsdutils", "1:2.38.1-5", "b" * 64)]))


def test_moved_version_asks_for_an_upgrade(tmp_path):
    root = _rootfs(tmp_path, {"bsdutils": "1:2.38.1-5", "dash": "0.5.12-3"})
    with pytest.raises(BuildError, match=r"dash 0.5.12-2 is locked but debootstrap installed "
                                         r"0.5.12-3; run `build.py lock --upgrade`"):
        check_locked_rootfs(root, _base([("bsdutils", "1:2.38.1-5", SHA), ("dash", "0.5.12-2", "a" * 64)]))


def test_a_package_the_lock_lacks(tmp_path):
    root = _rootfs(tmp_path, {"bsdutils": "1:2.38.1-5", "extra": "1"})
    with pytest.raises(BuildError, match="debootstrap installed extra, which matrix.lock does not have"):
        check_locked_rootfs(root, _base([("bsdutils", "1:2.38.1-5", SHA)]))
