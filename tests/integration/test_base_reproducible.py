"""The bootstrapped base's rootfs is reproducible: two independent debootstraps of the
Debian 12 base, with matrix.lock's SOURCE_DATE_EPOCH and the normalisation of
bases.bootstrap_rootfs, give byte-identical tars (and pass the lock's checks). About 1-2
minutes (two debootstraps at once)."""

from __future__ import annotations

import hashlib
import tarfile
from concurrent.futures import ThreadPoolExecutor

from stagecraft.bases import base_image, bootstrap_rootfs
from stagecraft.lockfile import base_epoch, base_lock
from tests.integration.harness import MATRIX, SPECS


def test_two_bootstraps_give_the_same_bytes(tmp_path):
    spec = next(s for s in SPECS if s.tag == "2.6.2-cpu")
    epoch = base_epoch(MATRIX, spec, "linux/amd64")
    assert epoch > 0
    base = base_image(spec.base, "bootstrap", "linux/amd64",
                      locked=base_lock(MATRIX, spec, "linux/amd64"), source_date_epoch=epoch)
    dirs = [tmp_path / "one", tmp_path / "two"]
    for d in dirs:
        d.mkdir()
    with ThreadPoolExecutor(2) as pool:
        tars = list(pool.map(lambda d: bootstrap_rootfs(base, d), dirs))
    digests = [hashlib.sha256(t.read_bytes()).hexdigest() for t in tars]
    assert digests[0] == digests[1]
    with tarfile.open(tars[0]) as tf:
        members = tf.getmembers()
    assert max(m.mtime for m in members) <= epoch
    names = {m.name for m in members}
    assert "./var/lib/dpkg/status" in names and "./usr/bin/dpkg" in names
    assert not [n for n in names if n.startswith("./var/log/") or n.startswith("./var/cache/apt/archives/")
                and n.endswith(".deb")]
