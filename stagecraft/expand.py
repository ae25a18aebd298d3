"""Expand a matrix into images, and resolve what a user typed to one of them.

``expand(matrix)`` turns each image group into ``ImageSpec``s: the product of its axes,
less ``exclude`` (partial matches), plus ``include`` (full combinations); tags and aliases
rendered from their Jinja2 expressions; the stage chain less the stages whose components
are unset. Tags and aliases must be unique across the whole matrix. Compatibility rules
(``compat.check``) run on every combination. All problems are reported at once.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from . import chains, compat, kernels, tagexpr
from .errors import InputError, Problem
from .model import Group, Matrix
from .safetext import clip

# Docker's tag grammar: [\w][\w.-]{0,127} (distribution/reference).
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_IMAGES = 1000  # images of one matrix (matrix.yaml has about 20)


@dataclass(frozen=True)
class ImageSpec:
    """One image of the matrix.

    ``selection`` maps each axis to the chosen component name (``None`` = unset);
    ``components`` maps it to the component entry (a dict with ``name``). ``chain`` lists
    the stages built, base first. ``tests`` are the testinfra suites of those stages and of
    the components that name their own (the framework, a toolkit), in order, without
    repeats. ``where`` is the group's ``file:line``. ``platforms`` are the OCI platforms
    the image is built for (``linux/arm64``); empty: the host's (``platforms_of`` resolves it).
    """

    tag: str
    aliases: tuple[str, ...]
    group: str
    selection: tuple[tuple[str, str | None], ...]
    components: dict[str, dict[str, Any]]
    chain: tuple[str, ...]
    tests: tuple[str, ...]
    where: str
    platforms: tuple[str, ...] = ()

    @property
    def base(self) -> dict[str, Any]:
        """The OS base component."""
        return self.components["base"]

    @property
    def framework(self) -> dict[str, Any]:
        """The framework component."""
        return self.components["framework"]

    @property
    def names(self) -> tuple[str, ...]:
        """The canonical tag followed by its aliases."""
        return (self.tag, *self.aliases)


def _combinations(group: Group) -> tuple[list[dict[str, str | None]], list[int]]:
    """The group's images as axis -> entry name, and the indexes of the ``exclude``
    entries that match no combination of the axes."""
    axes = list(group.axes)
    combos = [dict(zip(axes, values, strict=True)) for values in itertools.product(*group.axes.values())]
    used: set[int] = set()
    kept = []
    for c in combos:
        hits = [i for i, ex in enumerate(group.exclude) if all(c.get(k) == v for k, v in ex.items())]
        used.update(hits)
        if not hits:
            kept.append(c)
    for inc in group.include:
        combo = {a: inc.get(a) for a in axes}
        if combo not in kept:
            kept.append(combo)
    return kept, [i for i in range(len(group.exclude)) if i not in used]


def expand(matrix: Matrix) -> list[ImageSpec]:
    """Every image of the matrix, in file order.

    Raises ``InputError`` with every problem: a tag or alias template that fails to render
    or renders to an invalid tag, a tag or alias claimed twice, a combination that breaks a
    compatibility rule.
    """
    specs: list[ImageSpec] = []
    problems: list[Problem] = []
    owner: dict[str, tuple[str, str, str]] = {}  # tag or alias -> (canonical tag, group, where)
    chain_broken: set[str] = set()
    total = sum(math.prod(len(v) for v in g.axes.values()) for g in matrix.groups)
    if total > MAX_IMAGES:
        raise InputError.one(matrix.locate(["images"]), f"the image groups make {total} "
                             f"combinations; at most {MAX_IMAGES}", "split the matrix or use exclude")
    for group in matrix.groups:
        combos = _group_combinations(group, problems)
        try:
            tag_tpl = tagexpr.compile_expression(group.tag)
            alias_tpls = [tagexpr.compile_expression(a) for a in group.aliases]
        except InputError as exc:
            problems += [Problem(group.where, f"image group {group.name!r}: {p.what}", p.hint)
                         for p in exc.problems]
            continue
        for combo in combos:
            components = {axis: matrix.component(axis, name)
                          for axis, name in combo.items() if name is not None}
            names = _names(group, combo, components, tag_tpl, alias_tpls, problems)
            if names is None:
                continue
            tag, aliases = names
            _claim(group, tag, aliases, owner, problems)
            _rule_problems(matrix, group, tag, components, problems)
            chain = _chain(matrix, group, tag, components, chain_broken, problems)
            tests = [t for s in chain for t in matrix.stages[s].tests]
            for comp in components.values():  # the framework's, a toolkit's own suites
                tests += list(comp.get("tests", ()))
            specs.append(ImageSpec(tag=tag, aliases=tuple(aliases), group=group.name,
                                   selection=tuple(combo.items()), components=components,
                                   chain=chain, tests=tuple(dict.fromkeys(tests)),
                                   where=group.where, platforms=group.platforms))
    if problems:
        raise InputError(problems)
    return specs


def _group_combinations(group: Group, problems: list[Problem]) -> list[dict[str, Any]]:
    """The combinations of ``group``'s axes its exclude entries leave; adds to
    ``problems`` a group that makes none and each exclude entry that matches none."""
    combos, unused = _combinations(group)
    if not combos:
        problems.append(Problem(group.where, f"image group {group.name!r} produces no image: "
                                "exclude removes every combination", "loosen exclude"))
    for i in unused:
        where = group.exclude_where[i] if i < len(group.exclude_where) else group.where
        problems.append(Problem(where, f"image group {group.name!r}: exclude entry "
                                f"{_describe(group.exclude[i])} matches no combination",
                                "remove it or fix its names"))
    return combos


def _names(group: Group, combo: dict[str, Any], components: dict[str, Any], tag_tpl: Any,
           alias_tpls: list[Any], problems: list[Problem]) -> tuple[str, list[str]] | None:
    """(tag, aliases) of one combination, rendered from the group's templates; aliases
    empty or equal to the tag dropped, repeats once. None, with the problem added, when a
    template fails or renders no valid Docker tag."""
    context = {axis: components.get(axis) for axis in combo}
    try:
        tag = tagexpr.render(tag_tpl, context)
        aliases = [tagexpr.render(a, context) for a in alias_tpls]
    except Exception as exc:  # noqa: BLE001 - any failure of a user expression is bad input
        problems.append(Problem(group.where, f"image group {group.name!r}: tag "
                        f"template fails for {_describe(combo)}: {clip(str(exc), 200)}",
                        "fix the tag or aliases expression"))
        return None
    aliases = list(dict.fromkeys(a for a in aliases if a and a != tag))
    bad_names = [n for n in (tag, *aliases) if not TAG_RE.match(n)]
    if bad_names:
        problems.append(Problem(group.where, f"image group {group.name!r}: "
                        f"{clip(bad_names[0])} is not a valid Docker tag",
                        "tags use letters, digits, '_', '.', '-' (at most 128)"))
        return None
    return tag, aliases


def _claim(group: Group, tag: str, aliases: list[str], owner: dict[str, tuple[str, str, str]],
           problems: list[Problem]) -> None:
    """Record ``tag`` and ``aliases`` in ``owner`` (name -> (tag, group, where)); a name
    another image claimed first is a problem."""
    for name in (tag, *aliases):
        if name in owner:
            other_tag, other_group, other_where = owner[name]
            problems.append(Problem(group.where, f"image group {group.name!r}: "
                            f"{name!r} is claimed by {other_tag!r} too (group "
                            f"{other_group!r}, {other_where})",
                            "make the tag and alias templates unique"))
        owner.setdefault(name, (tag, group.name, group.where))


def _rule_problems(matrix: Matrix, group: Group, tag: str, components: dict[str, Any],
                   problems: list[Problem]) -> None:
    """The compatibility rules (``compat``) and kernel sets (``kernels``) image ``tag``
    breaks, added to ``problems``."""
    for rule in compat.check(matrix, components, group.platforms):
        problems.append(Problem(group.where, f"image {tag!r}: {rule}",
                                "change the combination or the compatibility table"))
    for issue in kernels.problems(kernels.complete(components["framework"], components)):
        problems.append(Problem(matrix.locate(["components", "framework",
                                               components["framework"]["name"], "kernel_sets"]),
                                f"image {tag!r}: {issue}", "see probes/kernel_sets.schema.json"))


def _chain(matrix: Matrix, group: Group, tag: str, components: dict[str, Any],
           chain_broken: set[str], problems: list[Problem]) -> tuple[str, ...]:
    """The stages of image ``tag``: the group's chain without the stages of its unset
    components. When that leaves an order the stages cannot build in (and the chain as
    written can), a problem is added, once per group (``chain_broken``)."""
    chain = tuple(s for s in group.chain
                  if all(components.get(t) is not None for t in matrix.stages[s].uses))
    parents = {s: matrix.stages[s].parents for s in group.chain}
    broken = chains.chain_problem(chain, parents)
    # Once a group, for its first image; the chain as written is checked at load.
    if broken and group.name not in chain_broken and not chains.chain_problem(group.chain, parents):
        chain_broken.add(group.name)
        problems.append(Problem(matrix.locate(["images", group.index, "chain"]),
                                f"image group {group.name!r}: image {tag!r} leaves out "
                                f"the stages of its unset components, and then "
                                f"{broken[1]}", chains.hint(
                                    {n: st.parents for n, st in matrix.stages.items()})))
    return chain


def _describe(combo: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in combo.items())


def resolve(specs: list[ImageSpec], query: str) -> ImageSpec:
    """The image a user means by ``query``: a tag, an alias, or a unique prefix of one.

    Raises ``InputError`` naming the closest tags when nothing or more than one matches.
    """
    for spec in specs:
        if query in spec.names:
            return spec
    matches = {spec.tag: spec for spec in specs
               for name in spec.names if name.startswith(query)}
    if len(matches) == 1:
        return next(iter(matches.values()))
    if len(matches) > 1:
        raise InputError.one(f"--tag {query}", f"ambiguous: matches {', '.join(sorted(matches))}",
                             "give more of the tag")
    every = [n for spec in specs for n in spec.names]
    close = difflib.get_close_matches(query, every, n=4, cutoff=0.4)
    hint = f"closest: {', '.join(close)}" if close else "run `python3 build.py --list`"
    raise InputError.one(f"--tag {query}", "no such tag or alias in the matrix", hint)
