"""The PostgreSQL + pgvector backend: many daemons ("sites"), one shared memory.

Files are keyed by (site, root, path); every site's chunks are searchable by every
daemon (or a chosen list of sites); the embedding cache is one table keyed by the
text's SHA-256 (which binds the model id), so a text embedded on one machine is
never embedded again on another. The schema is created and migrated by memoryd
(:mod:`.schema`). Needs ``pip install 'memoryd[postgres]'`` (psycopg 3, psycopg_pool).
"""
