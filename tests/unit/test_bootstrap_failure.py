"""A failed debootstrap says why in the run's error: debootstrap's stderr says only "Tried
to extract package, but file already exists" for any failure of tar, and the cause is in
its own log (TARGET/debootstrap/debootstrap.log), which goes with the run's scratch
directory. Seen in a cold CI run (2026-12-07), where the cause was lost. A stand-in
debootstrap first in PATH fails as the real one does (its messages, its log's place)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stagecraft import bases
from stagecraft.errors import BuildError

STAND_IN = """#!/bin/sh
eval "target=\\${$(($# - 1))}"
mkdir -p "$target/debootstrap"
printf '%s\\n' "$LOG_TEXT" > "$target/debootstrap/debootstrap.log"
echo "I: Extracting adduser..."
echo "E: Tried to extract package, but file already exists. Exit..." >&2
exit 1
"""

BASE = bases.BaseImage(name="debian12", source="bootstrap", ref="stagecraft-base/debian:t", identity="t",
                       suite="bookworm", mirror="http://deb.debian.org/debian", variant="minbase",
                       arch=bases.host_arch())


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text(STAND_IN)
    (bin_dir / "debootstrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path


def test_the_error_gives_the_end_of_debootstraps_own_log(stand_in, monkeypatch):
    log = "\n".join([f"line {i}" for i in range(5000)] + [
        "tar: ./usr/sbin/adduser: Cannot open: No such file or directory",
        "tar: Exiting with failure status due to previous errors", ""])
    monkeypatch.setenv("LOG_TEXT", log)
    work = stand_in / "work"
    work.mkdir()
    with pytest.raises(BuildError) as exc:
        bases.bootstrap_rootfs(BASE, work)
    msg = str(exc.value)
    assert msg.startswith("debootstrap bookworm failed: ") and "Tried to extract package" in msg
    assert msg.endswith("; its log ends: line 4998 | line 4999 | tar: ./usr/sbin/adduser: Cannot open: No such "
                        "file or directory | tar: Exiting with failure status due to previous errors"), msg


def test_a_log_that_is_not_a_regular_file_is_not_read(tmp_path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "debootstrap").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("not for the message")
    (rootfs / bases.DEBOOTSTRAP_LOG).symlink_to(secret)
    assert bases.debootstrap_log_tail(rootfs) == ""
    (rootfs / bases.DEBOOTSTRAP_LOG).unlink()
    os.mkfifo(rootfs / bases.DEBOOTSTRAP_LOG)  # would block a plain open
    assert bases.debootstrap_log_tail(rootfs) == ""
    assert bases.debootstrap_log_tail(tmp_path / "nothing") == ""


def test_a_long_log_line_keeps_its_end(tmp_path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "debootstrap").mkdir(parents=True)
    Path(rootfs / bases.DEBOOTSTRAP_LOG).write_text("x" * 100_000 + " the cause\n")
    tail = bases.debootstrap_log_tail(rootfs)
    assert len(tail) == 400 and tail.endswith("x the cause")



def test_no_link_under_the_root_is_followed_and_control_characters_are_dropped(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "debootstrap.log").write_text("not the run's\n")
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    (rootfs / "debootstrap").symlink_to(elsewhere)
    assert bases.debootstrap_log_tail(rootfs) == ""
    (rootfs / "debootstrap").unlink()
    (rootfs / "debootstrap").mkdir()
    Path(rootfs / bases.DEBOOTSTRAP_LOG).write_text("\x1b[31mtar: failed\x1b[0m\r\n\x07\n")
    assert bases.debootstrap_log_tail(rootfs) == "[31mtar: failed[0m"
