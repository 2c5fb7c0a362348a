"""The layer table: which part of memoryd may not import which, read from the source (``tests/arch/import_graph.py``).

Every import counts — module level, inside a function, under ``if TYPE_CHECKING:`` — because a late or
type-only import still ties the module to the other one (a TYPE_CHECKING import of the worker into
``daemon/api/ports.py`` passed every older architecture test). A layer is a list of modules, a package
standing for everything under it; a rule ``A ↛ B`` forbids every edge from a module of A to one of B.

``KNOWN`` pins the edges that still break a rule, each with the work that removes it: a new breach fails,
and so does a pin whose edge is gone (remove it, the rule then holds whole).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.arch.import_graph import FOLDERS, Edge, Graph, cycles, edges_of, modules_in, read_graph

IX, D = "memoryd.indexer.", "memoryd.daemon."

#: layer -> the modules it holds (a package stands for everything under it).
LAYERS: dict[str, tuple[str, ...]] = {
    # shared ground: the error tree, config, the path guard, the session grammar, atomic files, XDG paths
    "core": tuple(IX + m for m in ("errors", "config", "settings", "pathguard", "access",
                                  "atomic", "paths", "types")),
    "markdown": (IX + "markdown",),  # pure Markdown text: outline, blocks, exact lines, edits, patches
    "redaction": (IX + "redaction",),  # the one secret detector, for writes, ingestion and logs
    "ingestion": (IX + "ingestion",),  # files -> chunks -> vectors
    "storage": (IX + "storage",),
    "engine": (IX + "engine",),
    "bank": (IX + "bank",),
    "write": (IX + "write",),
    "indexer": ("memoryd.indexer",),
    "daemon": ("memoryd.daemon",),
    "api": (D + "api",),  # the socket methods and their ports
    "rpc": (D + "rpc",),  # the transport
    "worker": (D + "work.worker",),  # the concrete background worker
}

#: layer -> modules under its packages that are not of it.
OUTSIDE: dict[str, tuple[str, ...]] = {}

#: (from, to, why): no module of ``from`` imports one of ``to``.
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("core", "write", "config, errors and the path guard are what the write path is built on"),
    ("core", "bank", "the bank's layout is built on config, not the other way"),
    ("core", "engine", "shared ground knows no index"),
    ("core", "storage", "shared ground knows no backend"),
    ("markdown", "write", "text editing is below the pipeline that decides what to edit"),
    ("markdown", "bank", "the bank's tables are edited with the Markdown helpers"),
    ("markdown", "engine", "pure text"),
    ("redaction", "write", "ingestion and the logs redact too, and sit below the write path"),
    ("redaction", "engine", "pure text"),
    ("ingestion", "write", "indexing a file never needs the write pipeline"),
    ("engine", "write", "the index is written to by the writer, never the other way"),
    ("bank", "write", "the writer applies the bank's edits; the bank does not call the writer"),
    ("storage", "engine", "a backend serves the engine; it does not build on it"),
    ("storage", "write", "a backend stores rows; what a write means is not its business"),
    ("indexer", "daemon", "the library knows nothing of processes, threads and sockets"),
    ("rpc", "api", "the transport carries requests; what they mean is the application's"),
    ("api", "worker", "the handlers reach the worker through ports, never its concrete class"),
)

#: Edges that still break a rule, as "source -> target", each with the work that removes it.
KNOWN: dict[str, str] = {
}


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _in(module: str, layer: str) -> bool:
    return _under(module, LAYERS[layer]) and not _under(module, OUTSIDE.get(layer, ()))


def breaches(graph: Graph) -> dict[str, list[Edge]]:
    """Rule ("A ↛ B") -> the edges that break it, every kind of import counted."""
    out: dict[str, list[Edge]] = {}
    for source, target, _why in FORBIDDEN:
        hits = [e for e in graph.edges if _in(e.source, source) and _in(e.target, target)]
        if hits:
            out[f"{source} ↛ {target}"] = hits
    return out


def _pairs(found: dict[str, list[Edge]]) -> set[str]:
    return {f"{e.source} -> {e.target}" for edges in found.values() for e in edges}


GRAPH = read_graph(modules_in(FOLDERS))


def test_every_layer_names_modules_that_exist() -> None:
    """A layer whose modules were moved away would hold nothing and pass every rule."""
    empty = [name for name, mods in LAYERS.items()
             if not all(any(m == p or m.startswith(p + ".") for m in GRAPH.modules) for p in mods)]
    assert empty == []


def test_the_layers_point_one_way() -> None:
    found = breaches(GRAPH)
    new = sorted(str(e) for edges in found.values() for e in edges if f"{e.source} -> {e.target}" not in KNOWN)
    assert new == [], "\n".join(new)
    assert sorted(set(KNOWN) - _pairs(found)) == [], "these pinned breaches are gone: remove them from KNOWN"


#: Folder loops of ``indexer/`` still open, each with the work that removes it (pinned as ``KNOWN`` is).
KNOWN_FOLDER_LOOPS: dict[tuple[str, ...], str] = {
    tuple(IX + f for f in ("engine", "fill", "ingestion", "search", "storage")):
        "issue 39 item 2: ingestion/reconcile drives the engine, the backends' legs import search/, search/ "
        "imports storage/ (its rows), a backend holds fill/'s backlog",
}


def test_the_indexer_folders_have_no_cycle() -> None:
    """Folder by folder (a package or a loose module of ``indexer/``), no loop: storage -> engine -> write ->
    storage was one; a folder that needs another folder that needs it back cannot be read alone. No loop
    passes through write/, bank/, markdown/, redaction/ or the shared ground; the one left is pinned."""
    def folder(module: str) -> str:
        return ".".join(module.split(".")[:3])
    graph: dict[str, set[str]] = {}
    for e in GRAPH.edges:
        if e.source.startswith(IX) and e.target.startswith(IX):
            graph.setdefault(folder(e.source), set())
            graph.setdefault(folder(e.target), set())
            if folder(e.source) != folder(e.target):
                graph[folder(e.source)].add(folder(e.target))
    assert len(graph) > 10  # the scan saw the library
    assert {tuple(c) for c in cycles(graph)} == set(KNOWN_FOLDER_LOOPS)


def _planted(graph: Graph, module: str, extra: str) -> Graph:
    """``graph`` as if ``module``'s source ended with ``extra``."""
    text = graph.modules[module].read_text(encoding="utf-8") + "\n" + extra
    planted = edges_of(module, text, set(graph.modules), graph.modules[module].name == "__init__.py")
    return Graph(graph.modules, tuple(e for e in graph.edges if e.source != module) + tuple(planted))


