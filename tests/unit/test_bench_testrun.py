"""bench/testrun.py: a `make test` run's JUnit report, summed per test file."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.harness import ROOT

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="100.0"
 timestamp="2026-12-07T00:00:00+00:00">
<testcase classname="tests.integration.test_images" name="test_a[host]" time="60.0"/>
<testcase classname="tests.integration.test_images" name="test_b" time="20.0"><failure message="x"/></testcase>
<testcase classname="tests.unit.test_plan" name="test_c" time="5.0"><skipped message="y"/></testcase>
<testcase classname="tests.unit.test_plan.TestThing" name="test_d" time="5.0"/>
<testcase classname="" name="tests.unit.test_broken" time="0.0"><error message="collection failure"/></testcase>
</testsuite></testsuites>
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "testrun.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_seconds_per_file_and_the_slowest(tmp_path):
    (tmp_path / "r.xml").write_text(REPORT)
    proc = run(str(tmp_path / "r.xml"), "--top", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "5 tests (2 passed, 1 failure, 1 skipped, 1 error), 100 s (1.7 min)" in out
    assert "| tests/unit/test_broken.py | 0 |" in out
    assert "| tests/integration/test_images.py | 80 | 80.0 % |" in out
    assert "| tests/unit/test_plan.py | 10 | 10.0 % |" in out
    slow = out.split("slowest 2:")[1].strip().splitlines()
    assert len(slow) == 2 and "test_a[host]" in slow[0] and "(failure)" in slow[1]


def test_what_is_not_a_report_is_exit_2_in_one_line(tmp_path):
    (tmp_path / "no.xml").write_text("<x/>")
    (tmp_path / "junk.xml").write_text("not xml <")
    (tmp_path / "time.xml").write_text(REPORT.replace('time="5.0"', 'time="soon"'))
    for path in (tmp_path / "no.xml", tmp_path / "junk.xml", tmp_path / "missing.xml", tmp_path / "time.xml"):
        proc = run(str(path))
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and str(path.name) in proc.stderr
