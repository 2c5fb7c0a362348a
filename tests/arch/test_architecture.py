"""The daemon's architecture, checked statically from the source's imports (``tests/arch/import_graph.py``).

- ``daemon/`` and ``indexer/`` have no import cycle: every import counts, those inside functions
  and under ``if TYPE_CHECKING:`` too (a late or type-only import is no way to break a cycle);
- ``daemon/api`` and ``daemon/rpc`` load neither numpy, FAISS nor onnxruntime at import time;
- only the entry point imports ``memoryd.daemon.app`` (which assembles everything);
- the client side (``daemon/client/``, the ``memoryd.daemon.cli`` entry point) stays light: what
  it imports at module level, followed transitively, reaches neither numpy/onnxruntime/faiss
  nor the server side. Imports inside functions are not followed: that is how the CLI keeps a
  command's heavy parts (``memoryd run`` loads the daemon) out of every other command.

Which layer may import which (``indexer`` never ``daemon``, the transport never the handlers ...) is
the layer table in ``tests/arch/test_layers.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.arch.import_graph import FOLDERS, REPO, chain, cycles, describe, edges_of, modules_in, read_graph

HEAVY = ("numpy", "onnxruntime", "faiss", "onnx", "tokenizers", "watchdog", "apscheduler")
SERVER_SIDE = ("memoryd.daemon.app", "memoryd.daemon.assembly", "memoryd.daemon.api", "memoryd.daemon.work",
               "memoryd.daemon.watch", "memoryd.daemon.rpc.server", "memoryd.daemon.rpc.connection",
               "memoryd.indexer.engine")
CLIENT_ROOTS = ("memoryd.daemon.cli", "memoryd.daemon.client")
# Server modules the clients share: the socket's vocabulary (methods, params, replies, modes) and its
# error codes. Both are the standard library only (tests/daemon/test_socket_vocabulary.py checks the vocabulary).
SHARED_WITH_CLIENTS = ("memoryd.daemon.api.vocabulary",
                       "memoryd.daemon.api")  # the package, run first: its __init__ imports nothing (same test)
GRAPH = read_graph(modules_in(FOLDERS))
MODULES = GRAPH.modules


def test_the_import_reader_sees_the_known_edges() -> None:
    """A guard on the reader itself: edges we know exist are found, each with when it runs."""
    app = GRAPH.targets("memoryd.daemon.app")
    assert {"memoryd.daemon.assembly", "memoryd.daemon.work.worker", "memoryd.indexer.engine"} <= app
    assert "memoryd.daemon.api.read" in GRAPH.targets("memoryd.daemon.assembly")
    cli = {(e.target, e.when) for e in GRAPH.out_of("memoryd.daemon.client.cli")}
    assert ("memoryd.daemon.app", "function") in cli  # `memoryd run`, loaded lazily
    assert ("memoryd.daemon.client.cli_write", "module") in cli  # `from package import module`


def test_the_reader_tells_module_function_and_type_checking_imports_apart() -> None:
    source = ("from typing import TYPE_CHECKING\nimport numpy\nif TYPE_CHECKING:\n    import x.y\n"
              "    def f():\n        import w\nelse:\n    import z\nclass C:\n    import v\n"
              "def g():\n    import u\n    if TYPE_CHECKING:\n        import t\n")
    seen = {(e.target, e.when) for e in edges_of("m", source, {"m"}, False)}
    assert seen == {("typing", "module"), ("numpy", "module"), ("x.y", "type_checking"), ("w", "type_checking"),
                    ("z", "module"), ("v", "module"), ("u", "function"), ("t", "type_checking")}


def test_no_import_cycle_anywhere_counting_late_and_type_checking_imports() -> None:
    """Across ``daemon/`` and ``indexer/`` together, every import an edge: function-level ones and
    ``if TYPE_CHECKING:`` ones included (a type-only cycle still ties two modules together: neither
    can be read, tested or moved without the other). Importing a name from a package counts as an
    edge to that package, also from inside it (``from memoryd.indexer.storage import x`` in
    ``storage/postgres/index.py`` runs ``storage/__init__``)."""
    graph = GRAPH.internal()
    assert len([m for m in graph if m.startswith("memoryd.indexer")]) > 50  # the scan saw the library
    found = cycles(graph)
    assert found == [], " | ".join(describe(c, graph) for c in found)


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return read_graph(modules_in({"pkg": tmp_path / "pkg"})).internal(prefix="pkg")


def test_a_package_init_counts_but_not_for_its_own_submodules(tmp_path: Path) -> None:
    graph = _tree(tmp_path, {
        "pkg/__init__.py": "from pkg.sub import mod\n", "pkg/sub/__init__.py": "",
        "pkg/sub/mod.py": "from pkg import helper\n\ndef f():\n    from pkg.sub import mod\n",
        "pkg/helper.py": "from . import sub\n", "pkg/other.py": "import pkg.sub.mod\n"})
    assert graph["pkg.sub.mod"] == {"pkg.helper"}  # not its own ancestors, pkg and pkg.sub
    assert graph["pkg.helper"] == {"pkg.sub"}
    assert graph["pkg.other"] == {"pkg.sub.mod", "pkg.sub"}  # pkg.sub's __init__ runs first; pkg is its own
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.mod"}
    assert graph["pkg.sub"] == set()


def test_a_name_from_an_ancestor_package_is_an_edge(tmp_path: Path) -> None:
    """``storage/__init__`` <-> ``storage/postgres/index.py`` went unseen once: the module took a name from
    its own ancestor package, whose ``__init__`` imports the module back inside a function."""
    graph = _tree(tmp_path, {
        "pkg/__init__.py": "def site():\n    return 1\n\ndef open_it():\n    from pkg.back import mod\n",
        "pkg/back/__init__.py": "", "pkg/back/mod.py": "from pkg import site\nfrom pkg.back import other\n",
        "pkg/back/other.py": ""})
    assert graph["pkg.back.mod"] == {"pkg", "pkg.back.other"}  # the name from pkg counts; pkg.back's runs first
    assert cycles(graph) == [["pkg", "pkg.back.mod"]]


def test_a_type_checking_cycle_is_a_cycle(tmp_path: Path) -> None:
    late = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    graph = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n", "pkg/b.py": late})
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


LIGHT_PACKAGES = ("memoryd.daemon.api", "memoryd.daemon.rpc")
NUMERIC = ("numpy", "faiss", "onnxruntime")
# The library modules in the handlers' import closure that import numpy at module level. None: the
# writer and editor (dedup's candidates, the embedding cache) are named for types only, and the
# context line vectors are imported where they are built. Pinned: a new one fails the test.
# faiss and onnxruntime are allowed nowhere.
NUMPY_USERS: set[str] = set()


def test_the_socket_methods_and_the_wire_load_no_numerical_stack() -> None:
    """``daemon/api`` (the handlers and their ports) and ``daemon/rpc`` import neither numpy, FAISS
    nor onnxruntime at module level, and what they load reaches neither FAISS nor onnxruntime (a
    handler test builds them from fakes, without the index or the model); numpy only through the
    pinned library modules (``NUMPY_USERS``, none today)."""
    closure = GRAPH.closure(LIGHT_PACKAGES)
    modules = [m for m in closure if m in MODULES]
    assert "memoryd.daemon.api.read" in modules and "memoryd.daemon.rpc.server" in modules  # the scan saw them
    direct = {m: sorted({e.target.split(".")[0] for e in GRAPH.out_of(m, ("module",))} & set(NUMERIC))
              for m in modules}
    direct = {m: t for m, t in direct.items() if t}
    assert not any(m.startswith(LIGHT_PACKAGES) for m in direct), direct
    assert sorted(chain(closure, m) for m in closure if m.split(".")[0] in ("faiss", "onnxruntime")) == []
    assert {m for m, t in direct.items() if t != ["numpy"]} == set(), direct
    assert set(direct) <= NUMPY_USERS, sorted(chain(closure, m) for m in set(direct) - NUMPY_USERS)


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


def test_the_client_side_loads_nothing_heavy_and_nothing_of_the_server() -> None:
    closure = GRAPH.closure(CLIENT_ROOTS)
    heavy = {m: by for m, by in closure.items() if m.split(".")[0] in HEAVY}
    server = {m: by for m, by in closure.items() if m.startswith(SERVER_SIDE) and m not in SHARED_WITH_CLIENTS}
    assert heavy == {} and server == {}
    assert "memoryd.daemon.rpc.errors" in closure  # the server modules it shares: the code table,
    assert set(SHARED_WITH_CLIENTS) <= closure.keys()  # and the vocabulary


def test_only_the_entry_point_imports_the_app() -> None:
    """The app assembles every part; a module that imported it back would depend on all of them."""
    importers = sorted({e.source for e in GRAPH.edges if e.target == "memoryd.daemon.app"})
    assert importers == ["memoryd.daemon.client.cli"]
