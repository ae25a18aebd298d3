"""Bit-for-bit rebuilds, for real (issue 11): ``build.py verify-reproducible``.

- On the modern engine (Docker 26), 2.6.2-cpu is built (as the image suites build it:
  debootstrap from the lock, apt with checked .debs, pip --require-hashes; reused when
  they did), then its base is bootstrapped again and every stage rebuilt with no cache
  (`--no-cache`: every step runs again) on the same parent: every digest is the same.
  About 4 minutes when the image is built, 7 when not.
- The small `six` matrix has no lock, so no SOURCE_DATE_EPOCH: the check fails (exit 1)
  and names what differs (file times, the config's dates), with the full list on disk;
  the second images' names are gone afterwards.
- Every stage was exported as its steps left it (they fix their file times), with no
  rewrite pass (stagecraft/steptimes.py), as each second build's log says.
- Docker 20.10 (the host engine here) dates the history with the build's time: exit 2,
  saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration import engines
from tests.integration.harness import six_project

RUN_TIMEOUT = 2400


def _verify(engine: engines.TestEngine, *args: str, cwd: Path | None = None):
    proc = engine.cli("verify-reproducible", "--json", *args, timeout=RUN_TIMEOUT,
                      **({"cwd": cwd} if cwd else {}))
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc, report


@pytest.fixture(scope="module")
def runner() -> engines.TestEngine:
    try:
        return engines.get("modern")
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `bash scripts/modern-engine.sh up` as root")


@pytest.mark.modern
def test_2_6_2_cpu_rebuilds_to_the_same_digests(runner, tmp_path):
    proc, report = _verify(runner, "2.6.2-cpu", "--platform", "linux/amd64",
                           "--state-dir", str(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert report["reproducible"] is True
    checks = {c["stage"]: c for c in report["stages"]}
    assert set(checks) == {"base-image", "base", "runtime", "label"}, list(checks)
    for c in checks.values():
        assert c["same"] and c["first"] == c["second"] and c["first"].startswith("sha256:"), c
    assert "reproducible: every stage rebuilt to the same digest (4 checked" in proc.stderr
    # The steps fixed every file time: no stage needed BuildKit's rewrite pass, and the
    # check before the load said so (stagecraft/steptimes.py).
    for stage in ("base", "runtime", "label"):
        log = Path(checks[stage]["log"]).read_text()
        assert "exported as the steps left it (no rewrite pass)" in log, stage
        assert "rewrite-timestamp=true" not in log and "exporting again" not in log, stage
    # The image the tag names is the one both builds gave.
    final = runner.client().api.inspect_image("stagecraft/paddle:2.6.2-cpu")["Id"]
    assert final == checks["label"]["first"]
    assert not [t for i in runner.client().images.list() for t in i.tags
                if t.startswith("stagecraft-verify/")]


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> Path:
    return six_project(tmp_path_factory.mktemp("six-repro"), "stagecraft-it/six-repro")


@pytest.mark.modern
def test_without_a_lock_the_differences_are_named(runner, six):
    state = six.parent / "state"
    proc, report = _verify(runner, "--matrix", str(six), "1.16.0-cpu", "--state-dir", str(state),
                           cwd=six.parent)
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert report["reproducible"] is False
    assert "no matrix.lock" in proc.stderr and "SOURCE_DATE_EPOCH" in proc.stderr
    assert "1.16.0-cpu: NOT reproducible:" in proc.stderr
    runtime = next(c for c in report["stages"] if c["stage"] == "runtime")
    assert not runtime["same"] and runtime["first"] != runtime["second"]
    assert any(": mtime " in line for line in runtime["differences"]), runtime["differences"]
    assert "image config created: differs" in runtime["differences"]
    details = Path(runtime["details"][0])
    assert details.is_file() and len(details.read_text().splitlines()) >= len(runtime["differences"])
    assert not [t for i in runner.client().images.list() for t in i.tags
                if t.startswith("stagecraft-verify/")]


@pytest.mark.skipif("host" not in engines.selected(), reason="the host engine is not tested in this run")
def test_docker_20_10_says_why_not():
    proc = engines.get("host").cli("verify-reproducible", "2.6.2-cpu", timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: verify-reproducible 2.6.2-cpu: impossible here: Docker 20.10")
    assert "rewrite-timestamp" in line and "Docker 25+" in line
