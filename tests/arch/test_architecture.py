"""The daemon's architecture, checked statically from the source's imports (``ast``, nothing imported).

- ``daemon/`` and ``indexer/`` have no import cycle: every import counts, those inside functions
  and under ``if TYPE_CHECKING:`` too (a late or type-only import is no way to break a cycle);
- ``daemon/api`` and ``daemon/rpc`` load neither numpy, FAISS nor onnxruntime at import time;
- ``indexer/`` never imports ``daemon/`` (the library knows nothing of processes and sockets);
- only the entry point imports ``memoryd.daemon.app`` (which assembles everything);
- the client side (``daemon/client/``, the ``memoryd.daemon.cli`` entry point) stays light: what
  it imports at module level, followed transitively, reaches neither numpy/onnxruntime/faiss
  nor the server side. Imports inside functions are not followed: that is how the CLI keeps a
  command's heavy parts (``memoryd run`` loads the daemon) out of every other command.

The indexer's own cycles are checked in ``tests/arch/test_architecture_indexer.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"memoryd.daemon": REPO / "daemon", "memoryd.indexer": REPO / "indexer", "memoryd": REPO / "src" / "memoryd"}
HEAVY = ("numpy", "onnxruntime", "faiss", "onnx", "tokenizers", "watchdog", "apscheduler")
SERVER_SIDE = ("memoryd.daemon.app", "memoryd.daemon.api", "memoryd.daemon.work", "memoryd.daemon.watch",
               "memoryd.daemon.rpc.server", "memoryd.daemon.rpc.connection", "memoryd.indexer.engine")
CLIENT_ROOTS = ("memoryd.daemon.cli", "memoryd.daemon.client")
# Server modules the clients share: the socket's vocabulary (methods, params, replies, modes) and its
# error codes. Both are the standard library only (tests/daemon/test_socket_vocabulary.py checks the vocabulary).
SHARED_WITH_CLIENTS = ("memoryd.daemon.api.vocabulary",)


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


def _walk(node: ast.AST, in_function: bool, type_checking: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it runs later than import time (inside a function); ``if TYPE_CHECKING:``
    blocks only with ``type_checking`` (they never run, but a cycle through them is still one)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.body if type_checking else ():
                yield other, True
                yield from _walk(other, True, type_checking)
            for other in child.orelse:
                yield other, in_function
                yield from _walk(other, in_function, type_checking)
            continue
        inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, inner
        yield from _walk(child, inner, type_checking)


def _resolve(name: str) -> str:
    """The module an imported name lives in: ``a.b.c`` is module ``a.b.c`` if it exists, else ``a.b``."""
    while name and name not in MODULES and "." in name:
        candidate = name.rsplit(".", 1)[0]
        if candidate in MODULES or not any(m.startswith(candidate + ".") for m in MODULES):
            return candidate
        name = candidate
    return name


def imports_of(module: str, type_checking: bool = False) -> list[Import]:
    """What ``module`` imports; a ``TYPE_CHECKING`` import (with ``type_checking``) counts as not top-level."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: list[Import] = []
    for node, in_function in _walk(tree, False, type_checking):
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


def test_no_import_cycle_anywhere_counting_late_and_type_checking_imports() -> None:
    """Across ``daemon/`` and ``indexer/`` together, every import an edge: function-level ones and
    ``if TYPE_CHECKING:`` ones included (a type-only cycle still ties two modules together: neither
    can be read, tested or moved without the other). Importing a name from a package counts as an
    edge to that package, also from inside it (``from memoryd.indexer.storage import x`` in
    ``storage/postgres/index.py`` runs ``storage/__init__``)."""
    graph = {m: _internal(imports_of(m, type_checking=True), "memoryd.") - {m} for m in MODULES}
    found = _cycles(graph)
    assert found == [], "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_type_checking_and_package_edges(tmp_path: Path) -> None:
    """A guard on the check itself: both kinds of edge the older checks missed are found."""
    browse = {i.target for i in imports_of("memoryd.daemon.client.mcp_server", type_checking=True)}
    assert "memoryd.daemon.client.mcp_browse" in browse  # a function-level import
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x.y\nelse:\n    import z\n")
    seen = [(getattr(n, "names", [None])[0].name, late) for n, late in _walk(tree, False, True)
            if isinstance(n, ast.Import)]
    assert ("x.y", True) in seen and ("z", False) in seen
    assert [n for n, _ in _walk(tree, False) if isinstance(n, ast.Import) and n.names[0].name == "x.y"] == []


