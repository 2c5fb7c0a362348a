#!/usr/bin/env python3
"""``memoryd ui`` latency: each page's server-side time, and a search through the page against the
same search over the socket.

    python bench/ui_latency.py [--files 300] [--runs 40] [--model default|hash]

A throw-away ``memoryd run`` (the real default model unless ``--model hash``) indexes ``--files``
generated notes; a few forgets and undos fill the history and the audit log. Then ``memoryd ui
--no-browser --port 0`` is started as a user would, and driven over one keep-alive HTTP
connection with the cookie its token URL set:

* **pages**: every page ``--runs`` times after 3 warm-ups. ``server ms`` is the app's own
  ``Server-Timing`` (from the security layer to the response's first byte: the socket calls and
  the template included); ``client ms`` the HTTP round trip; ``its socket calls`` the same calls
  made straight on the socket after each request (what the daemon's answers cost, the page aside).
  Target: ≤ 100 ms server side.
* **search**: ``--runs`` queries, each as ``search`` over the daemon's socket (one connection,
  as the CLI and MCP bridge make it) and as ``GET /search/hits`` (the hits the page puts in as you
  type) with the same ``k`` and ``mode``; the order alternates per query so neither side always
  meets the warmer cache. The ratio is p50 page / p50 socket, end to end (the page's HTTP round trip,
  this client's parsing included) and server side (its ``Server-Timing``). Target: ≤ 1.2×.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from _common import (
    REPO,
    Daemon,
    bench_tmp,
    daemon_env,
    generate_notes,
    is_idle,
    loadavg,
    print_table,
    remove_tree,
    summary,
    write_config,
)

from memoryd.daemon.client.rpc_client import Client

QUERIES = ["deploy script timeout", "who owns the billing export", "cache layer decision", "staging database migrate",
           "on-call pages", "vendor pricing change", "release notes review", "auth service monitor",
           "nightly report follow-up", "metrics dashboard", "API gateway split", "backup job retire"]
K, MODE = 10, "hybrid"
URL = re.compile(r"memoryd ui: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))")


class Page:
    """One keep-alive HTTP connection to the ui, with its cookie."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        status, _, headers = self._get(f"/?token={token}", {})
        if status != 200:
            raise SystemExit(f"the ui answered {status} to its own token URL")
        self.cookie = headers["set-cookie"].split(";")[0]

    def _get(self, path: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        self.conn.request("GET", path, headers=headers)
        r = self.conn.getresponse()
        body = r.read()
        return r.status, body, {k.lower(): v for k, v in r.getheaders()}

    def get(self, path: str) -> tuple[float, float, bytes]:
        """(server ms, client ms, body) of one GET."""
        t0 = time.perf_counter()
        status, body, headers = self._get(path, {"Cookie": self.cookie})
        client_ms = (time.perf_counter() - t0) * 1000
        if status != 200:
            raise SystemExit(f"GET {path}: {status} {body[:300]!r}")
        server_ms = float(headers["server-timing"].split("dur=")[1])
        return server_ms, client_ms, body


def start_ui(tmp: Path, socket: Path) -> tuple[subprocess.Popen[str], int, str]:
    argv = [sys.executable, "-m", "memoryd.daemon.cli", "ui", "--no-browser", "--port", "0", "--socket", str(socket)]
    proc = subprocess.Popen(argv, cwd=REPO, env=daemon_env(tmp), stdout=subprocess.PIPE,
                            stderr=open(tmp / "ui.log", "ab"), text=True)  # noqa: SIM115 (closed with the process)
    assert proc.stdout is not None
    m = URL.search(proc.stdout.readline())
    if m is None:
        proc.kill()
        raise SystemExit(f"memoryd ui printed no URL; see {tmp / 'ui.log'}")
    return proc, int(m.group(2)), m.group(3)


def fill_history(client: Client) -> str:
    """Forget and undo a few entries (history + audit records); returns a file path for the file view."""
    listed = client.call("list", {"limit": 200})["entries"]
    firsts = list({e["path"]: e for e in reversed(listed)}.values())[:6]  # one per file: no line shifts
    for i, e in enumerate(firsts):
        out = client.call("forget", {"path": e["path"], "line": e["start_line"]})
        if i % 2 == 0:
            client.call("undo", {"id": out["history_id"]})
    return str(listed[-1]["path"]) if listed else "MEMORY.md"


def measure_pages(page: Page, client: Client, file_path: str, runs: int) -> list[dict[str, Any]]:
    """Each page, alternating with the socket calls it makes (``socket ms``: what the daemon's answers cost)."""
    search = {"query": QUERIES[0], "k": K, "mode": MODE}
    paths: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
        "dashboard": ("/", [("status", {}), ("stats", {})]),
        "search (page)": ("/search?" + urlencode({"q": QUERIES[0], "k": K, "mode": MODE}), [("search", search)]),
        "search (hits)": ("/search/hits?" + urlencode({"q": QUERIES[0], "k": K, "mode": MODE}),
                          [("search", search)]),
        "search (explain)": ("/search?" + urlencode({"q": QUERIES[0], "k": K, "mode": MODE, "explain": 1}),
                             [("search", {**search, "explain": True})]),
        "file": ("/file?" + urlencode({"path": file_path}), [("get", {"path": file_path})]),
        "entries": ("/entries", [("list", {"limit": 100})]),  # the namespace menu comes from a cached stats
        "history": ("/history", [("history", {"limit": 100})]),
        "audit": ("/audit", [("audit", {"tail": 200})]),
        "access": ("/access", [("stats", {})]),  # + files per peer and group: the bench corpus has none
    }
    rows = []
    for name, (path, calls) in paths.items():
        for _ in range(3):
            page.get(path)
        server, client_ms, sock, size = [], [], [], 0
        for _ in range(runs):
            s, c, body = page.get(path)
            server.append(s)
            client_ms.append(c)
            size = len(body)
            t0 = time.perf_counter()
            for method, params in calls:
                client.call(method, params)
            sock.append((time.perf_counter() - t0) * 1000)
        rows.append({"page": name, "path": path, "bytes": size, "server_ms": summary(server, digits=2),
                     "client_ms": summary(client_ms, digits=2), "socket_ms": summary(sock, digits=2)})
    return rows


