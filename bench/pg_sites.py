#!/usr/bin/env python3
"""Two sites, one PostgreSQL: how long a save on site A takes to be searchable on site B, and
how many texts site B embeds that A already embedded.

    python bench/pg_sites.py [--saves 20] [--dsn DSN] [--model-dir /tmp/memoryd-eval/model]

Two daemons run in this process, as ``memoryd run`` would (default config, the real
e5 model, its watcher and debounce), each on its own data dir and root, against the
server of ``--dsn`` or a private one (``bench/_pg.py``). For each save: write a new
Markdown file into A's root, then poll B's socket (keyword search for the file's
unique word, every 20 ms) until B finds it. Then B's root receives copies of every
file A indexed, and B's embedding count shows what the shared cache saved.
Prints p50/p95/max of save → searchable on B, and B's re-embeddings; then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_tmp, percentile, remove_tree, wait_until
from _pg import fresh_database, server_dsn, stop_servers

from memoryd.indexer.config import Config, with_overrides

FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n- Deploys happen on Fridays.\n"}


def start(tmp: Path, name: str, dsn: str, models: Path) -> tuple[Any, Any, Path]:
    from memoryd.daemon.app import Daemon
    from memoryd.daemon.client.rpc_client import Client

    root = tmp / name / "root"
    root.mkdir(parents=True)
    for rel, text in FILES.items():
        (root / rel).write_text(text, encoding="utf-8")
    cache_home = tmp / name / "cache"
    (cache_home / "memoryd").mkdir(parents=True)
    (cache_home / "memoryd" / "models").symlink_to(models)
    cfg = with_overrides(Config(), roots=[root], data_dir=tmp / name / "data", socket=tmp / f"{name}.sock")
    cfg = dataclasses.replace(cfg, cache_home=cache_home, storage=dataclasses.replace(
        cfg.storage, backend="postgres", dsn=dsn, sslmode="disable", site=name))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=30)
    wait_until(lambda: (lambda st: st["pending"] == 0 and not st["reconciling"])(client.call("status")), 120,
               "the site to go idle")
    return d, client, root



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--saves", type=int, default=20)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/memoryd-eval/model"))
    args = ap.parse_args()
    from memoryd.daemon.logs import configure_logging

    configure_logging("warning", "console")
    tmp = bench_tmp("memoryd-pg-sites-")
    daemons: list[tuple[Any, Any, Path]] = []
    try:
        dsn = fresh_database(server_dsn(args.dsn, tmp), "memoryd_sites")
        daemons = [start(tmp, name, dsn, args.model_dir.resolve()) for name in ("a", "b")]
        (_a, _ca, root_a), (_b, cb, root_b) = daemons
        lat = []
        for i in range(args.saves):
            word = f"zebra{i}x"
            (root_a / f"note-{i}.md").write_text(f"# Note {i}\n\nThe {word} migration finished on host {i}.\n",
                                                 encoding="utf-8")
            lat.append(wait_until(lambda w=word: bool(cb.call("search", {"query": w, "mode": "keyword"})["hits"]), 30,
                                  f"{word!r} to be searchable on site B"))
        misses0 = cb.call("status")["cache"]["misses"]
        for f in root_a.glob("note-*.md"):
            shutil.copy2(f, root_b / f.name)
        wait_until(lambda: cb.call("status")["pending"] == 0 and not cb.call("status")["reconciling"]
                   and cb.call("status")["files"] == args.saves + len(FILES), 120, "site B to index the copies")
        re_embedded = cb.call("status")["cache"]["misses"] - misses0
        result = {"saves": args.saves, "save_to_search_on_b_p50_s": round(percentile(lat, 50), 3),
                  "p95_s": round(percentile(lat, 95), 3), "max_s": round(max(lat), 3),
                  "b_re_embedded_of_a_texts": re_embedded, "b_cache_misses_at_start": misses0}
        print(f"save on A -> searchable on B: p50 {result['save_to_search_on_b_p50_s']} s, "
              f"p95 {result['p95_s']} s, max {result['max_s']} s over {args.saves} saves; "
              f"B re-embedded {re_embedded} of A's texts")
        print(json.dumps(result))
        return 0
    finally:
        for d, c, _ in daemons:
            c.close()
            d.shutdown()
        stop_servers()
        remove_tree(tmp)


if __name__ == "__main__":
    sys.exit(main())
