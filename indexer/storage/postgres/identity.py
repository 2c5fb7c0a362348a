"""The shared database's identity: what every site's rows were made with, and what happens when it differs.

A daemon whose identity (:mod:`memoryd.indexer.ingestion.identity`, plus the schema whose writers
keep the corpus counts) differs from the stored one refuses to start while any chunk exists,
because dropping every chunk, as the embedded backend does, would wipe other sites. Dropping them is
explicit (``reindex``, ``memoryd migrate-storage --reindex``): it bumps the database's identity
generation, which every write checks (see :mod:`memoryd.indexer.storage.postgres.backend`).
"""

from __future__ import annotations

import json
from typing import Any

import structlog

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.postgres.store import PgStore

log = structlog.get_logger(__name__)

REINDEX_COMMAND = "memoryd migrate-storage --reindex"
__all__ = ["REINDEX_COMMAND", "IdentityMismatchError", "check_identity", "differences"]


class IdentityMismatchError(StoreError):
    """The database's chunks were made with other settings (model, chunking, text rules) than this memoryd's."""


def check_identity(pg: PgStore, want: dict[str, str], where: str, *, read_only: bool,
                   reindex: bool) -> tuple[int, int, int] | None:
    """Compare the stored identity with ``want``: equal, or stored now (no chunk yet), or every site's rows
    dropped (``reindex``: returns the (files, chunks, generation) dropped); else refuse, saying how to re-index."""
    stored = pg.meta("identity")
    have = json.loads(stored) if stored else None
    if have == want:
        return None
    with pg.connection() as c:
        row = c.execute("SELECT EXISTS (SELECT 1 FROM memoryd_chunks)").fetchone()
    if have is not None and row and row[0] and not reindex:
        raise IdentityMismatchError(
            f"database {where} holds chunks indexed with other settings ({differences(have, want)});"
            f" to re-index every site with this memoryd's settings, stop this daemon and run"
            f" `{REINDEX_COMMAND}` (it drops every site's chunks, keeps the embedding cache; daemons"
            " still on the old settings stop writing until upgraded), or use another database")
    if read_only:
        raise StoreError(f"no index in {where} (run `memoryd index` first)")
    if have is not None and reindex:
        same_vectors = all(have.get(k) == want[k] for k in ("model_id", "dimension"))
        reset = pg.reset_all_sites(json.dumps(want, sort_keys=True), drop_cache=not same_vectors)
        log.warning("storage.reindexed", database=where, site=pg.site, files=reset[0],
                    chunks=reset[1], generation=reset[2], changed=differences(have, want))
        return reset
    pg.set_meta({"identity": json.dumps(want, sort_keys=True)})
    return None


def differences(have: dict[str, Any], want: dict[str, str]) -> str:
    """The stored settings that differ from ``want``, as ``key=stored value`` (for messages; a key
    only one side has shows None on the other)."""
    return ", ".join(f"{k}={have.get(k)}" for k in sorted(have.keys() | want.keys()) if have.get(k) != want.get(k))