def measure_search(page: Page, client: Client, runs: int) -> dict[str, Any]:
    sock, http_ms, server_ms = [], [], []
    for i in range(runs):
        q = QUERIES[i % len(QUERIES)]
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for side in order:
            t0 = time.perf_counter()
            if side == 0:
                client.call("search", {"query": q, "k": K, "mode": MODE})
                sock.append((time.perf_counter() - t0) * 1000)
            else:
                server_ms.append(page.get("/search/hits?" + urlencode({"q": q, "k": K, "mode": MODE}))[0])
                http_ms.append((time.perf_counter() - t0) * 1000)
    s, h, sv = summary(sock, digits=2), summary(http_ms, digits=2), summary(server_ms, digits=2)
    ratio = round(h["p50"] / s["p50"], 3) if s["p50"] and h["p50"] else None
    server_ratio = round(sv["p50"] / s["p50"], 3) if s["p50"] and sv["p50"] else None
    return {"socket_ms": s, "page_ms": h, "page_server_ms": sv, "ratio_p50": ratio, "server_ratio_p50": server_ratio}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--model", choices=("default", "hash"), default="default")
    args = ap.parse_args()
    tmp = bench_tmp("ui-lat-")
    root, data = tmp / "root", tmp / "data"
    root.mkdir()
    generate_notes(root, args.files, seed=7)
    config = write_config(tmp / "memoryd.toml", {"embedding": {"provider": "hash"}}) if args.model == "hash" else None
    ui = None
    try:
        with Daemon(tmp, [root], data, config=config) as d:
            d.wait_socket()
            status = d.wait_idle()
            client = d.client()
            random.seed(7)
            file_path = fill_history(client)
            while not is_idle(client.call("status")):
                time.sleep(0.05)
            ui, port, token = start_ui(tmp, d.socket)
            page = Page(port, token)
            pages = measure_pages(page, client, file_path, args.runs)
            search = measure_search(page, client, args.runs)
            client.close()
    finally:
        if ui is not None:
            ui.terminate()
            ui.wait(timeout=20)
        remove_tree(tmp)
    print(f"memoryd ui latency: {args.files} files, {status.get('chunks')} chunks, model {args.model}, "
          f"{args.runs} runs each, load {loadavg()}")
    print_table(["page", "bytes", "server p50 ms", "server p95 ms", "client p50 ms", "its socket calls p50 ms",
                 "target"],
                [[r["page"], r["bytes"], r["server_ms"]["p50"], r["server_ms"]["p95"], r["client_ms"]["p50"],
                  r["socket_ms"]["p50"], "ok" if (r["server_ms"]["p50"] or 0) <= 100 else "OVER 100 ms"]
                 for r in pages])
    print()
    print_table(["search", "p50 ms", "p95 ms", "mean ms"],
                [[name, search[key]["p50"], search[key]["p95"], search[key]["mean"]]
                 for name, key in (("over the socket", "socket_ms"), ("GET /search/hits", "page_ms"),
                                   ("  of which server side", "page_server_ms"))])
    print(f"ratio (p50 page / p50 socket): {search['ratio_p50']}, server side {search['server_ratio_p50']} "
          "(target <= 1.2)")
    print(json.dumps({"bench": "ui_latency", "files": args.files, "chunks": status.get("chunks"), "model": args.model,
                      "runs": args.runs, "load": loadavg(), "pages": pages, "search": search}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