LIGHT_PACKAGES = ("memoryd.daemon.api", "memoryd.daemon.rpc")
NUMERIC = ("numpy", "faiss", "onnxruntime")
# The library modules in the handlers' import closure that import numpy at module level. None: the
# writer and editor (dedup's candidates, the embedding cache) are named for types only, and the
# context line vectors are imported where they are built. Pinned: a new one fails the test.
# faiss and onnxruntime are allowed nowhere.
NUMPY_USERS: set[str] = set()


def _top_level_closure(roots: tuple[str, ...]) -> dict[str, str]:
    """Every module that importing ``roots`` loads (module-level imports, followed), with who brought it in."""
    seen: dict[str, str] = {}
    todo = [m for m in MODULES if m.startswith(roots)]
    for m in todo:
        seen.setdefault(m, "(root)")
    while todo:
        m = todo.pop()
        for imp in imports_of(m):
            if imp.top_level and imp.target not in seen:
                seen[imp.target] = m
                if imp.target in MODULES:
                    todo.append(imp.target)
    return seen


def _chain(closure: dict[str, str], module: str) -> str:
    out = [module]
    while closure.get(out[-1], "(root)") != "(root)":
        out.append(closure[out[-1]])
    return " <- ".join(out)


def test_the_socket_methods_and_the_wire_load_no_numerical_stack() -> None:
    """``daemon/api`` (the handlers and their ports) and ``daemon/rpc`` import neither numpy, FAISS
    nor onnxruntime at module level, and what they load reaches neither FAISS nor onnxruntime (a
    handler test builds them from fakes, without the index or the model); numpy only through the
    pinned library modules (``NUMPY_USERS``, none today)."""
    closure = _top_level_closure(LIGHT_PACKAGES)
    modules = [m for m in closure if m in MODULES]
    assert "memoryd.daemon.api.read" in modules and "memoryd.daemon.rpc.server" in modules  # the scan saw them
    direct = {m: sorted(i.target for i in imports_of(m) if i.top_level and i.target.split(".")[0] in NUMERIC)
              for m in modules}
    direct = {m: t for m, t in direct.items() if t}
    assert not any(m.startswith(LIGHT_PACKAGES) for m in direct), direct
    assert sorted(_chain(closure, m) for m in closure if m.split(".")[0] in ("faiss", "onnxruntime")) == []
    assert {m for m, t in direct.items() if t != ["numpy"]} == set(), direct
    assert set(direct) <= NUMPY_USERS, sorted(_chain(closure, m) for m in set(direct) - NUMPY_USERS)


def test_importing_every_handler_and_the_wire_loads_no_numerical_module() -> None:
    """The same rule, run: a fresh interpreter imports every module of ``daemon/api`` and ``daemon/rpc``
    and has loaded neither numpy, FAISS nor onnxruntime (a third-party import the static scan does not
    follow would show here)."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys\n"
            "import memoryd.daemon.api as a, memoryd.daemon.rpc as r\n"
            "for p in (a, r):\n"
            "    for m in pkgutil.iter_modules(p.__path__):\n"
            "        importlib.import_module(p.__name__ + '.' + m.name)\n"
            f"print(sorted(m for m in {NUMERIC!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr

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
    server = {m: by for m, by in closure.items() if m.startswith(SERVER_SIDE) and m not in SHARED_WITH_CLIENTS}
    assert heavy == {} and server == {}
    assert "memoryd.daemon.rpc.errors" in closure  # the server modules it shares: the code table,
    assert set(SHARED_WITH_CLIENTS) <= closure.keys()  # and the vocabulary


def test_only_the_entry_point_imports_the_app() -> None:
    """The app assembles every part; a module that imported it back would depend on all of them."""
    importers = sorted(m for m in MODULES if any(i.target == "memoryd.daemon.app" for i in imports_of(m)))
    assert importers == ["memoryd.daemon.client.cli"]
