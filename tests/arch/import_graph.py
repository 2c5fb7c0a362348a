"""One reader of the source's imports (``ast``, nothing imported), for every architecture test.

Each import becomes an :class:`Edge` that says *when* it runs:

* ``module``: at import time (module level, class bodies, ``try`` blocks, the ``else`` of
  ``if TYPE_CHECKING:``) — what a closure check ("the handlers load no numpy") follows;
* ``function``: inside a ``def``/``lambda`` — deferred, yet the module still needs the other one;
* ``type_checking``: under ``if TYPE_CHECKING:`` — never runs, yet the module is still written
  against the other one.

Layer and cycle checks count all three (a late or type-only import is no way around a rule: the
module can be neither read, tested nor moved without the other); closure checks follow ``module``
edges only.

How a name becomes a target: ``import a.b.c`` and ``from a.b.c import x`` point at ``a.b.c``, or
at ``a.b.c.x`` when that is a module (``from pkg import mod``), or at the longest known prefix.
Python runs the packages above a target first, so each target also yields edges to its ancestor
packages — except the importing module's *own* ancestors, which are initialised before it anyway
(else every package whose ``__init__`` re-exports a submodule would be a cycle). A name taken
*from* an ancestor package (``from memoryd.indexer.storage import site_id`` inside
``storage/postgres/index.py``) is an edge like any other: the module needs what that ``__init__``
defines. Targets outside the scanned folders keep their dotted name (``numpy``, ``faiss.contrib``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"memoryd.daemon": REPO / "daemon", "memoryd.indexer": REPO / "indexer", "memoryd": REPO / "src" / "memoryd"}

When = Literal["module", "function", "type_checking"]
ALL: frozenset[str] = frozenset({"module", "function", "type_checking"})


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    when: When
    line: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target} ({self.when})"


def modules_in(folders: Mapping[str, Path]) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under each folder."""
    found: dict[str, Path] = {}
    for prefix, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, when: When) -> Iterator[tuple[ast.Import | ast.ImportFrom, When]]:
    """Every import under ``node`` with when it runs (a type-only block inside a function is type-only)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.body:
                yield from _visit(other, "type_checking")
            for other in child.orelse:
                yield from _visit(other, when)
            continue
        yield from _visit(child, when)


def _visit(node: ast.AST, when: When) -> Iterator[tuple[ast.Import | ast.ImportFrom, When]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, when
        return
    if when == "module" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        when = "function"
    yield from _walk(node, when)


def _names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[tuple[str, bool]]:
    """``(dotted name, explicit)``: explicit when it names what is imported, not only the package a
    ``from`` import runs first."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, True
        return
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    if origin == "__future__":
        return
    for alias in node.names:
        yield f"{origin}.{alias.name}", True
    yield origin, False


def _known(name: str, modules: Set[str]) -> str | None:
    """The longest prefix of ``name`` that is a scanned module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def edges_of(module: str, source: str, modules: Set[str], is_package: bool) -> list[Edge]:
    """Every edge ``module`` (whose text is ``source``) has, deduplicated per (target, when, line)."""
    out: dict[tuple[str, When, int], Edge] = {}
    for node, when in _walk(ast.parse(source), "module"):
        for name, explicit in _names(node, module, is_package):
            target = _known(name, modules)
            if target is None:
                if explicit or isinstance(node, ast.ImportFrom):
                    # outside the scan: ``from numpy import x`` is numpy, ``import faiss.contrib`` itself
                    ext = node.module if isinstance(node, ast.ImportFrom) and node.module else name
                    out.setdefault((ext, when, node.lineno), Edge(module, ext, when, node.lineno))
                continue
            if explicit and target != module and module.startswith(target + "."):
                out.setdefault((target, when, node.lineno), Edge(module, target, when, node.lineno))
            while target is not None:
                if target != module and not module.startswith(target + "."):
                    out.setdefault((target, when, node.lineno), Edge(module, target, when, node.lineno))
                target = _known(target.rpartition(".")[0], modules) if "." in target else None
    return list(out.values())


@dataclass(frozen=True)
class Graph:
    modules: Mapping[str, Path]
    edges: tuple[Edge, ...]

    def out_of(self, module: str, when: Iterable[str] = ALL) -> list[Edge]:
        kinds = set(when)
        return [e for e in self.edges if e.source == module and e.when in kinds]

    def targets(self, module: str, when: Iterable[str] = ALL) -> set[str]:
        return {e.target for e in self.out_of(module, when)}

    def internal(self, when: Iterable[str] = ALL, prefix: str = "memoryd.") -> dict[str, set[str]]:
        """Module -> the scanned modules it imports (under ``prefix``), for cycle finding."""
        kinds = set(when)
        graph: dict[str, set[str]] = {m: set() for m in self.modules if m.startswith(prefix)}
        for e in self.edges:
            if e.when in kinds and e.source in graph and e.target in graph:
                graph[e.source].add(e.target)
        return graph

    def closure(self, roots: Iterable[str]) -> dict[str, str]:
        """Every module importing ``roots`` loads (module-level edges, followed), with who brought it in."""
        seen: dict[str, str] = {}
        todo = [m for m in self.modules if m.startswith(tuple(roots))]
        for m in todo:
            seen.setdefault(m, "(root)")
        while todo:
            m = todo.pop()
            for e in self.out_of(m, ("module",)):
                if e.target not in seen:
                    seen[e.target] = m
                    if e.target in self.modules:
                        todo.append(e.target)
        return seen


def read_graph(modules: Mapping[str, Path]) -> Graph:
    names = set(modules)
    edges: list[Edge] = []
    for module, path in modules.items():
        edges += edges_of(module, path.read_text(encoding="utf-8"), names, path.name == "__init__.py")
    return Graph(modules, tuple(sorted(edges, key=lambda e: (e.source, e.line, e.target, e.when))))


def chain(closure: Mapping[str, str], module: str) -> str:
    out = [module]
    while closure.get(out[-1], "(root)") != "(root)":
        out.append(closure[out[-1]])
    return " <- ".join(out)


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(component: list[str], graph: Mapping[str, Set[str]]) -> str:
    inside = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & inside))}" for m in component)
