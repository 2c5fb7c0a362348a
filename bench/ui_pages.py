#!/usr/bin/env python3
"""Every ``memoryd ui`` page's server-side time at a realistic size, on both backends.

    python bench/ui_pages.py [--files 5000] [--entries 10] [--runs 30] [--backend embedded|postgres|both]

Builds a memory folder of ``--files`` notes with about ``--entries`` entries each (5,000 x 6, plus
the 20,000-line file's entries: ~50,000 by default), a few peer and group namespaces, a ``MEMORY.md`` with the writable
sections and one 20,000-line file, indexes it with a ``memoryd run`` on the hash embedder (quick:
no model), and drives ``memoryd ui --no-browser --port 0`` over one keep-alive HTTP connection.
Each page is fetched ``--runs`` times after 3 warm-ups; ``server ms`` is the app's own
``Server-Timing`` (from the request guard to the first byte: the socket calls and the template
included). Target: p95 <= 150 ms on every page. PostgreSQL: the server of ``--dsn``, else a
private one from pgserver (``bench/_pg.py``), a fresh database each run.

Prints a table per backend, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from _common import Daemon, bench_tmp, generate_notes, is_idle, loadavg, note_line, print_table, remove_tree, summary
from ui_latency import Page, start_ui

TARGET_P95_MS = 150.0
LONG_LINES = 20_000
PEERS = ("alice", "bob", "carol")
GROUPS = ("dev", "ops")


def build_folder(root: Path, files: int, entries: int, seed: int = 11) -> dict[str, Any]:
    """The folder: ``files`` notes (``entries`` ± 2 lines each), peer/group files, MEMORY.md, one long file."""
    lo, hi = max(1, entries - 2), entries + 2
    generate_notes(root, files, seed=seed, lines=(lo, hi))
    rnd = random.Random(seed)
    for kind, names in (("peers", PEERS), ("groups", GROUPS)):
        for name in names:
            folder = root / kind / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "MEMORY.md").write_text("# Memory\n\n## Facts\n\n" +
                                              "\n".join(note_line(rnd) for _ in range(entries)) + "\n")
    (root / "MEMORY.md").write_text(
        "# Memory\n\nLong-lived facts about the team and its systems.\n\n## Current Focus\n\n"
        + "\n".join(note_line(rnd) for _ in range(5)) + "\n\n## Decisions\n\n"
        + "\n".join(note_line(rnd) for _ in range(5)) + "\n")
    body = ["# A long log", ""]
    body += [f"## Part {n // 500 + 1}" if n % 500 == 0 else note_line(rnd) for n in range(LONG_LINES - 2)]
    (root / "notes" / "long-log.md").write_text("\n".join(body) + "\n")
    return {"long": "notes/long-log.md", "short": "MEMORY.md"}


def config_text(backend: str, dsn: str | None) -> str:
    text = '[embedding]\nprovider = "hash"\n'
    if backend == "postgres":
        text += f'\n[storage]\nbackend = "postgres"\ndsn = "{dsn}"\nsslmode = "disable"\n'
    return text


def pages(client: Any, files: dict[str, Any]) -> dict[str, str]:
    """Page name → path (with its query), the deep pages found through the socket."""
    listed = client.call("list", {"limit": 1})
    some = listed["entries"][0]["path"] if listed["entries"] else files["short"]
    mid = client.call("files", {"limit": 1, "offset": 2_500})["files"] or [{"path": some}]
    mid_path = mid[0]["path"] if isinstance(mid[0], dict) else str(mid[0])
    q = {"q": "deploy script timeout", "k": 10, "mode": "hybrid"}
    return {
        "dashboard": "/",
        "search (page)": "/search?" + urlencode(q),
        "search (hits, as you type)": "/search/hits?" + urlencode(q),
        "search (explain)": "/search?" + urlencode({**q, "explain": 1}),
        "file (short)": "/file?" + urlencode({"path": files["short"]}),
        "file (20k lines, first page)": "/file?" + urlencode({"path": files["long"]}),
        "file (20k lines, deep link L15000)": "/file?" + urlencode({"path": files["long"], "hl": "15000"}),
        "entries (first page)": "/entries",
        "entries (mid-way page)": "/entries?" + urlencode({"cursor": f"{mid_path}:1"}),
        "entries (one peer)": "/entries?" + urlencode({"namespace": f"peer:{PEERS[0]}"}),
        "edit section form": "/section?" + urlencode({"path": files["short"], "section": "Current Focus"}),
        "history": "/history",
        "audit": "/audit",
        "access": "/access",
        "access (one peer's files)": "/access?" + urlencode({"namespace": f"peer:{PEERS[0]}"}),
    }


def get(page: Page, path: str) -> tuple[int, float, int]:
    """(status, server ms, bytes) of one GET; a page that fails is measured too (its status says so)."""
    t0 = time.perf_counter()
    status, body, headers = page._get(path, {"Cookie": page.cookie})
    timing = headers.get("server-timing", "")
    server = float(timing.split("dur=")[1]) if "dur=" in timing else (time.perf_counter() - t0) * 1000
    return status, server, len(body)


def measure(page: Page, paths: dict[str, str], runs: int) -> list[dict[str, Any]]:
    rows = []
    for name, path in paths.items():
        for _ in range(3):
            get(page, path)
        server, size, failed = [], 0, set()
        for _ in range(runs):
            status, s, size = get(page, path)
            server.append(s)
            if status != 200:
                failed.add(status)
        rows.append({"page": name, "path": path, "bytes": size, "server_ms": summary(server, digits=1),
                     "failed": sorted(failed)})
    return rows


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    tmp = bench_tmp(f"ui-pages-{backend}-")
    root, data = tmp / "root", tmp / "data"
    ui = None
    try:
        files = build_folder(root, args.files, args.entries)
        dsn = None
        if backend == "postgres":
            from _pg import fresh_database, server_dsn

            dsn = fresh_database(server_dsn(args.dsn, tmp), "memoryd_ui_pages")
        config = tmp / "memoryd.toml"
        config.write_text(config_text(backend, dsn))
        with Daemon(tmp, [root], data, config=config) as d:
            t0 = time.perf_counter()
            status = d.wait_idle(timeout=args.index_timeout)
            indexed_s = time.perf_counter() - t0
            client = d.client()
            for _ in range(3):  # a few history and audit records
                e = client.call("list", {"limit": 1, "namespace": "default"})["entries"][0]
                out = client.call("forget", {"path": e["path"], "line": e["start_line"]})
                client.call("undo", {"id": out["history_id"]})
            while not is_idle(client.call("status")):
                time.sleep(0.05)
            total = client.call("stats", {})["total"]
            paths = pages(client, files)
            client.close()
            ui, port, token = start_ui(tmp, d.socket)
            rows = measure(Page(port, token), paths, args.runs)
        return {"backend": backend, "files": total["files"], "entries": total["entries"],
                "chunks": status.get("chunks"), "index_s": round(indexed_s, 1), "pages": rows}
    finally:
        if ui is not None:
            ui.terminate()
            ui.wait(timeout=20)
        if backend == "postgres":
            from _pg import stop_servers

            stop_servers()
        remove_tree(tmp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=5_000)
    ap.add_argument("--entries", type=int, default=6, help="entries a note, about (5,000 x 6 + 20k lines: ~50k)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--backend", choices=("embedded", "postgres", "both"), default="both")
    ap.add_argument("--dsn", help="a PostgreSQL server to use (default: a private one from pgserver)")
    ap.add_argument("--index-timeout", type=float, default=3_600.0)
    args = ap.parse_args()
    results = [run_backend(b, args) for b in (("embedded", "postgres") if args.backend == "both" else (args.backend,))]
    over = []
    for r in results:
        print(f"\n{r['backend']}: {r['files']} files, {r['entries']} entries, {r['chunks']} chunks "
              f"(indexed in {r['index_s']} s), {args.runs} runs a page, load {loadavg()}")
        print_table(["page", "bytes", "server p50 ms", "server p95 ms", "target p95 <= 150"],
                    [[p["page"], p["bytes"], p["server_ms"]["p50"], p["server_ms"]["p95"],
                      f"FAILED {p['failed']}" if p["failed"] else
                      "ok" if (p["server_ms"]["p95"] or 0) <= TARGET_P95_MS else "OVER"] for p in r["pages"]])
        over += [f"{r['backend']}: {p['page']}" for p in r["pages"]
                 if p["failed"] or (p["server_ms"]["p95"] or 0) > TARGET_P95_MS]
    print(json.dumps({"bench": "ui_pages", "runs": args.runs, "load": loadavg(), "results": results, "over": over}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
