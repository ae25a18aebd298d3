"""A snapshot directory an engine's crash left behind, and the one request it costs.

containerd's overlayfs snapshotter (the store of Docker's containerd image store, and of
BuildKit on it) makes a snapshot's directory under a temporary name, ``new-<digits>``,
and renames it to the snapshot's id inside the metadata transaction that records the
id (containerd ``snapshots/overlay/overlay.go``, ``createSnapshot``). An engine killed
between that rename and the commit leaves the directory on disk while its id was never
recorded, so the next snapshot gets the same id and its rename fails::

    failed to rename: rename <root>/snapshots/new-2475723895 <root>/snapshots/985: file exists

The failing call removes the directory at the id as it unwinds (the same function's
deferred clean-up), and only one write transaction runs at a time (bbolt), so a crash
leaves at most one such directory: the same request made once more succeeds. Seen here
on Docker 26.1.5 with containerd 1.7.24 for ``docker create``, ``docker load`` and a
BuildKit build (each failed once with these words, then worked), and by the fault suite
(a CI run's seed 1796663260: the engine killed mid-push, the next run's first request
refused with them).

``said(*texts)`` finds the words in an engine's answer; ``build_met(lines)`` in a failed
build's output, where only BuildKit's own error line counts (a step may print anything);
``once_more(fn)`` makes a docker SDK request a second time when its first answer was
this. The build and ``docker load`` paths check their output and run once more
themselves (``engine.Engine.build``, ``layoutload``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from . import retry
from .retry import RetryPolicy

T = TypeVar("T")

STALE_RE = re.compile(r"failed to rename: rename \S*/snapshots/new-\d+ \S*/snapshots/\d+: file exists")
# BuildKit's own error line, the words its end: "#1 ERROR: failed to prepare ...: <words>:
# unknown" or "ERROR: failed to solve: ...: <words>: unknown". A step's output comes as
# "#7 0.41 ...", and a failed step's last line ends "did not complete successfully: exit
# code: N", so neither is taken for it whatever the step printed.
BUILD_RE = re.compile(r"^(?:#\d+ )?ERROR: .*" + STALE_RE.pattern + r"(?:: unknown)?$")
WHY = ("the engine's snapshot store held a directory at a new snapshot's id (what a crash of the "
       "engine leaves; containerd removes it as the request fails): trying once more")
# Once more, at once: the failed request itself removed the directory.
ONCE_MORE = RetryPolicy(attempts=2, base_s=0)


def said(*texts: str) -> bool:
    """Whether any of ``texts`` (an error's text, lines of a build's or ``docker load``'s
    output) carries the snapshotter's words for a directory left at a new snapshot's id
    (module docstring)."""
    return any(STALE_RE.search(t) for t in texts)


def build_met(lines: list[str]) -> bool:
    """Whether one of a failed build's last 20 output lines (``--progress=plain``) is
    BuildKit's error for a directory at a new snapshot's id (``BUILD_RE``)."""
    return any(BUILD_RE.match(ln.strip()) for ln in lines[-20:])


def once_more(fn: Callable[[], T]) -> T:
    """``fn()`` (a docker SDK request that may make a snapshot: creating a container,
    loading or pulling an image), made a second time when the engine refused the first
    with the snapshotter's words (``said``): an ``APIError``, or the SDK's error for a
    stream that ended in them (``ImageLoadError`` of ``images.load``). Raises what ``fn``
    raises: any other error at once, these words the second time."""
    import docker.errors

    def stale(exc: BaseException) -> bool:
        return isinstance(exc, docker.errors.DockerException) and said(str(exc))

    return retry.call(fn, ONCE_MORE, stale)[0]
