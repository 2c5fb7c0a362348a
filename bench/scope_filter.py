#!/usr/bin/env python3
"""Cost of the exact scope filter and of the confined sessions' per-file link check (docs/security/paths.md).

    python bench/scope_filter.py [--files 5000] [--alice 1000] [--repeat 30]

Builds a throw-away index (hash embedder, in-process) of ``--files`` small notes, ``--alice`` of them
in ``peers/alice/`` and the rest spread over 50 other peer folders, then times, per query (median of
``--repeat``):

  a. the allowed-chunk set of alice's scope with the old ``LIKE`` filter (case-folding; for reference);
  b. the same with the exact ``substr`` prefix match that replaced it;
  c. a whole keyword and a whole hybrid search (hash vectors) as the owner (no filter), as alice with
     her prefix only (what main did, with LIKE), and as alice with the prefix and the link check
     of the candidates (what a confined search does now).

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.indexer.search.query import Query

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memoryd.daemon.watch.pathfilter import PathFilter  # noqa: E402
from memoryd.indexer.access import Session, read_refusal  # noqa: E402
from memoryd.indexer.embedding import load_embedder  # noqa: E402
from memoryd.indexer.engine import open_index  # noqa: E402
from memoryd.indexer.ingestion.reconcile import reconcile  # noqa: E402
from memoryd.indexer.pathguard import PathGuard  # noqa: E402
from memoryd.indexer.storage.embedded.hybrid import _allowed_ids  # noqa: E402
from tests.helpers import make_config  # noqa: E402

LIKE_SQL = ("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id JOIN roots r ON r.id = f.root_id"
            " WHERE (f.path LIKE ?1 ESCAPE '\\' OR (r.path || '/' || f.path) LIKE ?1 ESCAPE '\\')")


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def build(root: Path, files: int, alice: int) -> None:
    for i in range(files):
        folder = "peers/alice" if i < alice else f"peers/p{i % 50}"
        path = root / folder / f"n{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\n- Meeting {i} about the pelican budget and the heron roadmap.\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--alice", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="md-scope-") as tmp:
        root = Path(tmp) / "root"
        build(root, args.files, args.alice)
        cfg = make_config(root, Path(tmp) / "data")
        idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
        try:
            reconcile(idx, [root], PathFilter(("*.md",), ()))
            prefix = f"{root}/peers/alice/"
            guard, alice = PathGuard([root]), Session("direct", peer="alice")

            def check(r: str, rel: str) -> bool:  # as memoryd.daemon.api.access.path_check: a fresh memo per query
                return read_refusal(alice, root, guard.resolve(Path(r), rel, memo)) is None

            memo: dict[str, str] = {}

            with idx.backend.readers.connection() as conn:
                n_like = len(conn.execute(LIKE_SQL, (prefix + "%",)).fetchall())
                n_exact = len(_allowed_ids(conn, prefix))
                rows = {
                    "a. LIKE prefix (old)": median_ms(lambda: conn.execute(LIKE_SQL, (prefix + "%",)).fetchall(),
                                                      args.repeat),
                    "b. exact substr prefix": median_ms(lambda: _allowed_ids(conn, prefix), args.repeat),
                }
            q = "pelican heron budget"
            for mode in ("keyword", "hybrid"):
                rows[f"c. {mode}, owner"] = median_ms(lambda m=mode: idx.query(Query(q, k=8, mode=m)), args.repeat)
                rows[f"c. {mode}, alice prefix"] = median_ms(
                    lambda m=mode: idx.query(Query(q, k=8, mode=m, path_prefix=prefix)), args.repeat)
                rows[f"c. {mode}, alice prefix+links"] = median_ms(
                    lambda m=mode: (memo.clear(),
                                    idx.query(Query(q, k=8, mode=m, path_prefix=prefix, path_check=check))),
                    args.repeat)
        finally:
            idx.close()
    assert n_like == n_exact, (n_like, n_exact)
    print(f"{args.files} files, {args.alice} in peers/alice ({n_exact} chunks); median of {args.repeat}")
    for name, ms in rows.items():
        print(f"  {name:<34} {ms:8.2f} ms")
    print(json.dumps({"files": args.files, "alice_files": args.alice, "ms": {k: round(v, 3) for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
