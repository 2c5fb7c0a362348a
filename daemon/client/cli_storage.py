"""``memoryd migrate-storage``: copy the embedded index into the configured PostgreSQL, without re-embedding.

Runs in-process (no daemon): stop the daemon first, migrate, then set
``storage.backend = "postgres"`` and start it again. ``--reindex`` instead upgrades a
PostgreSQL database whose chunks were made with other settings (a new memoryd): it drops
every site's chunks, keeps the shared embedding cache and re-indexes this site's roots. ``memoryd.daemon.cli`` adds
the parser with :func:`add_parsers` and dispatches through :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command


def add_parsers(sub: Any) -> None:
    from memoryd.daemon.client import cli_sites

    cli_sites.add_parsers(sub)  # `memoryd sites`: registered here, beside the other storage commands
    p = command(sub, "migrate-storage",
                "copy the embedded index (SQLite + FAISS) into PostgreSQL: vectors and cache too, no re-embedding",
                "memoryd migrate-storage   # storage.dsn (or $MEMORYD_PG_DSN) names the database",
                "memoryd migrate-storage --data-dir ~/.local/state/memoryd --site laptop",
                "memoryd migrate-storage --reindex   # after an upgrade the database refused: re-index every site")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--data-dir", type=Path, help="the embedded index to copy (default: the configured one)")
    p.add_argument("--site", help="site id to store the files under (default: storage.site, else host:data_dir)")
    p.add_argument("--reindex", action="store_true",
                   help="after upgrading memoryd: drop EVERY site's chunks in storage.dsn (the embedding cache stays),"
                        " record this memoryd's settings and re-index this site's roots; daemons of other sites"
                        " still on the old settings stop writing until upgraded and restarted")


def cmd_migrate_storage(args: argparse.Namespace) -> int:
    from memoryd.daemon.datalock import DataDirLock
    from memoryd.indexer import config as configmod
    from memoryd.indexer.errors import ConfigError
    from memoryd.indexer.storage import site_id
    from memoryd.indexer.storage.migrate import migrate_to_postgres
    from memoryd.indexer.storage.postgres.dsn import describe

    cfg = configmod.with_overrides(configmod.load(args.config), data_dir=args.data_dir)
    if not cfg.storage.dsn:
        raise ConfigError(f"migrate-storage needs a PostgreSQL DSN: set storage.dsn or {configmod.PG_DSN_ENV}")
    site = site_id(args.site or cfg.storage.site, cfg.data_dir)
    lock = DataDirLock(cfg.data_dir)  # no daemon may change the index while it is copied
    lock.acquire()
    try:
        if args.reindex:
            return _reindex(dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, site=site)))
        done = migrate_to_postgres(cfg.data_dir, cfg.storage.dsn, cfg.storage.sslmode, site)
    finally:
        lock.release()
    print(f"migrated {done.files} files, {done.chunks} chunks and {done.cache_entries} cached vectors "
          f"to {describe(cfg.storage.dsn)} as site {site!r} (0 embedded)", file=sys.stderr)
    return 0


def _reindex(cfg: Any) -> int:
    """Re-index the whole database with this memoryd's settings (the caller holds the data-dir lock)."""
    import time

    from memoryd.daemon.logs import configure_logging
    from memoryd.daemon.oneshot import ensure_roots, summary_line
    from memoryd.daemon.watch.pathfilter import PathFilter
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.ingestion.identity import rows_identity
    from memoryd.indexer.ingestion.reconcile import reconcile
    from memoryd.indexer.storage.postgres.backend import PostgresBackend

    configure_logging(cfg.log.level, cfg.log.format)
    t0 = time.perf_counter()
    roots = ensure_roots(cfg)
    embedder = load_embedder(cfg.embedding, cfg.model_cache_dir, cfg.embedding_api_key)
    backend = PostgresBackend(cfg, embedder, rows_identity(cfg, embedder), reindex=True)
    index = MemoryIndex(cfg, embedder, backend)
    try:
        if backend.reset is not None:
            files, chunks, generation = backend.reset
            print(f"dropped {files} files and {chunks} chunks of every site (identity generation {generation});"
                  " the embedding cache was kept", file=sys.stderr)
        path_filter = PathFilter(cfg.watch.include, cfg.watch.exclude)
        stats = reconcile(index, roots, path_filter, path_filter.accept_dir)
        index.save()
        totals = index.store.counts()
    finally:
        index.close()
    print(summary_line(stats, time.perf_counter() - t0, totals), file=sys.stderr)
    return 0


def _commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    from memoryd.daemon.client.cli_sites import COMMANDS as SITES

    return {"migrate-storage": cmd_migrate_storage, **SITES}


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = _commands()
