"""The PostgreSQL schema, created and migrated by memoryd itself.

Migrations are numbered from 1 and applied in order, each in the same transaction
as the version bump, under a transaction-level advisory lock so that two daemons
starting together never migrate twice. A database whose version is *newer* than
this memoryd knows is refused (:class:`SchemaTooNewError`): an old daemon must not
write rows a newer schema gives another meaning.

Tables are prefixed ``memoryd_`` so the database can be shared with other users.
The keyword index is ``memoryd_postings``: one row per (term, chunk) with the term's
frequency and the chunk's length, all four in its primary key (tf and dl as INCLUDE
columns), so BM25 is an index-only range scan per query term
(a ``tsvector`` + GIN index had to fetch and unpack every matching row: 3-5x slower).
Vectors are pgvector ``vector`` values; the column is untyped (the dimension is the
model's, recorded in the identity) and the HNSW index is an expression index on
``embedding::vector(D)`` created once the dimension is known (:func:`ensure_hnsw`).
"""

from __future__ import annotations

from typing import Any

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.base import SchemaTooNewError


class SchemaDamagedError(StoreError):
    """memoryd_meta holds something no memoryd wrote (a schema version that is not a number)."""

MIGRATION_LOCK = 0x6D656D6F7279  # "memory": serialises migrations across daemons
GENERATION_KEY = "identity_generation"  # memoryd_meta: bumped each time every site's chunks are dropped
EF_SEARCH = 128  # HNSW search breadth (pgvector's default is 40); the embedded HNSW starts at 128 too
EF_SEARCH_MAX = 1000  # pgvector accepts 1-1000


