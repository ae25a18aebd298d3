"""The Jupyter images' HEALTHCHECK, after stagecraft-health: does the server answer?

Usage: stagecraft-jupyter-health [--timeout SECONDS]

Reads the newest server runtime file (``jpserver-PID.json``, written by jupyter_server at
start) and sends GET ``<base_url>api`` to the port and scheme it names: the one endpoint
that needs no token (it returns the server's version), so the check never has to know
the secret, and ``--port`` or ``--ServerApp.base_url`` in a custom CMD are followed.

Where the runtime file is: ``jupyter_core.paths.jupyter_runtime_dir()`` of the health
check's own environment (the container's), and the directory the entrypoint chose when
$HOME was not writable (entrypoint.homeless: beside the start-up report, which
entrypoint.runtime.find locates). A HEALTHCHECK process does not inherit the
entrypoint's changes, so it applies the same rule rather than a variable.

Exit 0 healthy, 1 unhealthy (Docker's HEALTHCHECK convention; a bad option too). One line
on stdout: Docker keeps it in ``docker inspect``'s State.Health.Log.
"""
from __future__ import annotations

import glob
import json
import os
import sys

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

DEFAULT_TIMEOUT_S = 4.0
MAX_FILE = 1 << 16  # bytes read of a runtime file (one is a few hundred)


def runtime_dirs(default_dir: str, report_path: str | None) -> list[str]:
    """Directories to search (pure): jupyter_core's for this environment, then the one
    beside the start-up report at ``report_path`` (entrypoint.homeless), without repeats."""
    from entrypoint.homeless import runtime_dir_beside

    out = [default_dir]
    if report_path:
        beside = runtime_dir_beside(report_path)
        if os.path.normpath(beside) != os.path.normpath(default_dir):
            out.append(beside)
    return out


def newest_server(dirs: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """The newest ``jpserver-*.json`` in ``dirs`` (by mtime) that parses as a JSON object
    with an integer ``port``: (path, content); None when there is none."""
    found = []
    for d in dirs:
        for p in glob.glob(os.path.join(glob.escape(d), "jpserver-*.json")):
            try:
                found.append((os.path.getmtime(p), p))
            except OSError:
                continue
    for _, p in sorted(found, reverse=True):
        try:
            with open(p, "rb") as f:
                data = json.loads(f.read(MAX_FILE))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("port"), int):
            return p, data
    return None


def api_url(server: Mapping[str, Any]) -> str:
    """``http[s]://127.0.0.1:PORT<base_url>api`` for a runtime file's content."""
    base = str(server.get("base_url") or "/")
    if not base.endswith("/"):
        base += "/"
    return f"{'https' if server.get('secure') else 'http'}://127.0.0.1:{server['port']}{base}api"


def check(env: Mapping[str, str], default_dir: str, timeout_s: float) -> tuple[int, str]:
    """(exit code, line): 0 when the newest server answers ``api`` within ``timeout_s``."""
    import ssl
    import urllib.request

    from entrypoint import runtime

    dirs = runtime_dirs(default_dir, runtime.find(env))
    found = newest_server(dirs)
    if found is None:
        return 1, f"unhealthy: no Jupyter server runtime file in {' or '.join(dirs)}"
    path, server = found
    url = api_url(server)
    try:
        # the server's own certificate (often self-signed) on 127.0.0.1: not verified
        with urllib.request.urlopen(url, timeout=timeout_s, context=ssl._create_unverified_context()) as r:
            version = json.loads(r.read(MAX_FILE)).get("version", "?")
    except Exception as exc:  # noqa: BLE001 - any failure is "unhealthy", in one line
        return 1, f"unhealthy: {url} ({path}): {type(exc).__name__}: {exc}"
    return 0, f"healthy: Jupyter server {version} answers {url}"


def main(argv: Sequence[str] | None = None) -> int:
    """The command; see the module docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    timeout = DEFAULT_TIMEOUT_S
    if args[:1] == ["--timeout"] and len(args) == 2:
        try:
            timeout = float(args[1])
        except ValueError:
            timeout = -1.0
        args = [] if timeout > 0 else args
    if args:
        print(f"unhealthy: bad arguments {args!r}; usage: stagecraft-jupyter-health [--timeout SECONDS > 0]")
        return 1
    from jupyter_core.paths import jupyter_runtime_dir

    code, line = check(os.environ, jupyter_runtime_dir(), timeout)
    print(line)
    return code
