"""``memoryd migrate-storage``: move an embedded index (SQLite + FAISS) into PostgreSQL, without the model.

Every chunk is copied with its keyword terms and its vector, and the whole
embedding cache with it, so nothing is embedded again (the model is not even
loaded). The embedded index is only read; it stays usable as it is. Each file is
one transaction, so an interrupted migration leaves whole files, and running it
again finishes it (unchanged files are replaced by themselves, keeping their ids).
The identity record (model, dimension, chunking, text rules) goes with the rows:
a database indexed with other settings is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.embedded.store import NewChunk, Store
from memoryd.indexer.storage.postgres import connect, corpus, schema
from memoryd.indexer.storage.postgres.cache import PgEmbeddingCache
from memoryd.indexer.storage.postgres.dsn import describe
from memoryd.indexer.storage.postgres.store import PgStore

BATCH = 500
DB_NAME = "index.sqlite3"  # memoryd.indexer.storage.embedded.backend.DB_NAME (not imported: it loads FAISS)


@dataclass
class Migrated:
    files: int = 0
    chunks: int = 0
    cache_entries: int = 0


def migrate_to_postgres(data_dir: Path, dsn: str, sslmode: str, site: str,
                        progress: Callable[[Migrated], None] | None = None) -> Migrated:
    """Copy the embedded index of ``data_dir`` into the database ``dsn`` as site ``site``."""
    path = data_dir / DB_NAME
    if not path.exists():
        raise StoreError(f"no embedded index in {data_dir} (nothing to migrate)")
    src = Store(path, read_only=True)
    connect.prepare(dsn, sslmode)
    pool = connect.open_pool(dsn, sslmode)
    try:
        pg = PgStore(pool, site, describe(dsn))
        identity = src.meta("identity")
        if identity is None:
            raise StoreError(f"the index in {data_dir} has no identity record (index it once first)")
        dimension = int(json.loads(identity)["dimension"])
        _adopt_identity(pg, identity)
        with pg.connection() as c:
            schema.ensure_hnsw(c, dimension)
        cache = PgEmbeddingCache(pg, dimension, capacity=1 << 62)
        done = Migrated(cache_entries=_copy_cache(src, pg, cache, dimension))
        for root_id, root in src.roots().items():
            pg_root = pg.root_id(root)
            for rel, row in src.files(root_id).items():
                chunks = _chunks_of(src, row.id)
                pg.replace_file(pg_root, rel, row.size, row.mtime_ns, row.sha256, _front_matter(src, row.id), chunks)
                done.files += 1
                done.chunks += len(chunks)
                if progress is not None:
                    progress(done)
        return done
    finally:
        pool.close()
        src.close()


def _adopt_identity(pg: PgStore, identity: str) -> None:
    identity = json.dumps({**json.loads(identity), "pg_writers": corpus.WRITERS_SINCE}, sort_keys=True)
    have = pg.meta("identity")
    if have is not None and json.loads(have) != json.loads(identity):
        with pg.connection() as c:
            row = c.execute("SELECT EXISTS (SELECT 1 FROM memoryd_chunks)").fetchone()
        if row and row[0]:
            raise StoreError(f"database {pg.where} holds chunks indexed with other settings ({have}); "
                             f"this index has {identity}")
    pg.set_meta({"identity": identity})


def _copy_cache(src: Store, pg: PgStore, cache: PgEmbeddingCache, dimension: int) -> int:
    copied = 0
    cur = src.conn.execute("SELECT key, vector FROM embed_cache")
    while rows := cur.fetchmany(BATCH):
        vectors = {bytes(k): np.frombuffer(v, dtype=np.float32) for k, v in rows}
        vectors = {k: v for k, v in vectors.items() if v.shape[0] == dimension}
        with pg.transaction() as c:
            cache.put_many(c, vectors)
        copied += len(vectors)
    return copied


def _chunks_of(src: Store, file_id: int) -> list[NewChunk]:
    rows = src.conn.execute(
        "SELECT c.start_line, c.end_line, c.heading, c.text, c.sha256, c.embed_key, f.terms FROM chunks c"
        " JOIN chunks_fts f ON f.rowid = c.id WHERE c.file_id = ? ORDER BY c.start_line, c.id", (file_id,))
    return [NewChunk(start_line=a, end_line=b, heading=h, text=t, sha256=s, embed_key=bytes(k), terms=terms)
            for a, b, h, t, s, k, terms in rows]


def _front_matter(src: Store, file_id: int) -> str:
    row = src.conn.execute("SELECT front_matter FROM files WHERE id = ?", (file_id,)).fetchone()
    return str(row[0]) if row else ""