@pytest.mark.parametrize(("module", "extra", "rule"), [
    (D + "api.ports", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memoryd.daemon.work.worker import "
     "Worker\n", "api ↛ worker"),
    (D + "rpc.jsonrpc", "def f():\n    from memoryd.daemon.api import read\n", "rpc ↛ api"),
    (IX + "config", "from memoryd.indexer.write import writer\n", "core ↛ write"),
    (IX + "pathguard", "import memoryd.indexer.write.intake\n", "core ↛ write"),
    (IX + "storage.site", "def f():\n    from memoryd.indexer import engine\n", "storage ↛ engine"),
    (IX + "markdown.mdedit", "from memoryd.indexer.write.lexical import values\n", "markdown ↛ write"),
    (IX + "ingestion.ingest", "def f():\n    from memoryd.indexer.write import writer\n", "ingestion ↛ write"),
    (IX + "ingestion.chunker", "from memoryd.daemon.api import ports\n", "indexer ↛ daemon"),
])
def test_a_planted_forbidden_import_is_caught(module: str, extra: str, rule: str) -> None:
    """The table bites: one forbidden import, of any kind, planted in a real module, breaks its rule."""
    assert module in GRAPH.modules
    found = breaches(_planted(GRAPH, module, extra))
    assert rule in found and any(e.source == module for e in found[rule]), sorted(found)


def test_a_forbidden_import_in_a_fresh_tree_is_caught(tmp_path: Path) -> None:
    """The same from files: the reader finds the planted edges in a tree on disk, of all three kinds."""
    for rel, text in {
        "daemon/__init__.py": "", "daemon/api/__init__.py": "", "daemon/work/__init__.py": "",
        "daemon/work/worker.py": "class Worker: ...\n",
        "daemon/api/ports.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from memoryd.daemon.work.worker import Worker\n",
        "indexer/__init__.py": "", "indexer/write/__init__.py": "", "indexer/write/access.py": "",
        "indexer/config.py": "from memoryd.indexer.write.access import parse_binding\n",
        "indexer/storage/__init__.py": "def open_index():\n    from memoryd.indexer.engine import MemoryIndex\n",
        "indexer/engine.py": "",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = read_graph(modules_in({"memoryd.daemon": tmp_path / "daemon", "memoryd.indexer": tmp_path / "indexer"}))
    found = {rule: sorted((e.source, e.when) for e in edges) for rule, edges in breaches(graph).items()}
    assert found["api ↛ worker"] == [(D + "api.ports", "type_checking")]
    assert (IX + "config", "module") in found["core ↛ write"]
    assert found["storage ↛ engine"] == [(IX + "storage", "function")]
