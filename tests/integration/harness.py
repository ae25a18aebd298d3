"""Helpers of the integration tests: the matrix, what is buildable here, the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stagecraft.cabundle import find_ca_bundle
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.preflight import unreachable

ROOT = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = expand(MATRIX)


def buildable_here() -> tuple[list[str], dict[str, str]]:
    """Tags to build on this host, and the skipped ones with why (the builder's own
    preflight: a framework index this host cannot reach)."""
    skipped = unreachable(SPECS, find_ca_bundle())
    return [s.tag for s in SPECS if s.tag not in skipped], skipped


# Python code run in the child before its command: SIGINT, SIGTERM and SIGQUIT at their
# default dispositions and unblocked, then exec (same process, same pid). Kept across
# exec, a default SIGINT makes the Python it starts install its KeyboardInterrupt handler.
_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT))\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n")


def with_default_signals(argv: list[str]) -> list[str]:
    """``argv`` started so that the signals a test sends it reach it as a terminal's
    would, whatever started the test run: a shell that starts a job in the background
    (``cmd &`` in a script, ``nohup``) gives it SIGINT (and SIGQUIT) ignored, every child
    inherits that, and Python then installs no KeyboardInterrupt handler, so a Ctrl-C
    test would see exit 1 or 0 instead of 130 (issue 22, item 7). Returns a new argv: a
    small Python wrapper that resets SIGINT, SIGTERM and SIGQUIT to their defaults,
    unblocks them and execs ``argv`` in the same process (``Popen(...).pid`` is the
    command's; ``start_new_session``/``killpg`` work as before). Every test that sends a
    signal to a child starts that child through this (no ``preexec_fn``: it is unsafe
    in a process with threads)."""
    return [sys.executable, "-c", _DEFAULT_SIGNALS, *argv]


def run_cli(*args: str, timeout: float = 3600, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run `python build.py ARGS` as a user would; returns the completed process."""
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def six_project(root: Path, repository: str) -> Path:
    """A project of the small `six` matrix (tests/unit/minimal_matrix.py: a real Debian
    base, real apt and pip) under ``root``, its images named ``repository``: the copied
    paths as real files, the suites linked; returns its matrix.yaml."""
    import shutil

    from tests.unit.minimal_matrix import MINIMAL

    caches = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("templates", "entrypoint", "probes"):
        shutil.copytree(ROOT / name, root / name, ignore=caches)
    (root / "tests").symlink_to(ROOT / "tests")
    matrix = root / "matrix.yaml"
    matrix.write_text(MINIMAL.replace("repository: example/fw", f"repository: {repository}"))
    return matrix


class SocketRelay:
    """A unix socket relaying to the host engine's: DOCKER_HOST for a run whose engine
    then goes away (``stop()`` closes the socket and every connection through it)."""

    def __init__(self, path: Path):
        import socket
        import threading

        host = os.environ.get("DOCKER_HOST", "")  # the engine the tests' client uses
        self.target = host[len("unix://"):] if host.startswith("unix://") else "/var/run/docker.sock"
        self.path, self.conns, self.threading = path, [], threading
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(str(path))
        self.srv.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX)
            u.connect(self.target)
            self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                self.threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass

    def stop(self) -> None:
        import socket

        self.srv.close()
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
