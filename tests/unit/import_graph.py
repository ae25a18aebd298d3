"""The import graph of the project's packages, read from the source with ``ast``
(tests/unit/test_architecture.py holds the rules it is checked against).

Every import statement counts: at module level, inside functions and under
``if TYPE_CHECKING:`` alike. A use is an import of a project module (``import a.b``,
``from a import b``, ``from . import b``), a name taken from one (``from a.b import
name``), or an attribute read through a name bound to a project module (``b.name`` after
``from a import b``). Imports by string (``importlib.import_module``) are not seen.

Privacy, the usual Python convention: a name with a leading underscore (dunders aside)
belongs to the module that defines it; a module with a leading underscore
(``pkg/_impl.py``) belongs to the package that holds it and its subpackages.
"""

from __future__ import annotations

import ast
import graphlib
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Use:
    """``importer`` uses project module ``target`` at ``where`` (``path:line``);
    ``name`` is the attribute taken from it (``from target import name`` or
    ``target.name``), ``""`` for the module itself."""

    importer: str
    target: str
    name: str
    where: str


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module of ``packages`` (folders under ``root``): {dotted name: file}; a
    package's ``__init__.py`` is the package's own name. Python scripts without a suffix
    in those folders (a ``#!...python`` first line, such as the entrypoint's) are
    included under their file name (``entrypoint.stagecraft-health``): they run from
    those folders too, though nothing imports them."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if path.suffix == ".py":
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = path
            elif not path.suffix and _python_script(path):
                found[".".join(parts)] = path
    return found


def _python_script(path: Path) -> bool:
    with path.open("rb") as f:
        first = f.readline(200)
    return first.startswith(b"#!") and b"python" in first


class _Reader:
    """The uses of one module (``name``, in ``path``) among the ``known`` modules."""

    def __init__(self, name: str, path: Path, known: set[str], root: Path) -> None:
        self.name, self.path, self.known = name, path, known
        self.shown = path.relative_to(root).as_posix()
        self.package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.bound: dict[str, str] = {}  # local name -> project module it is bound to
        self.uses: list[Use] = []

    def read(self) -> list[Use]:
        tree = ast.parse(self.path.read_text(encoding="utf-8"), filename=str(self.path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                self._attribute(node)
        return self.uses

    def _use(self, target: str, name: str, node: ast.AST) -> None:
        self.uses.append(Use(self.name, target, name, f"{self.shown}:{node.lineno}"))

    def _deepest_known(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in self.known:
                return ".".join(parts[:end])
        return None

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            target = self._deepest_known(alias.name)
            if target is None:
                continue
            self._use(target, "", node)
            if alias.asname:
                self.bound[alias.asname] = target
            else:  # `import a.b.c` binds `a`; a.b.c is reached through attributes
                self.bound[alias.name.partition(".")[0]] = alias.name.partition(".")[0]

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if self._deepest_known(source) != source:
            return  # not a project module
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            if sub in self.known:
                self._use(sub, "", node)
                self.bound[alias.asname or alias.name] = sub
            else:
                self._use(source, alias.name, node)

    def _module_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.bound.get(node.id)
        if isinstance(node, ast.Attribute):
            outer = self._module_of(node.value)
            if outer is not None and f"{outer}.{node.attr}" in self.known:
                return f"{outer}.{node.attr}"
        return None

    def _attribute(self, node: ast.Attribute) -> None:
        module = self._module_of(node.value)
        if module is None:
            return
        sub = f"{module}.{node.attr}"
        if sub in self.known:
            self._use(sub, "", node)
        else:
            self._use(module, node.attr, node)


def read_uses(root: Path, packages: tuple[str, ...]) -> list[Use]:
    """Every use of a project module by a module of ``packages`` under ``root``. Raises
    SyntaxError for a module that does not parse."""
    files = module_files(root, packages)
    known = set(files)
    uses: list[Use] = []
    for name, path in files.items():
        uses.extend(_Reader(name, path, known, root).read())
    return uses


def graph(uses: list[Use]) -> dict[str, dict[str, str]]:
    """{importer: {imported module: where, first use}}, a module's uses of itself left out."""
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for use in uses:
        if use.target != use.importer:
            edges[use.importer].setdefault(use.target, use.where)
    return dict(edges)


def cycles(edges: dict[str, dict[str, str]], most: int = 20) -> list[list[str]]:
    """Import cycles, each as ``[a, b, ..., a]`` where each module imports the next; one
    edge of each cycle found is set aside before looking again, so a tangle of several
    shows as several (at most ``most``)."""
    remaining = {node: set(targets) for node, targets in edges.items()}
    found: list[list[str]] = []
    while len(found) < most:
        try:  # graphlib's graph maps a node to its predecessors: here, what it imports
            graphlib.TopologicalSorter(remaining).prepare()
        except graphlib.CycleError as exc:
            cycle = list(reversed(exc.args[1]))  # graphlib lists it in dependency order
            found.append(cycle)
            remaining[cycle[0]].discard(cycle[1])
        else:
            break
    return found


def path_between(edges: dict[str, dict[str, str]], start: str, goal: str) -> list[str] | None:
    """The shortest chain of imports from ``start`` to ``goal`` (both included), or None."""
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            chain: list[str] = []
            step: str | None = node
            while step is not None:
                chain.append(step)
                step = came_from[step]
            return chain[::-1]
        for nxt in sorted(edges.get(node, {})):
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return None


def private_crossings(uses: list[Use]) -> list[str]:
    """Uses of a private name or module from outside its owner, one line each:
    ``where: importer uses target.name``."""
    lines: list[str] = []
    for use in uses:
        parts = use.target.split(".")
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            if _private(part) and not (use.importer == owner
                                       or use.importer.startswith(owner + ".")):
                lines.append(f"{use.where}: {use.importer} imports private module "
                             f"{use.target} (private to package {owner})")
                break
        if use.name and _private(use.name) and use.importer != use.target:
            lines.append(f"{use.where}: {use.importer} uses private name "
                         f"{use.target}.{use.name}")
    return sorted(set(lines))