def session_ef_search(chunks: int) -> int:
    """A session's HNSW search breadth for a table of ``chunks`` rows: recall falls as the graph grows.

    The embedded index's policy (:func:`memoryd.indexer.storage.embedded.ann.ef_search`): ``chunks / 1000`` from
    :data:`EF_SEARCH` up to :data:`EF_SEARCH_MAX` (pgvector's limit; the embedded index goes to
    1024). On the benchmark's vectors at ~1M chunks pgvector's default graph (m 16,
    ef_construction 64) found 0.33 of the true top 10 at 128 and 0.77 at 1000, for 3.4 -> 16 ms
    per warm 50-row query (docs/scaling.md, "1M chunks on PostgreSQL").
    """
    return max(EF_SEARCH, min(EF_SEARCH_MAX, chunks // 1000))

# Makes every daemon whose identity lacks this ``pg_writers`` stop writing at its next write
# (memoryd.indexer.storage.postgres.backend, "identity generation"); the value is corpus.WRITERS_SINCE.
FENCE_OLDER_WRITERS = """
    UPDATE memoryd_meta SET value = (value::jsonb || '{"pg_writers": "3"}'::jsonb)::text WHERE key = 'identity';
    UPDATE memoryd_meta SET value = (value::bigint + 1)::text WHERE key = 'identity_generation';
    """

MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema.
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE memoryd_roots (
        id bigserial PRIMARY KEY, site text NOT NULL, path text NOT NULL, UNIQUE (site, path));
    CREATE TABLE memoryd_files (
        id bigserial PRIMARY KEY,
        root_id bigint NOT NULL REFERENCES memoryd_roots(id),
        path text NOT NULL,
        size bigint NOT NULL,
        mtime_ns bigint NOT NULL,
        sha256 text NOT NULL,
        front_matter text NOT NULL DEFAULT '',
        UNIQUE (root_id, path));
    CREATE TABLE memoryd_chunks (
        id bigserial PRIMARY KEY,
        file_id bigint NOT NULL REFERENCES memoryd_files(id) ON DELETE CASCADE,
        start_line integer NOT NULL,
        end_line integer NOT NULL,
        heading text NOT NULL,
        text text NOT NULL,
        sha256 text NOT NULL,
        embed_key bytea NOT NULL,
        terms text NOT NULL,
        n_terms integer NOT NULL,
        embedding vector NOT NULL);
    CREATE INDEX memoryd_chunks_by_file ON memoryd_chunks (file_id);
    CREATE INDEX memoryd_chunks_by_key ON memoryd_chunks (embed_key);
    CREATE TABLE memoryd_postings (
        term text NOT NULL,
        chunk_id bigint NOT NULL REFERENCES memoryd_chunks(id) ON DELETE CASCADE,
        tf integer NOT NULL,
        dl integer NOT NULL,
        PRIMARY KEY (term, chunk_id));
    CREATE INDEX memoryd_postings_by_chunk ON memoryd_postings (chunk_id);
    CREATE TABLE memoryd_embed_cache (
        key bytea PRIMARY KEY, vector vector NOT NULL, last_used double precision NOT NULL);
    CREATE INDEX memoryd_embed_cache_lru ON memoryd_embed_cache (last_used);
    """,
    # 2: the postings' key carries tf and dl, so BM25 reads a term's postings from the index alone
    # (an index-only scan) instead of visiting a heap page per posting: 2.7 -> 0.4 ms for a
    # 1,000-posting term at 100k chunks. BM25's corpus figures (rows, sum of lengths) likewise
    # come from an index of (id, n_terms) instead of a scan of every chunk row: 15 -> 0.6 ms at 10k.
    """
    ALTER TABLE memoryd_postings DROP CONSTRAINT memoryd_postings_pkey,
        ADD CONSTRAINT memoryd_postings_pkey PRIMARY KEY (term, chunk_id) INCLUDE (tf, dl);
    CREATE INDEX memoryd_chunks_terms ON memoryd_chunks (id) INCLUDE (n_terms);
    """,
    # 3: BM25's corpus counts, kept by every write (memoryd.indexer.storage.postgres.corpus): a
    # query reads a term's document frequency from one row instead of counting its postings
    # (5-10 ms for common words at 100k chunks), and the table's totals likewise. Daemons older
    # than this schema would write postings without the counts: "pg_writers" in the identity and
    # a new identity generation make them stop writing at their next write.
    # The fence comes first: its update waits for every older write that already passed its
    # generation check; the table lock then waits for the rest (deletes take no such check) and
    # holds new ones off until the counts below, read from a still table, are committed.
    FENCE_OLDER_WRITERS + """
    LOCK TABLE memoryd_chunks, memoryd_postings IN SHARE MODE;
    CREATE TABLE memoryd_terms (term text PRIMARY KEY, df bigint NOT NULL);
    INSERT INTO memoryd_terms (term, df) SELECT term, count(*) FROM memoryd_postings GROUP BY term;
    CREATE TABLE memoryd_totals (
        id integer PRIMARY KEY CHECK (id = 1), chunks bigint NOT NULL, terms bigint NOT NULL,
        writes bigint NOT NULL);
    INSERT INTO memoryd_totals SELECT 1, count(*), coalesce(sum(n_terms), 0), 0 FROM memoryd_chunks;
    """,
    # 4: who each site is (memoryd.indexer.storage.postgres.sites): the host, pid and data directory of
    # the process that last claimed it, and when it was last heard from, so that `memoryd sites list`
    # and `status` can tell a live site from a stale one and `memoryd sites drop` can remove the
    # latter. Older daemons keep writing correctly (they only never fill it in).
    """
    CREATE TABLE IF NOT EXISTS memoryd_sites (
        site text PRIMARY KEY, host text NOT NULL DEFAULT '', pid integer, data_dir text NOT NULL DEFAULT '',
        version text NOT NULL DEFAULT '', started double precision, last_contact double precision);
    INSERT INTO memoryd_sites (site) SELECT DISTINCT site FROM memoryd_roots ON CONFLICT DO NOTHING;
    """,
    # 5: keyword first (memoryd.indexer.fill.deferred): a chunk may be committed before its vector (NULL until the
    # vector backlog writes it), so a large first index is keyword-searchable at once. The partial index holds
    # only those rows: a restart finds this site's backlog, and ``status`` counts it, without a table scan.
    # The vector leg skips them (the HNSW index holds no NULL anyway). Daemons older than this schema refuse
    # to start on it; one still running reads a vectorless chunk only through an exact (non-HNSW) vector scan
    # asking for more rows than have a vector: upgrade every daemon before the first keyword-first index.
    """
    ALTER TABLE memoryd_chunks ALTER COLUMN embedding DROP NOT NULL;
    CREATE INDEX IF NOT EXISTS memoryd_chunks_vectorless ON memoryd_chunks (id) WHERE embedding IS NULL;
    """,
    # 6: each chunk's line vectors (memoryd.indexer.fill.line_vectors): one row per chunk, its non-blank lines'
    # vectors as float16, written by the daemon's idle steps after the chunk vectors and read by the ranking
    # of hits 4+. The row goes with its chunk (the foreign key), so the chunks without one are the backlog.
    # Stored uncompressed (EXTERNAL): float16 vectors do not compress, and a search reads its candidates' rows whole.
    # Daemons older than this schema refuse to start on it; one still running writes and deletes chunks as
    # before (their rows go with them) but fills no row: a search whose candidates include its site's chunks
    # keeps the order it had before (the blend waits for every candidate's row).
    """
    CREATE TABLE IF NOT EXISTS memoryd_line_vectors (
        chunk_id bigint PRIMARY KEY REFERENCES memoryd_chunks(id) ON DELETE CASCADE,
        vectors bytea NOT NULL);
    ALTER TABLE memoryd_line_vectors ALTER COLUMN vectors SET STORAGE EXTERNAL;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: Any) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION` (in one transaction); returns the version found.

    ``conn`` is a psycopg connection outside a transaction.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS memoryd_meta (key text PRIMARY KEY, value text NOT NULL)")
        row = conn.execute("SELECT value FROM memoryd_meta WHERE key = 'schema_version'").fetchone()
        found = _number(row[0]) if row else 0
        if found > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"database schema version {found} is newer than this memoryd's ({SCHEMA_VERSION}): "
                "upgrade memoryd before connecting it")
        for sql in MIGRATIONS[found:]:
            conn.execute(sql)
        if found < SCHEMA_VERSION:
            conn.execute(
                "INSERT INTO memoryd_meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
    return found


def version(conn: Any) -> int:
    """The database's schema version (0: memoryd never migrated it)."""
    row = conn.execute("SELECT to_regclass('memoryd_meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    row = conn.execute("SELECT value FROM memoryd_meta WHERE key = 'schema_version'").fetchone()
    return _number(row[0]) if row else 0


def _number(value: Any) -> int:
    """The stored schema version; a value that is no version number is a clear refusal, not a ValueError."""
    text = str(value).strip()
    if not text.isascii() or not text.isdigit():
        raise SchemaDamagedError(
            f"memoryd_meta.schema_version is {text[:40]!r}, not a version number: this database was not made by"
            " memoryd, or its memoryd_meta table was edited; restore it from a backup or point memoryd at"
            " another database")
    return int(text)


def hnsw_cast(dimension: int) -> str:
    """The SQL type every vector comparison casts to: the expression the HNSW index is built on."""
    return f"vector({int(dimension)})"


def ensure_hnsw(conn: Any, dimension: int) -> None:
    """Create the cosine HNSW index for ``dimension`` if missing (idempotent, serialised)."""
    dim = int(dimension)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(f"CREATE INDEX IF NOT EXISTS memoryd_chunks_hnsw_{dim} ON memoryd_chunks"
                     f" USING hnsw ((embedding::{hnsw_cast(dim)}) vector_cosine_ops)")
