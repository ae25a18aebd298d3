"""The fault suite's reading of the suites' JUnit reports (``trials.suite_failures``): a
run's stderr gives only the counts, so a trial names the cases that failed from the
report pytest wrote, before the next run overwrites it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.faults.trials import MAX_REPORT, suite_failures


def _report(tmp_path, name: str, body: str):
    """A real JUnit report: pytest run on ``body`` (a test module), written where
    stagecraft.testing writes its reports."""
    reports = tmp_path / "state" / "test-reports"
    reports.mkdir(parents=True, exist_ok=True)
    mod = tmp_path / f"test_{name}.py"
    mod.write_text(body)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}",
                    f"--junitxml={reports / (name + '.xml')}", str(mod)],
                   cwd=tmp_path, capture_output=True, check=False, timeout=120)
    return reports / f"{name}.xml"


def test_failed_and_erring_cases_are_named_with_their_message(tmp_path):
    since = time.time() - 1
    _report(tmp_path, "one", "import pytest\n"
                             "def test_fine():\n    pass\n"
                             "def test_tmp():\n    assert [] == ['x'], 'build leftovers in /tmp: x'\n"
                             "@pytest.fixture\ndef broken():\n    raise RuntimeError('no container')\n"
                             "def test_err(broken):\n    pass\n")
    said = suite_failures(tmp_path / "state", since).splitlines()
    assert len(said) == 2, said
    assert said[0].startswith("one.xml test_one::test_tmp: ") and "build leftovers in /tmp: x" in said[0]
    assert said[1].startswith("one.xml test_one::test_err: ") and "no container" in said[1]


def test_reports_before_the_instant_and_passing_ones_say_nothing(tmp_path):
    old = _report(tmp_path, "old", "def test_bad():\n    assert False\n")
    os.utime(old, (time.time() - 60, time.time() - 60))
    since = time.time() - 1
    _report(tmp_path, "good", "def test_fine():\n    pass\n")
    assert suite_failures(tmp_path / "state", since) == ""
    assert suite_failures(tmp_path / "nothing-here", since) == ""


def test_a_report_too_large_or_not_xml_is_named_not_read(tmp_path):
    reports = tmp_path / "state" / "test-reports"
    reports.mkdir(parents=True)
    (reports / "big.xml").write_bytes(b"<" * (MAX_REPORT + 1))
    (reports / "torn.xml").write_text("<testsuites><testsuite><testcase name='a'>")
    said = suite_failures(tmp_path / "state", 0).splitlines()
    assert said[0] == f"big.xml: {MAX_REPORT + 1} bytes, not read"
    assert said[1].startswith("torn.xml: ") and len(said) == 2


def test_the_lines_are_bounded(tmp_path):
    since = time.time() - 1
    _report(tmp_path, "many", "import pytest\n@pytest.mark.parametrize('i', range(20))\n"
                              "def test_x(i):\n    assert i < 0, 'x' * 1000\n")
    said = suite_failures(tmp_path / "state", since, limit=5).splitlines()
    assert len(said) == 5 and all(len(line) < 400 for line in said)
