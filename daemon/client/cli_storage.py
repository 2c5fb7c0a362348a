"""``memoryd migrate-storage``: copy the embedded index into the configured PostgreSQL, without re-embedding.

Runs in-process (no daemon): stop the daemon first, migrate, then set
``storage.backend = "postgres"`` and start it again. ``memoryd.daemon.cli`` adds
the parser with :func:`add_parsers` and dispatches through :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command


def add_parsers(sub: Any) -> None:
    p = command(sub, "migrate-storage",
                "copy the embedded index (SQLite + FAISS) into PostgreSQL: vectors and cache too, no re-embedding",
                "memoryd migrate-storage   # storage.dsn (or $MEMORYD_PG_DSN) names the database",
                "memoryd migrate-storage --data-dir ~/.local/state/memoryd --site laptop")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--data-dir", type=Path, help="the embedded index to copy (default: the configured one)")
    p.add_argument("--site", help="site id to store the files under (default: storage.site, else host:data_dir)")


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
        done = migrate_to_postgres(cfg.data_dir, cfg.storage.dsn, cfg.storage.sslmode, site)
    finally:
        lock.release()
    print(f"migrated {done.files} files, {done.chunks} chunks and {done.cache_entries} cached vectors "
          f"to {describe(cfg.storage.dsn)} as site {site!r} (0 embedded)", file=sys.stderr)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"migrate-storage": cmd_migrate_storage}
