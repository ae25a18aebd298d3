"""What one stage of one image installs according to matrix.lock (``StageLock``), for
rendering its Dockerfile and for the image's constraints. Raises ``InputError`` where the
lock does not cover the stage or was made from other inputs."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError
from .expand import ImageSpec
from .lockfile import (
    load_for,
    lock_path,
    locked_debian_entry,
    locked_entry,
    matrix_identity,
    wanted,
)
from .lockkeys import (
    apt_stage_name,
    debian_key,
    normalize,
    platforms,
    python_key,
    stage_apt,
    stage_pins,
    tool_key,
)
from .model import Matrix


@dataclass(frozen=True)
class StageLock:
    """The locked inputs of one stage of one image, as its template installs them.

    ``apt``: ``(package, version, sha256)`` of every Debian package the stage installs;
    ``python``: ``(name, version, (sha256, ...))`` of every distribution it installs;
    ``unresolved``: why its Python set could not be locked (the template then fails the
    build with that reason), else None.
    """

    apt: tuple[tuple[str, str, str], ...] = ()
    python: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    unresolved: str | None = None

    @property
    def apt_pins(self) -> list[str]:
        """``package=version`` for apt-get install."""
        return [f"{p}={v}" for p, v, _ in self.apt]

    @property
    def apt_sums(self) -> list[str]:
        """``package version sha256`` lines, what the template checks each .deb against."""
        return [f"{p} {v} {h}" for p, v, h in self.apt]

    @property
    def pins(self) -> list[str]:
        """``name==version`` of every distribution: the image's constraints."""
        return [f"{n}=={v}" for n, v, _ in self.python]

    @property
    def requirements(self) -> list[str]:
        """pip requirement lines with hashes: ``name==version --hash=sha256:...``."""
        return [f"{n}=={v} " + " ".join(f"--hash=sha256:{h}" for h in hashes)
                for n, v, hashes in self.python]



def stage_lock(matrix: Matrix, spec: ImageSpec, stage: str, platform: str = "") -> StageLock | None:
    """What ``stage`` of ``spec`` installs on ``platform`` ('' for the image's first)
    according to the matrix's lock; None when the matrix has no lock. Raises
    ``InputError`` when the lock does not cover the stage or was made from other inputs
    (matrix.yaml changed since)."""
    lock = load_for(matrix)
    if lock is None:
        return None
    where = lock_path(matrix).name
    if lock.matrix != matrix_identity(matrix):
        raise InputError.one(where, f"made for another matrix ({lock.matrix.get('repository')!r})",
                             "run `python3 build.py lock` for this matrix")
    want = wanted(matrix, [spec])
    plat = platform or platforms(spec)[0]
    apt: tuple[tuple[str, str, str], ...] = ()
    if stage_apt(spec.components, stage):
        dkey = debian_key(spec, plat)
        entry = locked_debian_entry(lock, dkey, want["debian"][dkey], where)
        recs = entry["stages"].get(apt_stage_name(spec, stage), {})
        apt = tuple((p, r["version"], r["sha256"]) for p, r in sorted(recs.items()))
    pkey = python_key(spec, stage, plat)
    if pkey is None:
        return StageLock(apt=apt)
    entry = locked_entry(lock, "python", pkey, want["python"][pkey], where)
    if "unresolved" in entry:
        return StageLock(apt=apt, unresolved=entry["unresolved"])
    pkgs = entry["packages"]
    after = want["python"][pkey]["after"]
    if after:  # only what the set adds over the one it is resolved over
        below = locked_entry(lock, "python", after, want["python"][after], where).get("packages", {})
        pkgs = {n: r for n, r in pkgs.items() if n not in below}
    if stage in ("accel", "runtime"):  # NVIDIA's wheels the stages below installed
        installed = {normalize(pin.split("==")[0]) for pin in stage_pins(spec, "cuda" if stage == "accel" else "accel")}
        pkgs = {n: r for n, r in pkgs.items() if n not in installed}
    return StageLock(apt=apt, python=tuple(
        (n, r["version"], tuple(sorted(r["files"].values()))) for n, r in sorted(pkgs.items())))


def runtime_pins(matrix: Matrix, spec: ImageSpec, platform: str = "") -> list[str]:
    """The ``name==version`` pins an image carries as its constraints
    (/opt/stagecraft/constraints.txt): the lock's runtime set when the matrix has a lock,
    else the framework's constraints, the framework itself and the entrypoint's
    requirements; and the NVIDIA wheels of the stages below. Raises ``InputError`` like
    ``stage_lock``."""
    locked = stage_lock(matrix, spec, "runtime", platform)
    below = stage_pins(spec, "accel")  # the NVIDIA wheels the cuda and accel stages installed
    if locked is not None and not locked.unresolved:
        return locked.pins + below
    fw = spec.framework
    return [*fw.get("constraints", []), f"{fw['package']}=={fw['version']}",
            *matrix.entrypoint.get("requirements", []), *below]


def tools_lock(matrix: Matrix, spec: ImageSpec, platform: str = "") -> StageLock | None:
    """The locked build tools ``spec``'s runtime stage fetches (cuobjdump, for a framework
    with ``build.fatbins``), or None when the matrix has no lock or the stage fetches none.
    Raises ``InputError`` like ``stage_lock``."""
    lock = load_for(matrix)
    if lock is None or not spec.framework.get("build", {}).get("fatbins") or "cuobjdump" not in matrix.build_tools:
        return None
    where = lock_path(matrix).name
    plat = platform or platforms(spec)[0]
    key = tool_key(spec, plat)
    entry = locked_entry(lock, "python", key, wanted(matrix, [spec])["python"][key], where)
    return StageLock(python=tuple((n, r["version"], tuple(sorted(r["files"].values())))
                                  for n, r in sorted(entry["packages"].items())))
