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


def test_a_real_run_writes_its_cpu_timeline_and_the_report_reads_it(tmp_path):
    """A pytest run with --cpu-timeline (tests/conftest.py, as `make test` passes it):
    one line per test with the machine's counters, read back into the per-file table."""
    import json

    tests = ROOT / "tests" / "unit" / "test_bench_testrun_sample.py"
    reports = tmp_path / "reports"
    reports.mkdir()
    busy = ("def test_busy():\n    import time\n    t = time.monotonic()\n"
            "    while time.monotonic() - t < 0.6:\n        pass\n"
            "def test_idle():\n    import time\n    time.sleep(0.6)\n")
    tests.write_text(busy)
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests),
                               f"--junitxml={reports / 'pytest-20261207T000000Z.xml'}",
                               f"--cpu-timeline={reports / 'timeline-20261207T000000Z.jsonl'}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        tests.unlink()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(x) for x in (reports / "timeline-20261207T000000Z.jsonl").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["session", "test", "test", "session"]
    spun, slept = lines[1], lines[2]
    assert spun["nodeid"].endswith("::test_busy") and slept["nodeid"].endswith("::test_idle")
    for line in (spun, slept):
        assert len(line["cpu0"]) == 8 and all(b >= a for a, b in zip(line["cpu0"], line["cpu1"], strict=True))
        assert line["t1"] - line["t0"] >= 0.6
    # The spinning test kept a core busy: at least 40 of its 60 ticks (USER_HZ 100).
    assert sum(spun["cpu1"][:3]) - sum(spun["cpu0"][:3]) >= 40
    out = run(str(reports / "pytest-20261207T000000Z.xml"))
    assert out.returncode == 0, out.stderr
    assert f"of {lines[0]['cores']} cores busy on average while tests ran" in out.stdout
    row = next(x for x in out.stdout.splitlines() if "test_bench_testrun_sample.py" in x)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 5 and float(cells[3]) > 0 and cells[4].endswith("%")


def test_a_report_without_a_timeline_has_no_cpu_columns_and_a_bad_timeline_is_exit_2(tmp_path):
    (tmp_path / "pytest-1.xml").write_text(REPORT)
    proc = run(str(tmp_path / "pytest-1.xml"))
    assert proc.returncode == 0 and "cores busy" not in proc.stdout
    (tmp_path / "timeline-1.jsonl").write_text('{"event": "test", "nodeid": "a.py::t", "cpu0": [1]}\n')
    proc = run(str(tmp_path / "pytest-1.xml"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "timeline-1.jsonl:1: not a CPU timeline line" in proc.stderr and len(proc.stderr.splitlines()) == 1
    (tmp_path / "other.jsonl").write_text('{"event": "session", "when": "start", "t": 1, "cpu": [], "cores": 2}\n')
    proc = run(str(tmp_path / "pytest-1.xml"), "--timeline", str(tmp_path / "other.jsonl"))
    assert proc.returncode == 0 and "no counters recorded" in proc.stdout
    assert "| tests/integration/test_images.py | 80 | 80.0 % | - | - |" in proc.stdout


def test_cpu_counters_are_read_bounded_and_only_from_the_cpu_line(tmp_path):
    from tests.cputimeline import MAX_READ, cpu_ticks

    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 100 7 0 2 0 0 0\ncpu0 5 0 2 50 3 0 1 0 0 0\n")
    assert cpu_ticks(str(stat)) == [10, 1, 5, 100, 7, 0, 2, 0]
    for text in ("intr 1 2 3\n", "cpu 1 2\n", "cpu a b c d e f g h\n", "", "cpu " + "9" * (2 * MAX_READ)):
        stat.write_text(text)
        assert cpu_ticks(str(stat)) == [], text[:40]
    assert cpu_ticks(str(tmp_path / "missing")) == []
    assert len(cpu_ticks()) == 8  # this machine's own


def test_a_timeline_that_cannot_be_written_warns_and_never_stops_the_run(tmp_path):
    """/dev/full: every write fails with ENOSPC (a full disk); the timeline warns once,
    ends, and raises nothing, its close included."""
    import warnings
    from pathlib import Path

    from tests.cputimeline import Timeline

    timeline = Timeline(Path("/dev/full"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        timeline.session("start")
        timeline.test_start("a.py::t")
        timeline.test_end("a.py::t")
        timeline.session("end")
        timeline.close()
    assert len(seen) == 1 and "no more lines" in str(seen[0].message)
