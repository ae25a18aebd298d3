"""Where the build's sources come from: revision and time, for the OCI labels.

``created`` is the commit time of the revision (or ``SOURCE_DATE_EPOCH`` when set), not
the wall clock, so rebuilding one revision gives the same labels and the same keys.
See https://reproducible-builds.org/docs/source-date-epoch/
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from .errors import InputError


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


# The latest time RFC 3339 (four-digit years) can write: 9999-12-31T23:59:59Z.
MAX_EPOCH = 253402300799


def created(root: Path) -> str:
    """RFC 3339 UTC time: ``SOURCE_DATE_EPOCH``, else the HEAD commit time, else epoch 0.

    ``SOURCE_DATE_EPOCH`` must be what ``date +%s`` prints (ASCII digits, seconds since
    1970-01-01 UTC; the specification asks builds to stop on a malformed value):
    anything else raises ``InputError`` instead of silently becoming 1970.
    """
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is not None and value != "":
        if not re.fullmatch(r"[0-9]{1,12}", value) or int(value) > MAX_EPOCH:
            shown = value if len(value) <= 40 else value[:40] + "..."
            raise InputError.one(f"SOURCE_DATE_EPOCH={shown!r}",
                                 "not a Unix time in whole seconds up to year 9999",
                                 "set it to the output of `date +%s` or "
                                 "`git log -1 --format=%ct`, or unset it")
        seconds = int(value)
    else:
        commit = _git(root, "log", "-1", "--format=%ct")
        seconds = int(commit) if commit.isdigit() else 0
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
