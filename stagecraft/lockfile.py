"""matrix.lock: every input of every image fixed by version and SHA-256. No network.

``wanted(matrix, specs)`` derives from matrix.yaml what must be locked, as entries keyed by
a readable name, each with its ``inputs`` (exactly what the resolution starts from):

- one Debian entry per base and platform (``debian debian12 linux/amd64``): the bootstrap
  inputs (mirror, suite, variant, architecture) and the apt specs of every stage that
  installs Debian packages on that base;
- one Python entry per requirement set, base and platform (``runtime paddle-2.6.2-cpu on
  debian12 linux/amd64``): the framework, its constraints (and the NVIDIA wheels of the
  stages below it) and the entrypoint's requirements; the CUDA and NCCL wheel sets;
  Jupyter or a toolkit over a runtime; the build tools a runtime stage fetches (cuobjdump).

``resolve.py`` fills each entry with what a real resolver chose (apt and debootstrap for
Debian, ``uv pip compile`` for Python). ``dumps``/``loads`` write and read the file:
deterministic JSON (sorted keys, one package per line, so a diff reads as a list of
package changes) sealed by an ``integrity`` digest over its content, so a truncated or
hand-edited lock is refused. ``check`` compares a lock with what the matrix wants without
touching the network (what CI runs), and ``changes`` lists ``package: old -> new``.
``load_for`` reads the lock beside a matrix once; ``locked_entry`` finds one entry and
checks its inputs (``stagelock`` builds what a stage installs from it; ``base_lock`` and
``base_epoch`` answer for a bootstrapped base). The entries' keys: ``lockkeys``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import lockcheck
from .errors import InputError, Problem
from .expand import ImageSpec
from .lockkeys import (
    apt_stage_name,
    debian_arch,
    debian_key,
    normalize,
    platforms,
    python_key,
    stage_apt,
    stage_pins,
    tool_key,
)
from .model import Matrix
from .safetext import clip

SCHEMA = "stagecraft-lock/1"


def lock_path(matrix: Matrix) -> Path:
    """The lock beside the matrix file: ``matrix.yaml`` -> ``matrix.lock``."""
    return matrix.path.with_suffix(".lock")


def wanted(matrix: Matrix, specs: list[ImageSpec]) -> dict[str, dict[str, dict[str, Any]]]:
    """What ``specs`` need locked: ``{"debian": {key: inputs}, "python": {key: inputs}}``.

    Debian inputs: ``{"mirror", "suite", "variant", "include", "arch", "stages": {name:
    [apt spec, ...]}}``, and ``"stand_ins": [package, ...]`` where the base stands in
    for some (matrix.yaml's ``apt_stand_ins``). Python inputs: ``{"python", "platform",
    "requirements", "constraints", "index_url", "no_deps", "after"}`` (``after``: the key of the set this
    one is resolved over, whose pins win; None for most).
    """
    deb: dict[str, dict[str, Any]] = {}
    py: dict[str, dict[str, Any]] = {}
    for spec in specs:
        comps = spec.components
        for plat in platforms(spec):
            dkey = debian_key(spec, plat)
            b = spec.base.get("bootstrap", {})
            entry = deb.setdefault(dkey, {
                "mirror": b.get("mirror", ""), "suite": b.get("suite", spec.base.get("codename", "")),
                "variant": b.get("variant", "minbase"), "include": sorted(b.get("include", ())),
                "arch": debian_arch(plat), "stages": {}})
            if spec.base.get("apt_stand_ins"):
                entry["stand_ins"] = sorted(spec.base["apt_stand_ins"])
            for stage in spec.chain:
                apt = stage_apt(comps, stage)
                if apt:
                    entry["stages"][apt_stage_name(spec, stage)] = sorted(
                        f"{pkg}={spec_['version']}" for pkg, spec_ in apt.items())
            for stage in spec.chain:
                pkey = python_key(spec, stage, plat)
                if pkey is None or pkey in py:
                    continue
                common = {"python": spec.base["python"], "platform": plat, "after": None,
                          "index_url": None, "no_deps": False, "constraints": []}
                fw = comps["framework"]
                if stage == "runtime":
                    # Over the NVIDIA wheels the cuda and accel stages installed into the
                    # same venv: their versions are constraints (the template's pip freeze).
                    py[pkey] = {**common,
                                "requirements": [f"{fw['package']}=={fw['version']}",
                                                 *matrix.entrypoint.get("requirements", [])],
                                "constraints": list(fw.get("constraints", [])) + stage_pins(spec, "accel"),
                                "index_url": fw.get("index_url")}
                elif stage == "jupyter":
                    jup = comps["jupyter"]
                    py[pkey] = {**common,
                                "requirements": [f"jupyterlab=={jup['jupyterlab']}"],
                                "constraints": list(jup.get("constraints", [])),
                                "after": python_key(spec, "runtime", plat)}
                elif stage == "toolkit":
                    tk = comps["toolkit"]
                    py[pkey] = {**common,
                                "requirements": [f"{tk['package']}=={tk['version']}"],
                                "constraints": list(tk.get("constraints", [])),
                                "after": python_key(spec, "runtime", plat)}
                else:  # cuda, accel: NVIDIA's wheels, installed with their dependencies
                    py[pkey] = {**common,
                                "requirements": [f"{p}=={v}" for p, v in
                                                 sorted(comps[stage]["pypi"].items())],
                                "constraints": stage_pins(spec, "cuda") if stage == "accel" else []}
            tool = matrix.build_tools.get("cuobjdump")
            if tool and "runtime" in spec.chain and comps["framework"].get("build", {}).get("fatbins"):
                # Fetched by the runtime stage, used and removed: an input all the same.
                py.setdefault(tool_key(spec, plat), {
                    "python": spec.base["python"], "platform": plat, "after": None, "index_url": None,
                    "no_deps": True, "constraints": [], "requirements": [tool]})
    return {"debian": deb, "python": py}


# ---------------------------------------------------------------------------------------
# The file.

@dataclass
class Lock:
    """A lock: ``matrix`` ({"repository", "source"}), ``debian`` and ``python`` entries.

    Debian entry: ``{"inputs", "release": {"date", "inrelease_sha256",
    "source_date_epoch"}, "base": {pkg: {"version", "sha256"}}, "stages": {name: {pkg:
    {"version", "sha256"}}}}``. Python entry: ``{"inputs", "python_platform",
    "packages": {name: {"version", "files": {filename: sha256}}}}`` or ``{"inputs",
    "unresolved": reason}`` where the index cannot be reached.
    """

    matrix: dict[str, str]
    debian: dict[str, dict[str, Any]]
    python: dict[str, dict[str, Any]]

    def body(self) -> dict[str, Any]:
        """Everything but the seal."""
        return {"schema": SCHEMA, "matrix": self.matrix, "debian": self.debian,
                "python": self.python}


def _seal(body: dict[str, Any]) -> str:
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def _is_record(value: Any) -> bool:
    """A dict written on one line: scalars, or dicts of scalars (one package)."""
    if not isinstance(value, dict):
        return False
    for v in value.values():
        if isinstance(v, dict):
            if any(isinstance(x, (dict, list)) for x in v.values()):
                return False
        elif isinstance(v, list):
            return False
    return len(json.dumps(value)) <= 400


_TOP = ("schema", "matrix", "integrity", "debian", "python")


def _order(key: str) -> tuple[int, str]:
    # "version" first in a package record; the top-level parts in reading order.
    return (_TOP.index(key) if key in _TOP else -1 if key == "version" else len(_TOP), key)


def _write(value: Any, indent: int) -> str:
    pad = "  " * (indent + 1)
    if isinstance(value, dict) and indent >= 2 and _is_record(value):
        return "{" + ", ".join(f"{json.dumps(k)}: {_write(v, 9)}"
                               for k, v in sorted(value.items(), key=lambda kv: _order(kv[0]))) + "}"
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {_write(v, indent + 1)}"
                 for k, v in sorted(value.items(), key=lambda kv: _order(kv[0]))]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and value:
        items = [f"{pad}{_write(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


def dumps(lock: Lock) -> str:
    """The lock as text: same lock, same bytes. Sorted keys, one package per line."""
    body = lock.body()
    return _write({**body, "integrity": _seal(body)}, 0) + "\n"


def loads(text: str, where: str = "matrix.lock") -> Lock:
    """Parse and verify a lock. Raises ``InputError`` (one line naming ``where``, its line
    and the entry) when it is too large or deep to be a lock, not valid JSON (truncated),
    of another schema, sealed by an ``integrity`` digest that does not match its content
    (edited by hand), or not of the lock's shape (``lockcheck``: lock.schema.json, PEP 503
    names, PEP 440 and Debian versions, SHA-256 digests)."""
    regen = lockcheck.REGEN
    doc = lockcheck.parse(text, where)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError.one(where, f"not a stagecraft lock of schema {SCHEMA} (found {clip(got, 60)})",
                             regen)
    body = {k: v for k, v in doc.items() if k != "integrity"}
    if doc.get("integrity") != _seal(body):
        raise InputError.one(where, "content does not match its integrity digest: the lock was "
                             "edited by hand or damaged", regen)
    lockcheck.validate(doc, text, where)
    return Lock(matrix=dict(doc["matrix"]), debian=dict(doc["debian"]), python=dict(doc["python"]))


def read(path: Path) -> Lock:
    """Read and verify the lock at ``path``; ``InputError`` when missing or invalid."""
    if not path.exists():
        raise InputError.one(str(path), "no lock file", "run `python3 build.py lock` to write it")
    return loads(lockcheck.read(path, path.name), path.name)


def matrix_identity(matrix: Matrix) -> dict[str, str]:
    """What names the matrix a lock belongs to."""
    return {"repository": matrix.repository, "source": matrix.source}


def check(lock: Lock, matrix: Matrix, want: dict[str, dict[str, dict[str, Any]]],
          where: str = "matrix.lock") -> list[Problem]:
    """Where ``lock`` differs from what the matrix wants (offline): a lock of another
    matrix, entries missing, stale, or made from other inputs. Empty list: in step."""
    hint = "run `python3 build.py lock` and commit matrix.lock"
    if lock.matrix != matrix_identity(matrix):
        return [Problem(where, f"made for another matrix ({lock.matrix.get('repository')!r}, "
                               f"this is {matrix.repository!r})",
                        "run `python3 build.py lock` for this matrix")]
    problems: list[Problem] = []
    for kind in ("debian", "python"):
        have = getattr(lock, kind)
        for key, inputs in sorted(want[kind].items()):
            if key not in have:
                problems.append(Problem(where, f"{key}: not locked", hint))
            elif have[key]["inputs"] != inputs:
                diff = _input_diff(have[key]["inputs"], inputs)
                problems.append(Problem(where, f"{key}: locked from other inputs ({diff})", hint))
        for key in sorted(set(have) - set(want[kind])):
            problems.append(Problem(where, f"{key}: locked but no image uses it", hint))
    return problems


def _input_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    parts = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            gone, added = sorted(set(map(str, a)) - set(map(str, b))), sorted(set(map(str, b)) - set(map(str, a)))
            parts.append(f"{k}: " + ", ".join([*(f"-{x}" for x in gone), *(f"+{x}" for x in added)]))
        elif isinstance(a, dict) and isinstance(b, dict):
            parts.append(f"{k}: {_input_diff(a, b)}")
        else:
            parts.append(f"{k}: {a!r} -> {b!r}")
    text = "; ".join(parts)
    return text if len(text) <= 200 else text[:200] + "..."


def packages(lock: Lock) -> dict[tuple[str, str], str]:
    """Every locked package with its version(s), keyed by ``(name, scope)``: scope is the
    Debian entry's base and platform (``debian12 linux/amd64``) for a Debian package, ``""``
    for a Python distribution (several versions across sets joined with ``|``, sorted)."""
    found: dict[tuple[str, str], set[str]] = {}
    for key, e in lock.debian.items():
        scope = key.split(" ", 1)[1]
        for pkg, rec in [*e["base"].items(), *(p for s in e["stages"].values() for p in s.items())]:
            found.setdefault((pkg, scope), set()).add(rec["version"])
    for e in lock.python.values():
        for name, rec in e.get("packages", {}).items():
            found.setdefault((name, ""), set()).add(rec["version"])
    return {k: "|".join(sorted(v)) for k, v in found.items()}


def changes(old: Lock | None, new: Lock) -> list[str]:
    """``package: old -> new`` lines, Debian ones with their base in brackets
    (``libc6: 2.36-9+deb12u13 -> 2.36-9+deb12u14 [debian12 linux/amd64]``), ``(new)`` and
    ``(removed)`` at the ends; sorted."""
    a = packages(old) if old else {}
    b = packages(new)
    out = []
    for name, scope in sorted(set(a) | set(b)):
        k = (name, scope)
        if a.get(k) != b.get(k):
            where = f" [{scope}]" if scope else ""
            out.append(f"{name}: {a.get(k, '(new)')} -> {b.get(k, '(removed)')}{where}")
    return out


def deb_stage_packages(entry: dict[str, Any], stage_name: str) -> dict[str, dict[str, str]]:
    """The packages one stage installs from a Debian entry (empty when it installs none)."""
    return dict(entry["stages"].get(stage_name, {}))


def with_seal_renewed(text: str) -> str:
    """``text`` (a lock) with its integrity digest recomputed: for tests that stand in for
    a mirror or index serving other bytes than the ones locked."""
    doc = json.loads(text)
    body = {k: v for k, v in doc.items() if k != "integrity"}
    return _write({**body, "integrity": _seal(body)}, 0) + "\n"


def unknown_packages(lock: Lock, names: list[str]) -> list[str]:
    """The ``names`` that are no package of the lock (Debian names as is, Python names
    PEP 503-normalised)."""
    known = {name for name, _ in packages(lock)}
    known_norm = {normalize(k) for k in known}
    return [n for n in names if n not in known and normalize(n) not in known_norm]


_LOADED: dict[tuple[str, int, int], Lock] = {}


def load_for(matrix: Matrix) -> Lock | None:
    """The lock beside ``matrix`` (read once per file version), or None when there is none
    (such a matrix builds from its version specs, unlocked). Raises ``InputError`` when
    it is damaged or edited by hand."""
    path = lock_path(matrix)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = read(path)
    return _LOADED[key]


def locked_entry(lock: Lock, kind: str, key: str, inputs: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``kind`` ("debian" or "python") entry ``key`` of ``lock``, made from exactly
    ``inputs``. Raises ``InputError`` naming ``where`` when it is missing or was locked
    from other inputs (what differs)."""
    hint = "run `python3 build.py lock` and commit matrix.lock"
    entry = getattr(lock, kind).get(key)
    if entry is None:
        raise InputError.one(where, f"{key}: not locked", hint)
    if entry["inputs"] != inputs:
        raise InputError.one(where, f"{key}: locked from other inputs "
                             f"({_input_diff(entry['inputs'], inputs)})", hint)
    return entry


