"""Supply-chain tools from Debian 13 (trixie): oras (OCI artifacts and referrers) and
cosign (signatures and attestations), in a project tools directory.

``ensure(state_dir)`` makes ``<state>/tools/bin/{oras,cosign}`` once: apt fetches trixie's
signed package index into a private directory (checked with the host's Debian archive
keyring, as ``build.py lock`` does), ``apt-get download`` fetches the two .debs (their
hashes checked by apt against that index), and ``dpkg-deb -x`` unpacks them. Both are Go
programs that run on Debian 12. ``STAGECRAFT_ORAS`` / ``STAGECRAFT_COSIGN`` name other
binaries; ones already on PATH are used as they are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import BuildError, InputError

MIRROR = "http://deb.debian.org/debian"
SUITE = "trixie"
PACKAGES = ("oras", "cosign")


def tools_dir(state_dir: Path) -> Path:
    """Where the unpacked tools live."""
    return state_dir / "tools"


def ensure(state_dir: Path, log=lambda line: None) -> dict[str, str]:
    """Paths of ``oras`` and ``cosign``, fetching them from trixie when missing. Raises
    ``InputError`` when apt or dpkg-deb is missing, ``BuildError`` when the mirror fails."""
    found: dict[str, str] = {}
    bindir = tools_dir(state_dir) / "usr" / "bin"
    for name in PACKAGES:
        env = os.environ.get(f"STAGECRAFT_{name.upper()}")
        if env:
            found[name] = env
        elif (bindir / name).is_file():
            found[name] = str(bindir / name)
        elif shutil.which(name):
            found[name] = shutil.which(name) or name
    missing = [n for n in PACKAGES if n not in found]
    if not missing:
        return found
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise InputError.one("tools", f"{tool} is not installed",
                                 f"install {', '.join(missing)} and put them on PATH")
    from .resolve import Apt

    log(f"tools: fetching {', '.join(missing)} from Debian {SUITE}")
    with tempfile.TemporaryDirectory(prefix="stagecraft-tools-") as tmp:
        apt = Apt(Path(tmp) / "apt", MIRROR, SUITE, "amd64" if os.uname().machine == "x86_64" else "arm64")
        apt.get("update")
        proc = subprocess.run(["apt-get", *apt.opts, "download", *missing], cwd=tmp,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"apt-get download {' '.join(missing)} failed: {proc.stderr.strip()[-300:]}")
        dest = tools_dir(state_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for deb in sorted(Path(tmp).glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    for name in missing:
        if not (bindir / name).is_file():
            raise BuildError(f"{name} not found in the {SUITE} package")
        found[name] = str(bindir / name)
    return found
