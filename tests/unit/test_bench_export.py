"""bench/export.py's reading of BuildKit 0.13 plain progress (lines as a modern-engine
build of 2.6.2-cpu's runtime stage printed them, shortened)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_export", ROOT / "bench/export.py")
assert _spec and _spec.loader
export = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export)

LOG = """\
#5 [2/9] RUN apt-get update  && printf '%s\\n' 'libbsd0 0.11.7-2 bb31'
#5 DONE 15.2s
#9 [5/9] RUN --mount=type=secret,id=pip-ca,required=false     if [ -s /run/secrets/pip-ca ]
#9 10.22   Downloading httpcore-1.0.9-py3-none-any.whl (78 kB)
#9 DONE 41.1s
#10 [6/9] COPY entrypoint/ /opt/stagecraft/entrypoint/
#10 DONE 0.4s
#14 exporting to oci image format
#14 exporting layers
#14 exporting layers 30.8s done
#14 rewriting layers with source-date-epoch 1783764997 (2026-07-11 10:16:37 +0000 UTC)
#14 rewriting layers with source-date-epoch 1783764997 (2026-07-11 10:16:37 +0000 UTC) 41.1s done
#14 exporting manifest sha256:7bbcfe2d978bdf4565d49db5bbdb7a616165cea3dbd381660d80c296a43c19c0 0.0s done
#14 DONE 83.5s
"""


def timed(text: str) -> list[tuple[float, str]]:
    return [(float(i), line) for i, line in enumerate(text.splitlines(keepends=True))]


def test_steps_phases_and_when_the_last_step_ended():
    got = export.parse(timed(LOG))
    assert sorted(round(s, 1) for s in got["steps"].values()) == [0.4, 15.2, 41.1]
    assert got["phases"]["exporting layers"] == 30.8
    assert got["phases"]["rewriting layers with source-date-epoch"] == 41.1
    assert got["phases"]["exporter total"] == 83.5
    assert got["last_step_at"] == 6.0  # the COPY's DONE, the 7th line
    assert got["error"] is None


def test_a_failed_step_is_reported_and_nothing_is_counted_as_done():
    got = export.parse(timed("#6 [3/4] RUN false\n#6 ERROR: process \"false\" did not complete\n"))
    assert got["steps"] == {} and got["last_step_at"] == 0.0
    assert got["error"].startswith("[3/4] RUN false: ERROR")


def test_table_ratios_against_the_plain_export():
    runs = [{"stage": "runtime", "variant": v, "steps": {"a": 40.0}, "phases": {}, "load_s": 0.0,
             "export_s": e} for v, e in (("plain", 20.0), ("layout", 50.0))]
    rows = export.table(runs).splitlines()
    assert rows[2].endswith("| 20.0 | 1.0 |") and rows[3].endswith("| 50.0 | 2.5 |")