def locked_debian_entry(lock: Lock, key: str, inputs: dict[str, Any], where: str) -> dict[str, Any]:
    """The Debian entry ``key``, checked against what one image wants of it: the
    bootstrap inputs, and the apt sets of that image's stages (the entry also holds the
    sets of every other image on the same base, which this image does not ask about)."""
    entry = lock.debian.get(key)
    if entry is not None:
        have = entry["inputs"]
        mine = {**have, "stages": {n: s for n, s in have.get("stages", {}).items()
                                   if n in inputs.get("stages", {})}}
        if mine == inputs:
            return entry
    return locked_entry(lock, "debian", key, inputs, where)  # raises, naming what differs


def base_lock(matrix: Matrix, spec: ImageSpec, platform: str = "") -> dict[str, dict[str, str]] | None:
    """The locked packages of ``spec``'s bootstrapped base (``{package: {"version",
    "sha256"}}``, the essential set included), or None when the matrix has no lock.
    Raises ``InputError`` like ``stage_lock``."""
    lock = load_for(matrix)
    if lock is None:
        return None
    where = lock_path(matrix).name
    plat = platform or platforms(spec)[0]
    dkey = debian_key(spec, plat)
    want = wanted(matrix, [spec])
    return dict(locked_debian_entry(lock, dkey, want["debian"][dkey], where)["base"])


def base_epoch(matrix: Matrix, spec: ImageSpec, platform: str = "") -> int:
    """SOURCE_DATE_EPOCH of ``spec``'s base on ``platform``: the date of the InRelease file
    its packages were locked from (seconds); 0 when the matrix has no lock."""
    lock = load_for(matrix)
    if lock is None:
        return 0
    plat = platform or platforms(spec)[0]
    entry = lock.debian.get(debian_key(spec, plat))
    return int(entry["release"]["source_date_epoch"]) if entry else 0
