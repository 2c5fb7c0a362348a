"""The daemon's architecture, checked statically from the source's imports (``ast``, nothing imported).

- ``daemon/`` has no import cycles: every import counts, those inside functions too (a late
  import is no way to break a cycle), except ``if TYPE_CHECKING:`` blocks, which never run;
- ``indexer/`` never imports ``daemon/`` (the library knows nothing of processes and sockets);
- only the entry point imports ``memoryd.daemon.app`` (which assembles everything);
- the client side (``daemon/client/``, the ``memoryd.daemon.cli`` entry point) stays light: what
  it imports at module level, followed transitively, reaches neither numpy/onnxruntime/faiss
  nor the server side. Imports inside functions are not followed: that is how the CLI keeps a
  command's heavy parts (``memoryd run`` loads the daemon) out of every other command.

The indexer's own cycles are checked in ``tests/test_architecture_indexer.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = {"memoryd.daemon": REPO / "daemon", "memoryd.indexer": REPO / "indexer", "memoryd": REPO / "src" / "memoryd"}
HEAVY = ("numpy", "onnxruntime", "faiss", "onnx", "tokenizers", "watchdog", "apscheduler")
SERVER_SIDE = ("memoryd.daemon.app", "memoryd.daemon.api", "memoryd.daemon.work", "memoryd.daemon.watch",
               "memoryd.daemon.rpc.server", "memoryd.daemon.rpc.connection", "memoryd.indexer.engine")
CLIENT_ROOTS = ("memoryd.daemon.cli", "memoryd.daemon.client")


@dataclass(frozen=True)
class Import:
    target: str
    top_level: bool  # at module level (not inside a function)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for prefix, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    return (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING") or (
        isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _walk(other, in_function)
            continue
        inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, inner
        yield from _walk(child, inner)


def _resolve(name: str) -> str:
    """The module an imported name lives in: ``a.b.c`` is module ``a.b.c`` if it exists, else ``a.b``."""
    while name and name not in MODULES and "." in name:
        candidate = name.rsplit(".", 1)[0]
        if candidate in MODULES or not any(m.startswith(candidate + ".") for m in MODULES):
            return candidate
        name = candidate
    return name


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: list[Import] = []
    for node, in_function in _walk(tree, False):
        if isinstance(node, ast.Import):
            out += [Import(_resolve(a.name), not in_function) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            out += [Import(_resolve(t), not in_function) for t in targets if t != "__future__"]
    return out


def _internal(imports: list[Import], prefix: str) -> set[str]:
    return {i.target for i in imports if i.target in MODULES and i.target.startswith(prefix)}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), and self-imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_reader_sees_the_known_edges() -> None:
    """A guard on the checker itself: edges we know exist are found, in both forms."""
    app = {i.target for i in imports_of("memoryd.daemon.app")}
    assert {"memoryd.daemon.api.read", "memoryd.daemon.work.worker", "memoryd.indexer.engine"} <= app
    cli = imports_of("memoryd.daemon.client.cli")
    assert Import("memoryd.daemon.app", top_level=False) in cli  # `memoryd run`, loaded lazily
    assert Import("memoryd.daemon.client.cli_write", top_level=True) in cli  # `from package import module`


def test_no_import_cycles_in_the_daemon() -> None:
    daemon = [m for m in MODULES if m.startswith("memoryd.daemon")]
    graph = {m: _internal(imports_of(m), "memoryd.daemon") for m in daemon}
    assert _cycles(graph) == []


def test_the_indexer_never_imports_the_daemon() -> None:
    offenders = {m: sorted(i.target for i in imports_of(m) if i.target.startswith("memoryd.daemon"))
                 for m in MODULES if m.startswith("memoryd.indexer")}
    assert {m: t for m, t in offenders.items() if t} == {}


def _client_closure() -> dict[str, str]:
    """Every module the client side loads at import time, with the module that brought it in."""
    seen: dict[str, str] = {}
    todo = [m for m in MODULES if m.startswith(CLIENT_ROOTS)]
    for m in todo:
        seen.setdefault(m, "(client)")
    while todo:
        m = todo.pop()
        for imp in imports_of(m):
            if not imp.top_level or imp.target in seen:
                continue
            seen[imp.target] = m
            if imp.target in MODULES:
                todo.append(imp.target)
    return seen


def test_the_client_side_loads_nothing_heavy_and_nothing_of_the_server() -> None:
    closure = _client_closure()
    heavy = {m: by for m, by in closure.items() if m.split(".")[0] in HEAVY}
    server = {m: by for m, by in closure.items() if m.startswith(SERVER_SIDE)}
    assert heavy == {} and server == {}
    assert "memoryd.daemon.rpc.errors" in closure  # the one server module it shares: the code table


def test_only_the_entry_point_imports_the_app() -> None:
    """The app assembles every part; a module that imported it back would depend on all of them."""
    importers = sorted(m for m in MODULES if any(i.target == "memoryd.daemon.app" for i in imports_of(m)))
    assert importers == ["memoryd.daemon.client.cli"]
