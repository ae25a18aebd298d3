"""Platforms (``os/arch`` as OCI image indexes and ``docker --platform`` name them): the
table of known ones, the host's, and whether this host can run another one. Pure, except
``host_platform`` (reads ``platform.machine()``) and ``emulation`` (reads binfmt_misc).

Names follow the OCI image-index ``platform`` object (``linux/amd64``, ``linux/arm64``;
https://github.com/opencontainers/image-spec/blob/main/image-index.md), the Debian
architecture is dpkg's (``dpkg --print-architecture``), ``machine`` is ``uname -m``, and
``qemu`` the binfmt_misc entry Debian's qemu-user-static registers for it
(/usr/lib/binfmt.d/qemu-<name>.conf).
"""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass
from pathlib import Path

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
BINFMT_CONF_DIR = Path("/usr/lib/binfmt.d")


@dataclass(frozen=True)
class Platform:
    """One platform: ``name`` (``linux/arm64``), ``arch`` (OCI/Go: ``arm64``), ``deb``
    (Debian architecture), ``machine`` (``uname -m``), ``qemu`` (binfmt entry name)."""

    name: str
    arch: str
    deb: str
    machine: str
    qemu: str


KNOWN: dict[str, Platform] = {p.name: p for p in (
    Platform("linux/amd64", "amd64", "amd64", "x86_64", "x86_64"),
    Platform("linux/arm64", "arm64", "arm64", "aarch64", "aarch64"),
    Platform("linux/ppc64le", "ppc64le", "ppc64el", "ppc64le", "ppc64le"),
    Platform("linux/s390x", "s390x", "s390x", "s390x", "s390x"),
)}
_BY_MACHINE = {p.machine: p for p in KNOWN.values()} | {"arm64": KNOWN["linux/arm64"]}
# Spellings people type for the same platform.
_ALIASES = {"linux/arm64/v8": "linux/arm64", "linux/x86_64": "linux/amd64",
            "linux/aarch64": "linux/arm64", "amd64": "linux/amd64", "arm64": "linux/arm64"}


def normalise(name: str) -> str:
    """``"linux/arm64/v8"`` -> ``"linux/arm64"``; an unknown name comes back unchanged."""
    n = name.strip().lower()
    return _ALIASES.get(n, n)


def get(name: str) -> Platform:
    """The known platform ``name`` (normalised). Raises ``KeyError`` for an unknown one."""
    return KNOWN[normalise(name)]


def host_platform() -> str:
    """This host's platform (``linux/amd64`` on x86_64); ``linux/<uname -m>`` when the
    table lacks it."""
    machine = _platform.machine()
    p = _BY_MACHINE.get(machine)
    return p.name if p else f"linux/{machine}"


def emulation(name: str, binfmt_dir: Path = BINFMT_DIR) -> str:
    """'' when this host runs programs of platform ``name`` (its own, or a qemu entry
    registered and enabled in binfmt_misc), else the reason it cannot, one sentence."""
    p = get(name)
    if p.name == host_platform():
        return ""
    if not (binfmt_dir / "status").exists():
        return (f"{p.name} needs emulation on this {_platform.machine()} host and binfmt_misc "
                f"is not mounted ({binfmt_dir})")
    entry = binfmt_dir / f"qemu-{p.qemu}"
    try:
        text = entry.read_text()
    except OSError:
        return f"{p.name} needs emulation: qemu-{p.qemu} is not registered in {binfmt_dir}"
    if not text.startswith("enabled"):
        return f"{p.name} needs emulation: {entry} is disabled"
    return ""
