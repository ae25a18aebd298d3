"""The fault suite's CI subset (issue 24): one trial of each of the five fault kinds
(tests/faults: a signal, the engine killed, the registry failing, a full disk, two runs
at once) on the suite's own engine, each checked against every invariant, then the next
run checked. The seed is drawn from the clock and printed (rerun one with
``STAGECRAFT_FAULT_SEED``); ``make faults`` runs the long suite (500 trials)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.integration.harness import ROOT

pytestmark = [pytest.mark.docker]


def test_one_fault_of_each_kind_breaks_no_invariant(tmp_path):
    seed = os.environ.get("STAGECRAFT_FAULT_SEED") or str(int(time.time()))
    out = tmp_path / "faults.jsonl"
    proc = subprocess.run([sys.executable, "-m", "tests.faults", "--faults", "5", "--seed", seed, "--cold-base", "0",
                           "--out", str(out), "--work", str(tmp_path / "work")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    print(proc.stdout)
    assert proc.returncode == 0, f"seed {seed}:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert len(out.read_text().splitlines()) == 5
