"""Helpers of the integration tests: the matrix, what is buildable here, the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from stagecraft.expand import expand
from stagecraft.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = expand(MATRIX)


def _reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not here"
        return False


def buildable_here() -> tuple[list[str], dict[str, str]]:
    """Tags to build on this host, and the skipped ones with why."""
    tags, skipped, seen = [], {}, {}
    for spec in SPECS:
        url = spec.framework.get("index_url")
        if url:
            ok = seen.setdefault(url, _reachable(url))
            if not ok:
                skipped[spec.tag] = f"{url} is not reachable from this host"
                continue
        tags.append(spec.tag)
    return tags, skipped


def run_cli(*args: str, timeout: float = 3600, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run `python build.py ARGS` as a user would; returns the completed process."""
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


