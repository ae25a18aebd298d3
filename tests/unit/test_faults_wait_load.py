"""The fault suite's mid-load strike point (``Rig.wait_load``): a stage's ``docker load``
of its layout is seen when its command line is written past the logs' sizes taken before
the run, never from what an earlier run wrote."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from tests.faults.rig import Rig

LOAD = "$ tar -C /scratch/run-1/stagecraft-ctx-x/iid.oci -cf - . | /usr/local/bin/docker load\n"


def _rig(state):
    rig = SimpleNamespace(state=state)
    rig.log_sizes = lambda: Rig.log_sizes(rig)
    return rig


@pytest.fixture
def proc():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield p
    p.kill()
    p.wait()


def test_a_load_begun_after_the_sizes_were_taken_is_seen(tmp_path, proc):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "runtime-1.log").write_text("$ docker buildx build ...\n" + LOAD + "Loaded image: x\n")
    rig = _rig(tmp_path)
    before = rig.log_sizes()

    def write_later():
        time.sleep(0.3)
        with open(logs / "runtime-1.log", "a") as f:
            f.write("$ docker buildx build ...\n#5 DONE 0.8s\n")
        time.sleep(0.2)
        (logs / "label-2.log").write_text("$ docker buildx build ...\n" + LOAD)

    threading.Thread(target=write_later, daemon=True).start()
    waited = Rig.wait_load(rig, proc, before, timeout=10)
    assert waited is not None and 0.45 <= waited < 5


def test_the_second_load_is_waited_for(tmp_path, proc):
    logs = tmp_path / "logs"
    logs.mkdir()
    rig = _rig(tmp_path)
    before = rig.log_sizes()
    (logs / "runtime-1.log").write_text("$ docker buildx build ...\n" + LOAD)

    def write_later():
        time.sleep(0.4)
        (logs / "label-2.log").write_text("$ docker buildx build ...\n" + LOAD)

    threading.Thread(target=write_later, daemon=True).start()
    assert Rig.wait_load(rig, proc, before, timeout=10, nth=1) < 0.3
    assert not (logs / "label-2.log").exists()
    waited = Rig.wait_load(rig, proc, before, timeout=10, nth=2)
    assert waited is not None and waited < 5 and (logs / "label-2.log").exists()


def test_an_earlier_runs_load_and_other_lines_are_not_a_load(tmp_path, proc):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "runtime-1.log").write_text(LOAD)
    rig = _rig(tmp_path)
    before = rig.log_sizes()
    (logs / "label-2.log").write_text("$ docker buildx build --output type=oci ...\n"
                                      "# stagecraft: docker load said: tar -C x -cf - . | docker load\n")
    assert Rig.wait_load(rig, proc, before, timeout=0.5) is None


def test_a_run_that_ended_ends_the_wait(tmp_path):
    rig = _rig(tmp_path)  # no logs directory at all
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    t0 = time.monotonic()
    assert Rig.wait_load(rig, done, {}, timeout=30) is None
    assert time.monotonic() - t0 < 5
