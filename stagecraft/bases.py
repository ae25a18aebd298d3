"""Base images: pulled by digest, or bootstrapped locally with debootstrap.

``base_image(component, source)`` is pure: it decides the reference and identity of the
base a component asks for. ``ensure_base(engine, base)`` makes it exist in the engine,
once per distinct input: a bootstrapped base is named by the hash of its inputs (suite,
mirror, variant, extra packages, architecture), so it is made once and reused; a pulled
base is pinned by digest.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform as _platform
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import imagetransfer, platforms
from .errors import BuildError, InputError

if TYPE_CHECKING:
    from .engine import Engine

BASE_REPOSITORY = "stagecraft-base"
# v2: imported through BuildKit with SOURCE_DATE_EPOCH where the engine rewrites timestamps.
BOOTSTRAP_VERSION = "stagecraft-bootstrap-v2"
_DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "ppc64le": "ppc64el"}


@dataclass(frozen=True)
class BaseImage:
    """The image the first stage builds ``FROM``: ``ref`` to use in FROM, ``identity``
    (what the first stage's key hashes), ``source`` ("pull" or "bootstrap") and, for a
    bootstrap, its debootstrap inputs."""

    name: str
    source: str
    ref: str
    identity: str
    suite: str = ""
    mirror: str = ""
    variant: str = ""
    include: tuple[str, ...] = ()
    arch: str = ""
    platform: str = ""
    # matrix.lock's packages of this base: (package, version, sha256), sorted; () unlocked.
    locked: tuple[tuple[str, str, str], ...] = ()
    # SOURCE_DATE_EPOCH (the lock's InRelease date) of the rootfs and of every stage built
    # on this base; 0: none.
    source_date_epoch: int = 0

    @property
    def foreign(self) -> bool:
        """True when the base is for a platform other than the host's (emulated here)."""
        return bool(self.platform) and self.platform != platforms.host_platform()


def host_arch() -> str:
    """Debian architecture name of this host (``amd64``, ``arm64``)."""
    machine = _platform.machine()
    return _DEB_ARCH.get(machine, machine)


def base_image(component: dict[str, Any], source: str | None = None,
               platform: str = "", locked: dict[str, dict[str, str]] | None = None,
               source_date_epoch: int = 0) -> BaseImage:
    """The base a ``components.base`` entry asks for; ``source`` overrides its own;
    ``platform`` (``linux/arm64``; '' for the host's) picks the Debian architecture a
    bootstrap makes and the platform a pulled index resolves to.

    ``locked``: matrix.lock's packages of this base (``{package: {"version", "sha256"}}``);
    a bootstrapped base's identity covers them, so a lock upgrade makes a new base, and
    the bootstrap checks that it installed exactly those. ``source_date_epoch`` (the
    lock's InRelease date) makes the rootfs reproducible: see ``bootstrap_rootfs``.

    Raises ``InputError`` when the chosen source has no section in the entry.
    """
    src = source or component["source"]
    name = component["name"]
    if src not in component:
        raise InputError.one(f"base {name}", f"no {src!r} section for this base",
                             f"add components.base.{name}.{src} or choose another --base-source")
    host = platforms.host_platform()
    if src == "pull":
        ref = component["pull"]["image"]
        # One index digest serves every platform: the platform is part of the identity,
        # and so is the epoch the stages on it are built with.
        epoch = f" SOURCE_DATE_EPOCH={source_date_epoch}" if source_date_epoch else ""
        return BaseImage(name=name, source="pull", ref=ref,
                         identity=f"{ref} {platform or host}{epoch}",
                         platform=platform or host, source_date_epoch=source_date_epoch)
    b = component["bootstrap"]
    arch = platforms.get(platform).deb if platform else host_arch()
    include = tuple(sorted(b.get("include", ())))
    variant = b.get("variant", "minbase")
    pins = tuple(sorted((p, r["version"], r["sha256"]) for p, r in (locked or {}).items()))
    parts = [BOOTSTRAP_VERSION, b["suite"], b["mirror"], variant, ",".join(include), arch]
    if pins:
        parts.append(" ".join("=".join(p) for p in pins))
    if source_date_epoch:
        parts.append(f"SOURCE_DATE_EPOCH={source_date_epoch}")
    h = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    ref = f"{BASE_REPOSITORY}/{component['os']}:{b['suite']}-{arch}-{h[:16]}"
    return BaseImage(name=name, source="bootstrap", ref=ref, identity=f"{ref}@{h}",
                     suite=b["suite"], mirror=b["mirror"], variant=variant,
                     include=include, arch=arch, platform=platform or host, locked=pins,
                     source_date_epoch=source_date_epoch)


def ensure_base(engine: Engine, base: BaseImage, log: Callable[[str], None]) -> str:
    """Make ``base`` exist in the engine; returns its image id. Reuses an existing one.

    Raises ``BuildError`` when debootstrap or the pull fails, or ``InputError`` when
    bootstrapping is impossible here (not root, no debootstrap).
    """
    found = engine.image_id(base.ref)
    if found:
        log(f"base {base.name}: {base.ref} (reused)")
        return found
    if base.source == "pull":
        log(f"base {base.name}: pulling {base.ref}")
        return imagetransfer.pull_ref(engine, base.ref)
    return _bootstrap(engine, base, log)


def _bootstrap(engine: Engine, base: BaseImage, log: Callable[[str], None]) -> str:
    if shutil.which("debootstrap") is None:
        raise InputError.one(f"base {base.name}", "debootstrap is not installed",
                             "run `make setup` (apt-get install debootstrap) or use --base-source pull")
    if os.geteuid() != 0:
        raise InputError.one(f"base {base.name}", "debootstrap needs root",
                             "run as root, or use --base-source pull")
    if base.foreign:
        why = platforms.emulation(base.platform)
        if why:
            raise InputError.one(f"base {base.name}", f"cannot bootstrap {base.arch}: {why}",
                                 f"run scripts/setup.sh with STAGECRAFT_PLATFORMS={base.platform} "
                                 "(installs qemu-user-static and registers it)")
    log(f"base {base.name}: debootstrap {base.variant} {base.suite} ({base.arch}) from {base.mirror}")
    # A cleanup that fails (a file written as the run was stopped) must not hide why the
    # run stopped; the run's scratch sweep removes what is left.
    with tempfile.TemporaryDirectory(prefix="stagecraft-rootfs-", ignore_cleanup_errors=True) as tmp:
        tarball = bootstrap_rootfs(base, Path(tmp))
        repo, tag = base.ref.rsplit(":", 1)
        image_id = engine.import_tarball(tarball, repo, tag,
                                         changes=['CMD ["bash"]', "ENV LANG=C.UTF-8"],
                                         platform=base.platform if base.foreign else "",
                                         source_date_epoch=base.source_date_epoch)
    log(f"base {base.name}: imported as {base.ref}")
    return image_id


# debootstrap mounts /proc (and, in a container, /dev and /sys binds) inside the rootfs
# and runs dpkg in a chroot; killed mid-way (Ctrl-C, SIGTERM, a failure of the run) it
# would leave those mounts on the host and its children writing. In a mount and PID
# namespace of its own (util-linux unshare), its mounts and processes end with it:
# --kill-child sends SIGKILL to its first process when unshare ends, which ends every
# process of the namespace (pid_namespaces(7)), and the mounts go with the namespace.
_ALONE = ("unshare", "--mount", "--propagation", "private", "--pid", "--fork",
          "--kill-child=SIGKILL")


@functools.cache
def _alone_works() -> bool:
    """Whether ``_ALONE`` can run here (util-linux installed, namespaces permitted: a
    container without CAP_SYS_ADMIN or with a seccomp filter refuses them); without it
    debootstrap runs as before, its mounts the host's."""
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run([*_ALONE, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

# Files that record when or on which machine the rootfs was made, not what it holds.
_VOLATILE = ("var/log", "var/cache/ldconfig/aux-cache", "var/cache/debconf/*-old",
             "var/lib/dpkg/*-old", "debootstrap")


def bootstrap_rootfs(base: BaseImage, workdir: Path) -> Path:
    """debootstrap ``base`` under ``workdir``, check it against the lock, normalise it and
    return ``workdir/context/rootfs.tar``. Raises ``BuildError``.

    With a ``source_date_epoch`` the tar is reproducible (two runs on two machines give
    the same bytes while the mirror serves the locked packages): debootstrap runs with
    SOURCE_DATE_EPOCH; package caches, lists, logs, the ldconfig aux cache, ``*-old``
    backups and the machine id are dropped; every file newer than the epoch is clamped
    to it; the tar is sorted by name, with numeric owners and no atime/ctime
    (https://reproducible-builds.org/docs/archives/).
    """
    rootfs = workdir / "rootfs"
    cmd = ["debootstrap", f"--variant={base.variant}", f"--arch={base.arch}"]
    if base.include:
        cmd.append("--include=" + ",".join(base.include))
    cmd += [base.suite, str(rootfs), base.mirror]
    env = dict(os.environ)
    if base.source_date_epoch:
        env["SOURCE_DATE_EPOCH"] = str(base.source_date_epoch)
    proc = subprocess.run([*_ALONE, *cmd] if _alone_works() else cmd,
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        cause = debootstrap_log_tail(rootfs)
        raise BuildError(f"debootstrap {base.suite} failed: {' | '.join(tail)}"
                         + (f"; its log ends: {cause}" if cause else ""))
    if base.locked:
        check_locked_rootfs(rootfs, base)
    # Leave no package caches or lists in the base layer.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (rootfs / sub).glob("*"):
            if p.is_file():
                p.unlink()
    tar = ["tar", "-C", str(rootfs), "--numeric-owner"]
    if base.source_date_epoch:
        normalise_rootfs(rootfs, base.source_date_epoch)
        tar += ["--sort=name", f"--mtime=@{base.source_date_epoch}", "--clamp-mtime",
                "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime"]
    tarball = workdir / "context" / "rootfs.tar"
    tarball.parent.mkdir()
    subprocess.run([*tar, "-cf", str(tarball), "."], check=True)
    return tarball


# debootstrap sends what its commands print (tar's, dpkg's, wget's errors) to
# TARGET/debootstrap/debootstrap.log, not to its stderr, which says only "E: Tried to
# extract package, but file already exists" for any failure of tar (debootstrap's
# functions, extract_dpkg_deb_data).
DEBOOTSTRAP_LOG = "debootstrap/debootstrap.log"
LOG_TAIL_BYTES = 16 * 1024


def debootstrap_log_tail(rootfs: Path, lines: int = 4, chars: int = 400) -> str:
    """The last ``lines`` non-empty lines of a failed debootstrap's own log in ``rootfs``
    (``DEBOOTSTRAP_LOG``), joined with " | ", what is not printable dropped, at most
    ``chars`` characters (their end kept); reads at most ``LOG_TAIL_BYTES`` bytes of a
    regular file, following no symbolic link under ``rootfs``; "" when there is none or
    it cannot be read."""
    folder, name = DEBOOTSTRAP_LOG.split("/")
    try:
        dfd = os.open(rootfs / folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return ""
            f.seek(max(0, st.st_size - LOG_TAIL_BYTES))
            text = f.read(LOG_TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    said = ["".join(ch for ch in ln if ch.isprintable()).strip() for ln in text.splitlines()]
    return " | ".join([ln for ln in said if ln][-lines:])[-chars:]


def normalise_rootfs(rootfs: Path, epoch: int) -> None:
    """Drop what records when or where ``rootfs`` was made and clamp every mtime newer
    than ``epoch`` (seconds) to it (symbolic links themselves, not their targets)."""
    for pattern in _VOLATILE:
        for p in rootfs.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                if pattern == "var/log":  # keep the directory, drop what is in it
                    for child in p.iterdir():
                        if child.is_dir() and not child.is_symlink():
                            shutil.rmtree(child)
                        else:
                            child.unlink()
                else:
                    shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
    machine_id = rootfs / "etc/machine-id"
    if machine_id.is_file():
        machine_id.write_text("")
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for name in [*dirnames, *filenames, ""]:
            p = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(p)
            if st.st_mtime > epoch:
                os.utime(p, (epoch, epoch), follow_symlinks=False)


def check_locked_rootfs(rootfs: Path, base: BaseImage) -> None:
    """Check a fresh debootstrap against matrix.lock: every .deb it downloaded has the
    locked SHA-256, and the installed packages are exactly the locked ones at the locked
    versions. Raises ``BuildError`` naming the package (and both hashes, or both
    versions; a version the mirror moved past means the lock needs an upgrade)."""
    from debian.deb822 import Deb822

    want = {p: (v, h) for p, v, h in base.locked}
    for deb in sorted((rootfs / "var/cache/apt/archives").glob("*.deb")):
        name, version = deb.name.split("_")[:2]
        version = version.replace("%3a", ":")
        got = hashlib.sha256(deb.read_bytes()).hexdigest()
        wv, wh = want.get(name, ("", ""))
        if wv == version and got != wh:
            raise BuildError(f"base {base.name}: hash mismatch for {name} {version}: lock "
                             f"sha256:{wh}, downloaded sha256:{got}")
    installed = {}
    with (rootfs / "var/lib/dpkg/status").open() as f:
        for para in Deb822.iter_paragraphs(f):
            if para.get("Status", "").endswith(" installed"):
                installed[para["Package"]] = para["Version"]
    upgrade = "run `build.py lock --upgrade` (the mirror serves only the newest version)"
    for name, (version, _) in sorted(want.items()):
        if installed.get(name) != version:
            raise BuildError(f"base {base.name}: {name} {version} is locked but debootstrap "
                             f"installed {installed.get(name, 'nothing')}; {upgrade}")
    extra = sorted(set(installed) - set(want))
    if extra:
        raise BuildError(f"base {base.name}: debootstrap installed {', '.join(extra[:5])}, "
                         f"which matrix.lock does not have; {upgrade}")
