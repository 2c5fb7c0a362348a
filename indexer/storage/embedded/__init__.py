"""The embedded backend: SQLite (+ FTS5) and FAISS in the data directory, one daemon per index.

:mod:`.store` holds the rows (the source of truth), :mod:`.cache` the embedding cache in the
same database, :mod:`.vectors` the FAISS structure (its policy in :mod:`.ann`, its repair on
open in :mod:`.vector_sync`), :mod:`.store_lines` the line vectors, :mod:`.hybrid` the query
legs, :mod:`.sqlite_wal` the WAL switch every connection makes.
"""
