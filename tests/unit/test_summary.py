"""The notes under a build's summary: which size it shows, RUN steps, caches. Pure."""

from __future__ import annotations

from stagecraft.buildreport import BuildReport, ImageResult, StageResult
from stagecraft.summary import summary_notes


def _report(kind: str, cache_states: list[str], warnings: list[str]) -> BuildReport:
    r = BuildReport(warnings=warnings)
    for n, state in enumerate(cache_states):
        r.stages[str(n)] = StageResult(str(n) * 64, "runtime", "built", run_executed=1,
                                       run_cached=2, cache=state)
    r.stages["x"] = StageResult("x" * 64, "base", "cached")
    r.images.append(ImageResult("t", "r:t", [], "built", size=1, size_kind=kind))
    return r


def test_the_summary_says_which_size_it_shows():
    assert summary_notes(_report("unpacked", [], []))[0].startswith("* size: unpacked")
    assert summary_notes(_report("compressed", [], []))[0].startswith("* size: compressed")


def test_caches_not_written_are_counted_and_every_warning_repeated():
    notes = summary_notes(_report("compressed", ["written", "not written: registry: refused"],
                                  ["runtime@1: cache not written: registry: refused"]))
    assert "RUN steps: 2 ran, 4 from cache" in notes
    assert ("build cache: 1 stage(s) written, 1 NOT written (the images are built and tagged "
            "all the same)") in notes
    assert notes[-2:] == ["1 warning(s):", "  runtime@1: cache not written: registry: refused"]


def test_no_cache_options_no_cache_line():
    assert not any(n.startswith("build cache") for n in summary_notes(_report("unpacked", ["", ""], [])))
