"""The indexer's import structure, computed from its source with ``ast`` (nothing is imported).

Rules:

* ``indexer/`` has no import cycles. Every ``import`` statement counts, wherever it
  stands: at module level, under ``if TYPE_CHECKING:``, or inside a function. A
  function-level import defers a cost (onnx, faiss, the tokenizer) until it is
  needed; it must not be a way to hide a cycle, so it is an edge like any other.
* ``indexer`` never imports ``daemon`` (the library knows nothing of processes,
  sockets or threads that own it), at any level.

How an import becomes edges: ``import a.b.c`` and ``from a.b.c import x`` point
at ``a.b.c``, or at ``a.b.c.x`` when that is a module (``from pkg import mod``),
and at the packages above it, whose ``__init__`` Python runs first. Those implicit
edges to the importing module's *own* ancestor packages are left out: they are
initialised before it anyway, and every submodule of a package whose ``__init__``
re-exports it would otherwise be a cycle. A name taken *from* an ancestor package
(``from memoryd.indexer.storage import site_id`` inside ``storage/postgres/index.py``)
is an edge like any other: that module needs what the ``__init__`` defines, so an
``__init__`` that imports the module back (even inside a function) closes a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Set
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "memoryd.indexer"
FORBIDDEN = "memoryd.daemon"


def _modules(folder: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under ``folder``."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = path
    return out


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """``(dotted name, line)`` of everything ``tree`` imports, at any depth (relative imports resolved)."""
    for name, line, _explicit in _imports(tree, module, is_package):
        yield name, line


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int, bool]]:
    """:func:`_imported_names`, each also saying whether it names what is imported (``explicit``)
    or only the package a ``from`` import runs first."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, True
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                yield f"{origin}.{alias.name}", node.lineno, True
            yield origin, node.lineno, False


def _target(name: str, modules: Set[str]) -> str | None:
    """The module of ``modules`` that importing ``name`` runs first (the longest known prefix)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges = set()
        for name, _line, explicit in _imports(tree, module, path.name == "__init__.py"):
            target = _target(name, set(modules))
            if explicit and target is not None and target != module and module.startswith(target + "."):
                edges.add(target)  # a name defined in an ancestor's __init__ (see the module's docstring)
            while target is not None:
                if target != module and not module.startswith(target + "."):
                    edges.add(target)
                target = _target(target.rpartition(".")[0], set(modules)) if "." in target else None
        graph[module] = edges
    return graph


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


def _describe(component: list[str], graph: Mapping[str, Set[str]]) -> str:
    inside = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & inside))}" for m in component)


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_a_package_init_counts_but_not_for_its_own_submodules(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.sub import mod\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("from pkg import helper\n\ndef f():\n    from pkg.sub import mod\n")
    (pkg / "helper.py").write_text("from . import sub\n")
    (pkg / "other.py").write_text("import pkg.sub.mod\n")
    graph = import_graph(_modules(pkg, "pkg"))
    assert graph["pkg.sub.mod"] == {"pkg.helper"}  # not its own ancestors, pkg and pkg.sub
    assert graph["pkg.helper"] == {"pkg.sub"}
    assert graph["pkg.other"] == {"pkg.sub.mod", "pkg.sub"}  # pkg.sub's __init__ runs first; pkg is its own
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.mod"}
    assert graph["pkg.sub"] == set()


def test_a_name_from_an_ancestor_package_is_an_edge(tmp_path: Path) -> None:
    """``storage/__init__`` <-> ``storage/postgres/index.py`` went unseen: the module took a name from
    its own ancestor package, whose ``__init__`` imports the module back inside a function."""
    pkg = tmp_path / "pkg"
    (pkg / "back").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def site():\n    return 1\n\ndef open_it():\n    from pkg.back import mod\n")
    (pkg / "back" / "__init__.py").write_text("")
    (pkg / "back" / "mod.py").write_text("from pkg import site\nfrom pkg.back import other\n")
    (pkg / "back" / "other.py").write_text("")
    graph = import_graph(_modules(pkg, "pkg"))
    assert graph["pkg.back.mod"] == {"pkg", "pkg.back.other"}  # the name from pkg counts; pkg.back's runs first
    assert cycles(graph) == [["pkg", "pkg.back.mod"]]


def test_indexer_has_no_import_cycles() -> None:
    graph = import_graph(_modules(REPO / "indexer", PACKAGE))
    assert len(graph) > 50  # the scan saw the package
    found = cycles(graph)
    assert not found, "import cycles in indexer/: " + " | ".join(_describe(c, graph) for c in found)


def test_indexer_never_imports_daemon() -> None:
    bad = []
    for module, path in _modules(REPO / "indexer", PACKAGE).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, line in _imported_names(tree, module, path.name == "__init__.py"):
            if name == FORBIDDEN or name.startswith(FORBIDDEN + "."):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not bad, "indexer/ must not import daemon/: " + "; ".join(sorted(set(bad)))
