"""The index knows no backend: the seam of issue #39, checked from the source (``ast``, nothing imported).

- the backend-agnostic side (``engine.py``, ``ingestion/indexing.py``) imports no module of a
  backend's package and no storage driver (sqlite3, FAISS, psycopg), wherever the import sits
  (function-level and ``TYPE_CHECKING`` ones count), and the engine names none of the embedded
  backend's parts;
- a backend's runtime (its ``backend`` module) is imported only by its own package, the factory
  (``storage/factory.py``), the type checker's proof (``storage/conformance.py``) and, for
  PostgreSQL, the one command that exists only for it (``migrate-storage --reindex``): adding a
  backend touches its package, the factory and config (docs/backends.md);
- both ``engine.py`` and ``MemoryIndex`` stay well under the house's 400 lines.
"""

from __future__ import annotations

import ast

from tests.arch.import_graph import FOLDERS, modules_in, read_graph

GRAPH = read_graph(modules_in(FOLDERS))
MODULES = GRAPH.modules

AGNOSTIC = ("memoryd.indexer.engine", "memoryd.indexer.ingestion.indexing")
BACKEND_PACKAGES = ("memoryd.indexer.storage.embedded", "memoryd.indexer.storage.postgres")
DRIVERS = ("sqlite3", "faiss", "psycopg", "psycopg_pool")
BACKEND_MODULES = {"memoryd.indexer.storage.embedded.backend": "memoryd.indexer.storage.embedded",
                   "memoryd.indexer.storage.postgres.backend": "memoryd.indexer.storage.postgres"}
MAY_NAME_A_BACKEND = {"memoryd.indexer.storage.factory", "memoryd.indexer.storage.conformance"}
POSTGRES_ONLY_COMMANDS = {"memoryd.daemon.client.cli_storage"}  # migrate-storage --reindex
EMBEDDED_PARTS = ("sqlite", "faiss", "local_cache", "readers")


def _within(target: str, packages: tuple[str, ...]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in packages)


def test_the_backend_agnostic_side_imports_no_backend_and_no_driver() -> None:
    bad = [str(e) for m in AGNOSTIC for e in GRAPH.out_of(m)
           if _within(e.target, BACKEND_PACKAGES) or _within(e.target, DRIVERS)]
    assert not bad, "the index must reach storage through storage.base and the factory only: " + "; ".join(bad)


def test_the_engine_names_none_of_the_embedded_backends_parts() -> None:
    tree = ast.parse(MODULES["memoryd.indexer.engine"].read_text(encoding="utf-8"))
    used = sorted({f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr in EMBEDDED_PARTS
                   and isinstance(node.value, ast.Name)})
    assert used == [], f"MemoryIndex reaches into a backend's parts: {used}"


def test_only_the_factory_and_the_backends_own_package_import_a_backend() -> None:
    bad = []
    for module in MODULES:
        for e in GRAPH.out_of(module):
            home = BACKEND_MODULES.get(e.target)
            postgres = home == "memoryd.indexer.storage.postgres"
            allowed = MAY_NAME_A_BACKEND | (POSTGRES_ONLY_COMMANDS if postgres else set())
            if home is not None and not _within(module, (home,)) and module not in allowed:
                bad.append(str(e))
    assert not bad, "; ".join(bad)


def test_the_index_is_well_under_the_house_limit() -> None:
    source = MODULES["memoryd.indexer.engine"].read_text(encoding="utf-8")
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "MemoryIndex")
    assert cls.end_lineno is not None
    assert len(source.splitlines()) < 350 and cls.end_lineno - cls.lineno < 300
