"""A small valid matrix.lock for tests/unit/minimal_matrix.MINIMAL, made offline.

``synthetic_lock(matrix)`` fills every entry ``lockfile.wanted`` asks for with what a
resolver could have chosen (the version each spec names, wildcards made concrete) and
SHA-256 digests of the names, sealed as ``build.py lock`` seals it. Tests mutate it:
it loads and renders in milliseconds where the committed lock takes a tenth of a second.
"""

from __future__ import annotations

import hashlib
import re

from stagecraft import lockfile, lockkeys
from stagecraft.expand import expand
from stagecraft.matrix import Matrix


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _deb_version(spec: str) -> str:
    # "0.19.*" -> "0.19.1-1", "2023*" -> "20231-1": a version of the form Debian writes.
    return re.sub(r"[.]?\*", ".1", spec).lstrip(".") + "-1"


def _debian_entry(inputs: dict) -> dict:
    stages = {}
    for name, specs in inputs["stages"].items():
        stages[name] = {}
        for spec in specs:
            pkg, _, version = spec.partition("=")
            version = _deb_version(version or "1")
            stages[name][pkg] = {"version": version, "sha256": _digest(f"{pkg} {version}")}
    base = {"libc6": {"version": "2.36-9+deb12u14", "sha256": _digest("libc6")},
            **stages.get("base", {})}
    return {"inputs": inputs, "base": base, "stages": stages,
            "release": {"date": "Sat, 11 Jul 2026 10:16:37 UTC", "source_date_epoch": 1783764997,
                        "inrelease_sha256": _digest("InRelease")}}


def _python_entry(inputs: dict) -> dict:
    packages = {}
    for req in inputs["requirements"] + inputs["constraints"]:
        name, _, version = req.partition("==")
        name = lockkeys.normalize(name)
        wheel = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        packages[name] = {"version": version, "files": {wheel: _digest(wheel)}}
    return {"inputs": inputs, "python_platform": "x86_64-manylinux_2_36", "packages": packages}


def synthetic_lock(matrix: Matrix) -> str:
    """The text of a sound, sealed lock of every image of ``matrix`` (whose requirement
    lines are all ``name==version``)."""
    want = lockfile.wanted(matrix, expand(matrix))
    lock = lockfile.Lock(matrix=lockfile.matrix_identity(matrix),
                         debian={k: _debian_entry(v) for k, v in want["debian"].items()},
                         python={k: _python_entry(v) for k, v in want["python"].items()})
    return lockfile.dumps(lock)
