#!/usr/bin/env python3
"""What the chunks' line vectors cost: model time at indexing, disk, and query time.

    python bench/line_vectors_cost.py [EVAL_DIR] [--chunks 1000] [--queries 200] [--seed 0]

For each folder — the LoCoMo/MADial eval folders (chat turns: short lines) and a generated
folder of ``--chunks`` chunks (``bench/gen_corpus.py``: prose, bullet lists, code, a quarter
Chinese) — a fresh index with the real model and no machine-wide cache is built as
``memoryd index`` builds it: keyword first, then every chunk vector (the reference, measured
in the same run), then every line vector (:meth:`MemoryIndex.fill_line_vectors`). Then:

* **edit**: one line of a long file changed and the file re-indexed: chunks and lines the
  model embeds again (the embedding cache keeps the lines that did not change);
* **disk**: the ``line_vectors`` rows' bytes against the database file and the chunk vectors;
* **query**: the same questions searched with ``search.line_weight`` 0.15 (the default) and 0
  (no line vectors read), alternating, p50/p99 of each.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_retrieval import EVAL_DIR_HELP, prepare_root
from bench.gen_corpus import generate
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.storage.embedded.backend import DB_NAME


class Counting:
    """The embedder, counting passages embedded."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.passages = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_passages(self, texts: Any) -> Any:
        self.passages += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def build(root: Path, data: Path, embedder: Counting, cfg: Config) -> tuple[MemoryIndex, dict[str, Any]]:
    fcfg = with_overrides(cfg, roots=[root], data_dir=data)
    fcfg = dataclasses.replace(fcfg, embedding=dataclasses.replace(fcfg.embedding, machine_cache_entries=0))
    index = open_index(fcfg, embedder)  # type: ignore[arg-type]
    pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
    t0 = time.perf_counter()
    reconcile(index, [root], pf, pf.accept_dir, defer_at=0)
    t1 = time.perf_counter()
    start = embedder.passages
    while index.backlog:
        index.fill_vectors()
    t2 = time.perf_counter()
    chunk_passages = embedder.passages - start
    start = embedder.passages
    while index.lines_pending():
        index.fill_line_vectors()
    t3 = time.perf_counter()
    conn = index.backend.sqlite.conn
    n_lines = sum(1 for (text,) in conn.execute("SELECT text FROM chunks") for x in text.split("\n") if x.strip())
    rows_bytes = conn.execute("SELECT coalesce(sum(length(vectors)), 0) FROM line_vectors").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    index.save()
    return index, {
        "chunks": chunks, "keyword_s": round(t1 - t0, 2), "vectors_s": round(t2 - t1, 2),
        "chunk_passages": chunk_passages, "lines_s": round(t3 - t2, 2), "line_passages": embedder.passages - start,
        "lines": n_lines, "lines_per_chunk": round(n_lines / max(chunks, 1), 1),
        "lines_to_vectors_time": round((t3 - t2) / max(t2 - t1, 1e-9), 2),
        "line_rows_mb": round(rows_bytes / 1e6, 2), "chunk_vectors_mb": round(chunks * embedder.dimension * 4 / 1e6, 2),
        "db_mb": round(sum(p.stat().st_size for p in data.glob(f"{DB_NAME}*")) / 1e6, 2)}  # with its -wal


def edit(index: MemoryIndex, root: Path, embedder: Counting) -> dict[str, int]:
    """Change one line in the middle of the folder's longest file; what the model embeds again."""
    path = max(root.rglob("*.md"), key=lambda p: p.stat().st_size)
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].strip())
    lines[at] += " (edited: moved to Tuesday)"
    path.write_text("\n".join(lines), encoding="utf-8")
    start = embedder.passages
    index.index_files([(root, path.relative_to(root).as_posix())])
    chunks_again = embedder.passages - start
    start = embedder.passages
    while index.lines_pending():
        index.fill_line_vectors()
    return {"edit_chunks_embedded": chunks_again, "edit_lines_embedded": embedder.passages - start}


def query_times(index: MemoryIndex, questions: list[str]) -> dict[str, float]:
    """p50/p99 ms of the same questions with and without the line blend, alternating per question."""
    on_ms: list[float] = []
    off_ms: list[float] = []
    searcher = index.searcher
    weight = searcher._line_weight
    for q in questions:
        for w, out in ((weight, on_ms), (0.0, off_ms)):
            searcher._line_weight = w
            t0 = time.perf_counter()
            index.query(Query(q, k=10))
            out.append((time.perf_counter() - t0) * 1000)
    searcher._line_weight = weight
    def p(xs: list[float], q: float) -> float:
        return round(statistics.quantiles(xs, n=100)[int(q) - 1], 2) if len(xs) > 1 else round(xs[0], 2)
    return {"query_on_p50": p(on_ms, 50), "query_on_p99": p(on_ms, 99),
            "query_off_p50": p(off_ms, 50), "query_off_p99": p(off_ms, 99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--chunks", type=int, default=1000, help="size of the generated folder (0: none)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folders", default="", help="comma-separated eval folder names (default: all)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="md-lines-"))
    cfg = Config()
    embedder = Counting(load_embedder(cfg.embedding, tmp / "model"))
    wanted = set(filter(None, args.folders.split(",")))
    folders = [f for f in sorted(args.eval_dir.iterdir()) if (f / "queries.jsonl").exists()
               and (not wanted or f.name in wanted)]
    results: list[dict[str, Any]] = []
    for folder in folders:
        root = tmp / "roots" / folder.name
        prepare_root(folder, root)
        index, fig = build(root, tmp / "data" / folder.name, embedder, cfg)
        qs = [json.loads(x)["question"] for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]
        fig |= query_times(index, qs[: args.queries]) | edit(index, root, embedder)
        index.close()
        results.append({"folder": folder.name, **fig})
        print(f"measured {folder.name}", file=sys.stderr)
    if args.chunks:
        root = tmp / "roots" / "generated"
        generate(root, args.chunks, args.seed)
        index, fig = build(root, tmp / "data" / "generated", embedder, cfg)
        probe = [f"notes about topic {i}" for i in range(args.queries)]
        fig |= query_times(index, probe) | edit(index, root, embedder)
        index.close()
        results.append({"folder": f"generated-{args.chunks}", **fig})
    cols = ["chunks", "lines_per_chunk", "vectors_s", "lines_s", "lines_to_vectors_time", "line_rows_mb",
            "chunk_vectors_mb", "db_mb", "edit_chunks_embedded", "edit_lines_embedded",
            "query_off_p50", "query_on_p50", "query_off_p99", "query_on_p99"]
    print("folder".ljust(18) + "".join(c[:12].rjust(13) for c in cols))
    for r in results:
        print(r["folder"][:18].ljust(18) + "".join(str(r[c]).rjust(13) for c in cols))
    total = {k: sum(r[k] for r in results) for k in ("vectors_s", "lines_s", "chunks", "lines")}
    print(f"all: {total['chunks']} chunks in {total['vectors_s']:.1f} s, their {total['lines']} lines in "
          f"{total['lines_s']:.1f} s (x{total['lines_s'] / max(total['vectors_s'], 1e-9):.2f} the chunk vectors' time)")
    print(json.dumps({"folders": results, "total": total}))


if __name__ == "__main__":
    main()
