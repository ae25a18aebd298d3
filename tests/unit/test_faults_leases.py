"""The fault suite's tidy drops the leases an interrupted ``docker load`` left on its own
engine (tests/faults/rig.py ``stale_leases``): read from ``ctr leases ls`` as containerd
1.7 prints it, on the suite's engine (Docker 26.1.5) in session 44."""

from __future__ import annotations

import calendar
import time

from tests.faults.rig import stale_leases

LISTING = """ID                                                               CREATED AT           LABELS
102592127-ZUyw                                                   2026-12-07T20:54:34Z containerd.io/gc.expire=2026-12-08T20:54:34Z
692608336-alcn                                                   2026-12-08T00:36:32Z containerd.io/gc.expire=2026-12-09T00:36:32Z
a3ca57642d2106080d3057eb7be10122025de3dfffc51809b8cd2bb133be0adc 2026-12-07T17:08:54Z -
o1r1b56tzdhytwavm026a2oup                                        2026-12-07T20:45:03Z containerd.io/gc.flat=2026-12-07T20:45:03.663535279Z
vaqe13dbkemkmufwhr3ferqlp-view                                   2026-12-08T00:52:29Z buildkit/lease.temporary=2026-12-08T00:52:29.352907139Z,containerd.io/gc.flat=2026-12-08T00:52:29.352904952Z
"""


def _utc(text: str) -> float:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def test_only_expiring_leases_older_than_the_margin_go():
    now = _utc("2026-12-08T00:40:00")
    # The one of 00:36:32 began 208 s before: maybe the trial's own load, kept.
    assert stale_leases(LISTING, now) == ["102592127-ZUyw"]
    assert stale_leases(LISTING, now, older_than_s=60) == ["102592127-ZUyw", "692608336-alcn"]


def test_buildkits_and_unlabelled_leases_stay():
    now = _utc("2026-12-09T12:00:00")
    assert "o1r1b56tzdhytwavm026a2oup" not in stale_leases(LISTING, now)
    assert not any(i.startswith(("a3ca", "vaqe")) for i in stale_leases(LISTING, now))


def test_a_listing_that_is_not_ctrs_gives_nothing():
    assert stale_leases("ctr: failed to dial\n\n", _utc("2026-12-09T12:00:00")) == []
