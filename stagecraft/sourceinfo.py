"""Where the build's sources come from: revision and time, for the OCI labels.

``created`` is the commit time of the revision (or ``SOURCE_DATE_EPOCH`` when set), not
the wall clock, so rebuilding one revision gives the same labels and the same keys.
See https://reproducible-builds.org/docs/source-date-epoch/
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path


def _git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def revision(root: Path) -> str:
    """The git commit of ``root`` (40 hex), ``+dirty`` when tracked files changed since;
    ``unknown`` outside git."""
    rev = _git(root, "rev-parse", "HEAD")
    if not rev:
        return "unknown"
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return f"{rev}+dirty" if dirty else rev


def created(root: Path) -> str:
    """RFC 3339 UTC time: ``SOURCE_DATE_EPOCH``, else the HEAD commit time, else epoch 0."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH") or _git(root, "log", "-1", "--format=%ct")
    try:
        seconds = int(epoch)
    except ValueError:
        seconds = 0
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
