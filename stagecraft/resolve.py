"""Fill lock entries from the real resolvers. I/O: the Debian mirror and the Python index.

Debian (``resolve_debian``): the suite's InRelease and Packages index are fetched by
apt into a private apt directory (signatures checked with the host's Debian archive
keyring); debootstrap's own resolver names the packages of the bootstrapped base
(``debootstrap --print-debs``, the essential set included); apt's resolver
(``apt-get install --simulate``) names what each stage's ``apt:`` specs install on top;
versions and SHA-256 come from the Packages index. The InRelease file's SHA-256 and Date
are recorded, the date also as SOURCE_DATE_EPOCH.

Python (``resolve_python``): ``uv pip compile --generate-hashes`` for the target Python
version and platform (``--python-platform x86_64-manylinux_2_36``: the manylinux level is
the base's glibc, read from the locked libc6), in PEP 751 ``pylock.toml`` form, which names
each file: the lock keeps the files that platform installs, each with its SHA-256.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import BuildError, InputError
from .lockkeys import normalize

PYPI = "https://pypi.org/simple"  # the index beside a framework's own (--extra-index-url)
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# uv's --python-platform knows manylinux levels up to this glibc.
MAX_MANYLINUX = (2, 40)
_UV_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None,
         cwd: str | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise BuildError(f"{what} failed: {tail[:400]}")
    return proc.stdout


# ---------------------------------------------------------------------------------------
# Debian

class Apt:
    """apt confined to a private directory ``root``: its own sources (``mirror`` and
    ``suite``, main, one ``arch`` such as ``amd64``, signed by KEYRING), lists, status and
    cache, so it reads nothing of the host's apt state and needs no root. Shared by the
    lock (this module) and the supply-chain tools (tools.py). Methods raise BuildError
    when apt fails."""

    def __init__(self, root: Path, mirror: str, suite: str, arch: str):
        self.root = root
        for d in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d",
                  "etc/apt/trusted.gpg.d", "var/lib/apt/lists/partial",
                  "var/cache/apt/archives/partial", "var/lib/dpkg"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "var/lib/dpkg/status").write_text("")
        (root / "etc/apt/sources.list").write_text(
            f"deb [arch={arch} signed-by={KEYRING}] {mirror} {suite} main\n")
        self.opts = [f"-oDir={root}", f"-oDir::State::status={root}/var/lib/dpkg/status",
                     f"-oAPT::Architecture={arch}", f"-oAPT::Architectures::={arch}",
                     "-oDir::Etc::trusted=/dev/null", f"-oDir::Etc::trustedparts={root}/etc/apt/trusted.gpg.d",
                     "-oDebug::NoLocking=1", "-oAcquire::Languages=none",
                     "-oAPT::Install-Recommends=false"]

    def get(self, *args: str) -> str:
        """``apt-get ARGS`` in this directory; returns its stdout."""
        return _run(["apt-get", *self.opts, *args], f"apt-get {args[0]}")

    def cache(self, *args: str) -> str:
        """``apt-cache ARGS`` in this directory; returns its stdout."""
        return _run(["apt-cache", *self.opts, *args], f"apt-cache {args[0]}")

    def inrelease(self) -> Path:
        """The suite's InRelease file fetched by ``get("update")``."""
        found = sorted((self.root / "var/lib/apt/lists").glob("*_InRelease"))
        if not found:
            raise BuildError("apt-get update fetched no InRelease file")
        return found[0]

    def stanzas(self, names: list[str]) -> dict[str, dict[str, str]]:
        """Candidate stanza of each ``name`` (or ``name=version``) from the index."""
        from debian.deb822 import Deb822

        out: dict[str, dict[str, str]] = {}
        text = self.cache("show", "--no-all-versions", *names)
        for para in Deb822.iter_paragraphs(text.splitlines()):
            if "Package" in para:
                out[para["Package"]] = dict(para)
        missing = [n for n in names if n.split("=")[0] not in out]
        if missing:
            raise BuildError(f"not in the index: {', '.join(missing[:5])}")
        return out

    def mark_installed(self, stanzas: list[dict[str, str]]) -> None:
        """Add ``stanzas`` to the private dpkg status as installed packages."""
        with (self.root / "var/lib/dpkg/status").open("a") as f:
            for s in stanzas:
                keep = ("Package", "Version", "Architecture", "Multi-Arch", "Essential",
                        "Priority", "Provides", "Depends", "Pre-Depends", "Breaks",
                        "Conflicts", "Replaces")
                lines = [f"{k}: {s[k]}" for k in keep if k in s]
                lines.insert(1, "Status: install ok installed")
                f.write("\n".join(lines) + "\n\n")


