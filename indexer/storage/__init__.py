"""Storage backends behind one interface (:mod:`memoryd.indexer.storage.base`).

``embedded`` (the default, :mod:`memoryd.indexer.storage.embedded`) is SQLite + FTS5 + FAISS
in the data directory. ``postgres`` (:mod:`memoryd.indexer.storage.postgres`) keeps the same
rows in PostgreSQL + pgvector, shared by several daemons ("sites").
:func:`memoryd.indexer.storage.factory.open_backend` opens the one ``cfg`` names.
"""

from __future__ import annotations

from memoryd.indexer.storage.site import SITE_FILE, foreign_site, site_id

__all__ = ["SITE_FILE", "foreign_site", "site_id"]
