"""The last line of a build that failed names its first cause (issue 24: what a user
reads last after a fault), and the suite containers' labels (stagecraft/testing.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from stagecraft.buildreport import BuildReport, ImageResult
from stagecraft.containers import boot_id
from stagecraft.layoutload import _last_line
from stagecraft.pipeline.buildrun import failure_line
from stagecraft.testing import TestResult


def _img(tag: str, status: str, error: str = "") -> ImageResult:
    return ImageResult(tag, f"r/x:{tag}", [], status, error=error)


def test_a_failed_image_comes_first_with_its_error():
    report = BuildReport(images=[_img("a", "built"), _img("b", "failed", "stage runtime: no space left on device")])
    assert failure_line(report, {}, None) == (
        "failed: b: stage runtime: no space left on device; no name of it was moved")


def test_failed_suites_then_an_unfinished_push_then_nothing():
    report = BuildReport(images=[_img("a", "built")])
    t = TestResult("a", "sha256:1", False, {"failed": 6, "passed": 19}, 1.0, [], "", "")
    assert failure_line(report, {"a": t}, None) == (
        "failed: the suites of a did not pass ({'failed': 6, 'passed': 19}); no name of it was moved")
    assert failure_line(report, {}, {"ok": False}).startswith("failed: the push did not finish")


def test_a_push_that_failed_ends_on_its_first_cause():
    """Fault suite seed 20261317, trial 96: the engine (and the registry inside its
    container) killed while a `build --push` signed; the last line was "the push did not
    finish (above: ...)", which named nothing."""
    report = BuildReport(images=[_img("a", "built")])
    signing = {"ok": False, "error": "signing r/x@sha256:1: cosign sign: connection refused", "images": []}
    assert failure_line(report, {}, signing) == (
        "failed: signing r/x@sha256:1: cosign sign: connection refused; run push again to resume")
    refs = {"ok": False, "error": "", "images": [
        {"push": {"ref": "reg/x:a", "status": "pushed", "error": ""},
         "aliases": [{"ref": "reg/x:1", "status": "failed", "error": "HTTP 500 on upload"}]}]}
    assert failure_line(report, {}, refs) == "failed: reg/x:1: HTTP 500 on upload; run push again to resume"
    assert failure_line(report, {}, None) == ""  # only skipped images: said by the caller


def test_boot_id_names_this_boot_and_mount_namespace():
    boot, _, ns = boot_id().rpartition("/")
    assert len(boot) == 36 and ns == str(os.stat("/proc/self/ns/mnt").st_ino)


def test_a_failed_load_says_what_docker_load_said_last(tmp_path):
    from stagecraft.layoutload import _last_line

    log = tmp_path / "load.log"
    log.write_bytes(b"x" * 10_000 + b"\nLoading layer 1/2\nwrite /var/lib/docker/tmp/x: no space left on device\n\n")
    assert _last_line(log) == ": write /var/lib/docker/tmp/x: no space left on device"
    assert _last_line(tmp_path / "none.log") == ""


def test_a_long_error_keeps_its_end():
    """The fault suite's real project (seed 20261374): docker load's "write
    /var/lib/docker/containerd/...: no space left on device" was cut before its cause,
    and the last line cut again inside the log's path."""
    cause = ("failed to unpack loaded image: failed to extract layer sha256:" + "c" * 64 + ": write /var/lib/docker/"
             "containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/" + "9" * 40 + "/fs/x: "
             "no space left on device")
    error = f"loading the built image failed (docker load exit 1, tar exit 0: {cause}); log: /state/logs/r.log"
    line = failure_line(BuildReport(images=[_img("b", "failed", error)]), {}, None)
    assert line.startswith("failed: b: loading the built image failed") and "..." in line
    assert line.endswith("no space left on device); log: /state/logs/r.log; no name of it was moved")
    assert len(line) == len("failed: b: ") + 300 + len("; no name of it was moved")
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "load.log"
        log.write_text(f"loading\n{cause}\n")
        said = _last_line(log)
    assert said.startswith(": failed to unpack loaded image") and said.endswith("no space left on device")
    assert len(said) == 2 + 200


def test_an_error_of_several_lines_is_one_last_line():
    """A tool's stderr (apt's, several lines) in an image's error: the run's last line
    stays one line (review)."""
    report = BuildReport(images=[_img("b", "failed", "apt-get failed:\nE: Unable to locate package x\n")])
    line = failure_line(report, {}, None)
    assert "\n" not in line and line.startswith("failed: b: apt-get failed:")
    assert "E: Unable to locate package x" in line