def stand_in_stanza(names: list[str]) -> dict[str, str]:
    """The dpkg stanza of the empty ``stagecraft-stand-ins`` package that the base stage
    installs (templates/_macros.j2 ``apt_stand_ins``): ``Provides`` every name of
    ``names``, unversioned, so only an unversioned dependency on one is satisfied by it."""
    return {"Package": "stagecraft-stand-ins", "Version": "1", "Architecture": "all",
            "Provides": ", ".join(names)}


def _record(stanza: dict[str, str]) -> dict[str, str]:
    return {"version": stanza["Version"], "sha256": stanza["SHA256"]}


def resolve_debian(inputs: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """A Debian lock entry for ``inputs`` (see ``lockfile.wanted``). Needs root (for
    debootstrap), apt and the Debian archive keyring. Raises ``InputError`` when a tool is
    missing or a spec matches nothing, ``BuildError`` when the mirror fails."""
    for tool in ("apt-get", "debootstrap"):
        if shutil.which(tool) is None:
            raise InputError.one("lock", f"{tool} is not installed",
                                 "run scripts/setup.sh (Debian: apt-get install apt debootstrap)")
    if not Path(KEYRING).is_file():
        raise InputError.one("lock", f"{KEYRING} missing", "apt-get install debian-archive-keyring")
    if os.geteuid() != 0:
        raise InputError.one("lock", "debootstrap --print-debs needs root", "run lock as root")
    mirror, suite, arch = inputs["mirror"], inputs["suite"], inputs["arch"]
    with tempfile.TemporaryDirectory(prefix="stagecraft-lock-") as tmp:
        apt = Apt(Path(tmp) / "apt", mirror, suite, arch)
        log(f"lock: apt index of {suite} from {mirror} ({arch})")
        apt.get("update")
        inrel = apt.inrelease()
        raw = inrel.read_bytes()
        date = re.search(rb"^Date: (.+)$", raw, re.M)
        if not date:
            raise BuildError(f"{inrel.name} has no Date field")
        when = email.utils.parsedate_to_datetime(date.group(1).decode().strip())
        release = {"date": date.group(1).decode().strip(),
                   "inrelease_sha256": hashlib.sha256(raw).hexdigest(),
                   "source_date_epoch": int(when.timestamp())}
        log(f"lock: debootstrap --print-debs {inputs['variant']} {suite}")
        cmd = ["debootstrap", "--print-debs", f"--variant={inputs['variant']}", f"--arch={arch}"]
        if inputs["include"]:
            cmd.append("--include=" + ",".join(inputs["include"]))
        names = sorted(set(_run([*cmd, suite, str(Path(tmp) / "target"), mirror],
                                "debootstrap --print-debs").split()))
        base = apt.stanzas(names)
        apt.mark_installed(list(base.values()))
        if inputs.get("stand_ins"):
            # The base stage's first step installs this empty package (templates/_macros.j2
            # apt_stand_ins): what it provides, no stage installs.
            apt.mark_installed([stand_in_stanza(inputs["stand_ins"])])
        stages: dict[str, dict[str, dict[str, str]]] = {}
        # The base stage first (every other stage builds on it), then the rest by name.
        order = sorted(inputs["stages"], key=lambda s: (s != "base", s))
        for name in order:
            specs = inputs["stages"][name]
            try:
                sim = apt.get("install", "--simulate", *specs)
            except BuildError as exc:
                raise InputError.one(f"lock {suite}", f"stage {name}: {exc}",
                                     "fix the apt version globs in matrix.yaml") from None
            # "Inst NAME [INSTALLED] (CANDIDATE ...)": a package already at the candidate
            # version (apt re-lists multi-arch siblings of what it installs) stays as it is.
            inst = [(p, v) for p, old, v in
                    re.findall(r"^Inst (\S+) (?:\[(\S+)\] )?\((\S+) ", sim, re.M) if old != v]
            st = apt.stanzas([f"{p}={v}" for p, v in inst]) if inst else {}
            stages[name] = {p: _record(s) for p, s in sorted(st.items())}
            if name == "base":
                apt.mark_installed(list(st.values()))
        return {"inputs": inputs, "release": release,
                "base": {p: _record(s) for p, s in sorted(base.items())}, "stages": stages}


def glibc_of(entry: dict[str, Any]) -> tuple[int, int]:
    """(major, minor) of the glibc a locked Debian base carries (its libc6 version)."""
    m = re.match(r"(?:\d+:)?(\d+)\.(\d+)", entry["base"]["libc6"]["version"])
    if not m:
        raise BuildError(f"cannot read a glibc version from libc6 {entry['base']['libc6']}")
    return int(m.group(1)), int(m.group(2))


def python_platform(arch: str, glibc: tuple[int, int]) -> str:
    """uv's ``--python-platform`` for a Debian architecture and glibc version."""
    level = min(glibc, MAX_MANYLINUX)
    return f"{_UV_ARCH.get(arch, arch)}-manylinux_{level[0]}_{level[1]}"


# ---------------------------------------------------------------------------------------
# Python

def uv_binary() -> str:
    """Path of the uv executable (the ``uv`` package from PyPI, or one on PATH)."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise InputError.one("lock", "uv is not installed",
                         f"{sys.executable} -m pip install uv (scripts/setup.sh does it)")


def resolve_python(inputs: dict[str, Any], uv_platform: str, over: dict[str, Any] | None,
                   log: Callable[[str], None]) -> dict[str, Any]:
    """A Python lock entry for ``inputs`` (see ``lockfile.wanted``).

    ``over``: the entry this set is resolved over (its pins win, as the jupyter stage's
    merged constraints do). Versions are whatever the pins in matrix.yaml allow, newest
    first: the Python sets of the matrix pin every package, so a re-resolution moves only
    what a changed pin moves (and any new dependency). Returns
    ``{"inputs", "python_platform", "packages"}``, or ``{"inputs", "unresolved"}`` when
    the index does not have the requirement (an index this host cannot reach).
    """
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    uv = uv_binary()
    with tempfile.TemporaryDirectory(prefix="stagecraft-lock-") as tmp:
        t = Path(tmp)
        (t / "requirements.in").write_text("\n".join(inputs["requirements"]) + "\n")
        constraints = list(inputs["constraints"])
        if over is not None:  # the runtime's resolution wins over the set's own pins
            pinned = {normalize(n) for n in over["packages"]}
            constraints = [f"{n}=={r['version']}" for n, r in sorted(over["packages"].items())] + [
                c for c in constraints if normalize(re.split(r"[=<>!~ ;]", c, maxsplit=1)[0]) not in pinned]
        (t / "constraints.txt").write_text("\n".join(constraints) + "\n")
        cmd = [uv, "pip", "compile", "requirements.in", "-c", "constraints.txt",
               "--generate-hashes", "--no-header", "--quiet", "--format", "pylock.toml",
               "-o", "pylock.stagecraft.toml", "--python-version", inputs["python"],
               "--python-platform", uv_platform, "--no-config"]
        if inputs["index_url"]:
            cmd += ["--index-url", inputs["index_url"], "--extra-index-url", PYPI]
        else:
            cmd += ["--index-url", PYPI]
        if inputs["no_deps"]:
            cmd.append("--no-deps")
        env = {**os.environ, "UV_NO_PROGRESS": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
        if proc.returncode != 0:
            msg = " ".join(proc.stderr.split())
            if inputs["index_url"] and "no version of" in msg:
                log(f"lock: {inputs['requirements'][0]} not found (index {inputs['index_url']} "
                    "unreachable from here?): recorded as unresolved")
                return {"inputs": inputs, "unresolved":
                        f"{inputs['requirements'][0]} not found on {inputs['index_url']} "
                        "when this lock was made"}
            raise InputError.one("lock", f"uv pip compile {' '.join(inputs['requirements'])[:80]}: "
                                 f"{msg[:300]}", "fix the pins in matrix.yaml")
        doc = tomllib.loads((t / "pylock.stagecraft.toml").read_text())
    pkgs: dict[str, dict[str, Any]] = {}
    for p in doc.get("packages", []):
        files = {w["url"].rsplit("/", 1)[-1]: w["hashes"]["sha256"] for w in p.get("wheels", [])}
        if not files and "sdist" in p:
            files = {p["sdist"]["url"].rsplit("/", 1)[-1]: p["sdist"]["hashes"]["sha256"]}
        if not files:
            raise BuildError(f"uv named no file for {p['name']} {p['version']}")
        pkgs[normalize(p["name"])] = {"version": str(p["version"]), "files": dict(sorted(files.items()))}
    return {"inputs": inputs, "python_platform": uv_platform, "packages": dict(sorted(pkgs.items()))}


# ---------------------------------------------------------------------------------------
# The whole lock

def update_lock(matrix_id: dict[str, str], want: dict[str, dict[str, dict[str, Any]]],
                old: Any, upgrade: list[str] | None, log: Callable[[str], None]) -> Any:
    """The lock for ``want`` (``lockfile.wanted``), starting from ``old`` (a
    ``lockfile.Lock`` of the same matrix, or None).

    Entries of ``old`` whose inputs still match are kept as they are (no network), unless
    ``upgrade`` asks for them: ``[]`` re-resolves every entry, ``[NAME, ...]`` every entry
    that holds one of those packages. Dependent sets follow: a Python set over a
    re-resolved one (Jupyter over its runtime), and every Python set on a re-resolved
    Debian base whose glibc moved.
    """
    from .lockfile import Lock

    names = {normalize(n) for n in upgrade or []} | set(upgrade or [])

    def asked(entry: dict[str, Any], kind: str) -> bool:
        if upgrade is None:
            return False
        if not upgrade:
            return True
        if kind == "debian":
            held = set(entry["base"]) | {p for s in entry["stages"].values() for p in s}
        else:
            held = set(entry.get("packages", {}))
        return bool(held & names)

    old_deb = old.debian if old else {}
    old_py = old.python if old else {}
    debian: dict[str, dict[str, Any]] = {}
    for key, inputs in sorted(want["debian"].items()):
        prev = old_deb.get(key)
        if prev is not None and prev["inputs"] == inputs and not asked(prev, "debian"):
            debian[key] = prev
        else:
            debian[key] = resolve_debian(inputs, log)
    python: dict[str, dict[str, Any]] = {}
    redone: set[str] = set()
    # Sets resolved over another come after it.
    order = sorted(want["python"], key=lambda k: (want["python"][k]["after"] is not None, k))
    for key in order:
        inputs = want["python"][key]
        base_key = "debian " + key.rsplit(" on ", 1)[1]
        deb = debian[base_key]
        uv_platform = python_platform(deb["inputs"]["arch"], glibc_of(deb))
        prev = old_py.get(key)
        after = inputs["after"]
        keep = (prev is not None and prev["inputs"] == inputs and not asked(prev, "python")
                and prev.get("python_platform", uv_platform) == uv_platform
                and (after is None or after not in redone))
        if keep:
            python[key] = prev
            continue
        over = python.get(after) if after else None
        if over is not None and "unresolved" in over:
            python[key] = {"inputs": inputs, "unresolved": f"resolved over {after}, which is unresolved"}
        else:
            log(f"lock: uv pip compile {key}")
            python[key] = resolve_python(inputs, uv_platform, over, log)
        redone.add(key)
    return Lock(matrix=dict(matrix_id), debian=debian, python=dict(sorted(python.items())))
