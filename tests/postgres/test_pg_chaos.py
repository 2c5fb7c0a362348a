"""Crash safety across sites: 20 SIGKILLs spread over two daemons sharing one PostgreSQL, edits
in both roots between kills; then the database must equal a clean index of the files on disk
(0 lost, stale or duplicated chunks) and no daemon may have been refused its restart."""

from __future__ import annotations

import importlib
import random
import signal
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_corpus import counts_drift

BENCH = Path(__file__).resolve().parents[2] / "bench"
FILTER = PathFilter(("*.md",), (".git/*",))
KILLS = 20
WORDS = ["deploy", "garden", "violin", "backup", "寿司", "release", "Lisbon", "pgvector", "nightly", "owner"]

pytestmark = pytest.mark.slow


def _common() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("_common")


def edit(root: Path, rng: random.Random, n: int) -> None:
    """Create, rewrite, append to or delete a few files (what agents and people do)."""
    for _ in range(n):
        f = root / "memory" / f"{rng.randrange(12):02d}.md"
        f.parent.mkdir(parents=True, exist_ok=True)
        action = rng.random()
        if action < 0.15 and f.exists():
            f.unlink()
        elif action < 0.6 and f.exists():
            with f.open("a", encoding="utf-8") as fh:
                fh.write(f"\n## Later {rng.randrange(10**6)}\n\n- the {rng.choice(WORDS)} note {rng.random()}\n")
        else:
            lines = [f"- {rng.choice(WORDS)} {rng.choice(WORDS)} item {i} {rng.randrange(1000)}" for i in range(40)]
            f.write_text("# Notes\n\n" + "\n".join(lines) + "\n", encoding="utf-8")


def chunk_rows(dsn: str) -> dict[str, list[tuple[str, str, int, int, str]]]:
    """Per site: (root, path, start_line, end_line, sha256) of every chunk, sorted (duplicates kept)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT r.site, r.path, f.path, c.start_line, c.end_line, c.sha256 FROM memoryd_chunks c"
            " JOIN memoryd_files f ON f.id = c.file_id JOIN memoryd_roots r ON r.id = f.root_id").fetchall()
    out: dict[str, list[tuple[str, str, int, int, str]]] = {}
    for site, *rest in rows:
        out.setdefault(site, []).append(tuple(rest))  # type: ignore[arg-type]
    return {k: sorted(v) for k, v in out.items()}


def test_twenty_kills_over_two_sites_lose_and_duplicate_nothing(pg_server: Any, tmp_path: Path) -> None:
    c = _common()
    rng = random.Random(7)
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        for db in ("memoryd_chaos", "memoryd_chaos_clean"):
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {db}")
    dsn, clean_dsn = pg_server.dsn("memoryd_chaos"), pg_server.dsn("memoryd_chaos_clean")
    daemons, roots = [], []
    for name in ("a", "b"):
        root = tmp_path / name / "root"
        edit(root, rng, 8)
        cfg = c.write_config(tmp_path / f"{name}.toml", {
            "embedding": {"provider": "hash"},
            "watch": {"debounce_ms": 100, "settle_ms": 50, "max_delay_ms": 500},
            "storage": {"backend": "postgres", "dsn": dsn, "sslmode": "disable", "site": name},
        })
        daemons.append(c.Daemon(tmp_path, [root], tmp_path / name / "data", cfg, name=name))
        roots.append(root)
    try:
        for d in daemons:
            d.start()
        for d in daemons:
            d.wait_idle(timeout=120)
        for kill in range(KILLS):
            d = daemons[kill % 2]
            edit(roots[kill % 2], rng, rng.randrange(1, 5))
            edit(roots[(kill + 1) % 2], rng, rng.randrange(0, 3))
            time.sleep(rng.uniform(0.0, 0.4))  # not synchronisation: where in its work the kill lands
            assert d.proc is not None
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(10)
            d.start()
            d.wait_socket(timeout=120)  # a refused restart (exit 3: the lock) fails here
        for d in daemons:
            d.wait_idle(timeout=300)
        got = chunk_rows(dsn)
        drift = counts_drift(dsn)
    finally:
        for d in daemons:
            d.stop()
    for root, name in zip(roots, ("a", "b"), strict=True):
        clean = open_index(storage_config("postgres", root, tmp_path / name / "clean", clean_dsn, site=name),
                           HashEmbedder(64))
        try:
            reconcile(clean, [root], FILTER)
        finally:
            clean.close()
    want = chunk_rows(clean_dsn)
    assert set(got) == {"a", "b"} and got == want  # same chunks, same count of each: none lost, stale or doubled
    assert drift == {}  # BM25's kept counts agree with the postings: no killed write left them half-done
