"""`build.py doctor` on each engine: what it says each one can do is what buildx does."""

from __future__ import annotations

import json

CAPS = ("cache export", "cache import", "multi-platform", "OCI output", "attestations")


def test_doctor_reports_engine_buildkit_path_and_capabilities(engine):
    proc = engine.cli("doctor", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    caps = {c["name"]: c for c in report["capabilities"]}
    assert tuple(caps) == CAPS, caps
    for c in caps.values():
        assert c["ok"] or c["detail"], f"{c['name']} missing without a reason"
    if engine.modern:
        assert report["engine"]["version"].startswith("26.1"), report["engine"]
        assert report["engine"]["containerd_store"] is True
        assert report["buildkit"]["version"] == "0.13", report["buildkit"]
        assert "buildx 0.13.1" in report["build_path"] and "docker driver" in report["build_path"]
        assert all(c["ok"] for c in caps.values()), caps
    else:  # this project's host engine: Debian 12's 20.10 through the classic builder
        assert report["buildkit"]["version"] == "0.8", report["buildkit"]
        assert not caps["cache export"]["ok"] and "containerd image store" in caps["cache export"]["detail"]
    text = engine.cli("doctor", timeout=120).stdout
    for name in CAPS:
        assert name in text, text


def test_doctor_says_whether_builds_can_be_reproducible(engine):
    """On Docker 20.10 bit-for-bit reproducible builds are impossible (BuildKit 0.8 has no
    rewrite-timestamp); the modern engine can."""
    report = json.loads(engine.cli("doctor", "--json", timeout=120).stdout)
    if engine.modern:
        assert report["reproducible"].startswith("yes"), report["reproducible"]
    else:
        assert report["reproducible"].startswith("impossible here: Docker 20.10"), report["reproducible"]
        assert "rewrite-timestamp" in report["reproducible"]
    assert "reproducible" in engine.cli("doctor", timeout=120).stdout
