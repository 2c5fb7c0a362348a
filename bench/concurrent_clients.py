"""Concurrent clients against ``memoryd run`` on its default server settings.

Why: agents, editors and MCP bridges hit one daemon at once. With the old
default ``max_clients = 64``, 200 concurrent ``Client`` searches got 112
"server busy" failures, and 64 idle connections locked everyone else out for
``idle_timeout_s``. This script runs the real daemon (hash embedder, every
``[server]`` setting at its default unless ``--max-clients`` is given) and:

1. releases ``--clients`` threads together, each doing one ``search`` with a
   fresh ``memoryd.daemon.client.rpc_client.Client``; reports answered/failed, the daemon's
   ``server.busy`` refusals (which the client retries) and the wall time;
2. opens ``max_clients`` idle raw connections, then makes one ``Client`` call:
   reports whether it was answered, how long it took and how many idle
   connections the daemon closed to make room (``client.evicted``).

Prints one JSON line; exit 0 when every request was answered.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, remove_tree, write_config

from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.config import Config
from memoryd.indexer.errors import DaemonError


def _burst(path: Path, n: int) -> tuple[int, list[str], float]:
    start = threading.Barrier(n)
    errors: list[str] = []
    ok = [0]
    lock = threading.Lock()

    def one() -> None:
        start.wait(60)
        try:
            with Client(path, timeout=60) as c:
                hit = bool(c.call("search", {"query": "Neovim", "k": 2})["hits"])
            with lock:
                ok[0] += hit
        except DaemonError as exc:
            with lock:
                errors.append(str(exc))

    threads = [threading.Thread(target=one) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return ok[0], errors, time.perf_counter() - t0


def _starve(path: Path, n: int) -> dict[str, Any]:
    idle = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(path))
        idle.append(s)
    time.sleep(0.2)  # let the daemon accept them all (a benchmark, not a test: no sync point to wait on)
    t0 = time.perf_counter()
    try:
        with Client(path, timeout=60) as c:
            answered = bool(c.call("search", {"query": "Neovim", "k": 1})["hits"])
    except DaemonError as exc:
        answered = False
        print(f"newcomer failed: {exc}", file=sys.stderr)
    took = time.perf_counter() - t0
    for s in idle:
        s.close()
    return {"idle_connections": n, "newcomer_answered": answered, "newcomer_s": round(took, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--max-clients", type=int, default=None, help="override server.max_clients (default: keep it)")
    args = ap.parse_args()
    tmp = bench_tmp("mdcc-")
    try:
        root = tmp / "root"
        root.mkdir()
        (root / "MEMORY.md").write_text("# Memory\n\n- The user prefers Neovim.\n- Deploys run on Fridays.\n")
        sections: dict[str, dict[str, Any]] = {"embedding": {"provider": "hash"}}
        if args.max_clients is not None:
            sections["server"] = {"max_clients": args.max_clients}
        cfg = write_config(tmp / "memoryd.toml", sections)
        max_clients = args.max_clients or Config().server.max_clients
        with Daemon(tmp, [root], tmp / "data", cfg) as d:
            d.wait_idle()
            ok, errors, wall = _burst(d.socket, args.clients)
            busy = len(d.events("server.busy"))
            starve = _starve(d.socket, max_clients)
            evicted = len(d.events("client.evicted"))
        out = {"clients": args.clients, "max_clients": max_clients, "answered": ok, "failed": len(errors),
               "busy_refusals_retried": busy, "wall_s": round(wall, 2), **starve, "evicted": evicted,
               "errors": errors[:3]}
        print(json.dumps(out))
        return 0 if ok == args.clients and starve["newcomer_answered"] else 1
    finally:
        remove_tree(tmp)


if __name__ == "__main__":
    sys.exit(main())
