"""Requirement sets that pip could never satisfy, found at load time. Pure.

A set is the requirement lines one ``pip install`` gets together: a framework's own pin
(``package==version``), the entrypoint's requirements and the framework's
``constraints``; a toolkit's pin and its constraints; JupyterLab's pin and its
constraints. Two lines of one distribution (PEP 503 name) conflict when no version
satisfies both: for every distribution with an exact pin (``==`` without a wildcard,
or ``===``), at least one of its pins must satisfy all of its specifiers
(``packaging.specifiers``). ``numpy==1.0`` with ``numpy==2.0``, or a constraint that
excludes the framework's own version, would otherwise fail in pip, minutes into a
build. Without an exact pin, bounds are compared (``_empty``): ``>=2`` with ``<1``, or
``>2`` with ``<=2``, leave no version (issue 22 review); finer cases (``!=``, wildcards,
local versions in a specifier) are left to pip.

Sources: PEP 440 (version specifiers), PEP 503 (names), PEP 508 (requirement lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .safetext import clip


@dataclass(frozen=True)
class Line:
    """One requirement line of a set: ``text`` as written, ``path`` of its value in
    matrix.yaml (for the line number), ``role`` for messages (``constraint``, ``the
    framework's own pin``)."""

    text: str
    path: tuple
    role: str = "constraint"


def _pins(req: Requirement) -> list[Version]:
    out = []
    for spec in req.specifier:
        if spec.operator in ("==", "===") and not spec.version.endswith(".*"):
            try:
                out.append(Version(spec.version))
            except InvalidVersion:
                continue
    return out


def conflicts(lines: Sequence[Line]) -> list[tuple[tuple, str]]:
    """The lines of ``lines`` (one set) that pip could not satisfy, each as ``(path,
    what)``: a line that is no PEP 508 requirement, or the first line of a distribution
    that conflicts with an earlier line of it (naming that one). Empty: satisfiable as
    far as exact pins tell."""
    found: list[tuple[tuple, str]] = []
    seen: dict[str, list[tuple[Line, Requirement]]] = {}
    for line in lines:
        try:
            req = Requirement(line.text)
        except InvalidRequirement as exc:
            found.append((line.path, f"{clip(line.text, 60)} is not a valid requirement "
                                     f"({clip(str(exc), 80)})"))
            continue
        name = canonicalize_name(req.name)
        earlier = seen.setdefault(name, [])
        earlier.append((line, req))
        if len(earlier) < 2:
            continue
        other = _conflicting(earlier)
        if other is not None:
            found.append((line.path, f"{line.role} {clip(line.text, 60)} conflicts with "
                                     f"{other.role} {clip(other.text, 60)}: no version of "
                                     f"{name} satisfies both"))
            earlier.pop()  # report each conflicting line once, against what was kept
    return found


def _conflicting(earlier: list[tuple[Line, Requirement]]) -> Line | None:
    """The earlier line the last of ``earlier`` (one distribution's lines) conflicts
    with, or None when some version may satisfy them all: an exact pin that satisfies
    every specifier, or, without pins, bounds that leave an interval (``_empty``)."""
    line, req = earlier[-1]
    pins = [v for _, r in earlier for v in _pins(r)]
    if not pins:
        if not _empty([r for _, r in earlier]):
            return None
        return next((o for o, r in earlier[:-1] if _empty([r, req])), earlier[0][0])
    if any(all(r.specifier.contains(v, prereleases=True) for _, r in earlier) for v in pins):
        return None
    return next((o for o, r in earlier[:-1] if not _compatible(r, req)), earlier[0][0])


def _compatible(a: Requirement, b: Requirement) -> bool:
    pins = _pins(a) + _pins(b)
    both = list(a.specifier) + list(b.specifier)
    if not pins:
        return True
    return any(all(s.contains(v, prereleases=True) for s in both) for v in pins)


def _bump(version: Version) -> Version | None:
    """The release after ``version``'s prefix for ``~=`` (PEP 440: ``~=2.2`` is ``>=2.2,
    ==2.*``, below ``3``; ``~=1.4.5`` below ``1.5``); None for a one-part release."""
    release = version.release[:-1]
    if not release:
        return None
    epoch = f"{version.epoch}!" if version.epoch else ""
    return Version(epoch + ".".join(map(str, (*release[:-1], release[-1] + 1))))


def _empty(reqs: Sequence[Requirement]) -> bool:
    """Whether the bounds of ``reqs`` (``>=``, ``>``, ``<=``, ``<``, ``~=``, ``==`` without
    a wildcard; specifiers with a local version skipped) leave no version at all. Sound:
    each specifier's versions lie within its bound by PEP 440 ordering (``<=V`` and
    ``==V`` also take ``V+local``, which is below every public version above V), so an
    empty interval means pip can find nothing; anything finer is left to pip."""
    lo: tuple[Version, bool] | None = None  # (version, inclusive)
    hi: tuple[Version, bool] | None = None
    for req in reqs:
        for spec in req.specifier:
            op, text = spec.operator, spec.version
            if "+" in text or text.endswith(".*") or op in ("!=", "==="):
                continue
            try:
                v = Version(text)
            except InvalidVersion:
                continue
            lows = {">=": [(v, True)], ">": [(v, False)], "~=": [(v, True)], "==": [(v, True)]}.get(op, [])
            highs = {"<=": [(v, True)], "<": [(v, False)], "==": [(v, True)]}.get(op, [])
            if op == "~=" and _bump(v) is not None:
                highs = [(_bump(v), False)]  # type: ignore[list-item]
            for b in lows:
                if lo is None or b[0] > lo[0] or (b[0] == lo[0] and not b[1]):
                    lo = b
            for b in highs:
                if hi is None or b[0] < hi[0] or (b[0] == hi[0] and not b[1]):
                    hi = b
    if lo is None or hi is None:
        return False
    return lo[0] > hi[0] or (lo[0] == hi[0] and not (lo[1] and hi[1]))
