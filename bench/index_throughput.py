#!/usr/bin/env python3
"""Indexing throughput against the bare model, on the same texts, batch size and threads.

    python bench/index_throughput.py [EVAL_DIR] [--provider e5-small] [--threads N] [--limit-files N]

Measures, on the Markdown files under EVAL_DIR (default ../shared/eval):

  a. bare model throughput: ``embed_passages`` on the very chunk texts the
     index embedded, in the pipeline's batch size, with the same threads —
     the physical limit on this machine;
  b. cold ``index`` end to end (read, chunk, embed, SQLite, FTS5, FAISS) and
     its ratio to (a);
  c. a second run with nothing changed: chunks embedded and wall time;
  d. a one-line edit at the top of a ~50-chunk file: chunks re-embedded;
  e. peak RSS.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.files import read_memory_file, walk_root
from memoryd.indexer.ingest import prepare_file
from memoryd.indexer.reconcile import reconcile
from tests.helpers import CountingEmbedder

DEFAULT_EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval"


def copy_markdown(src: Path, dst: Path, limit: int | None) -> int:
    files = sorted(src.rglob("*.md"))[:limit] if limit else sorted(src.rglob("*.md"))
    for f in files:
        (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.relative_to(src))
    return len(files)


def long_file(src: Path, dst: Path, target_chunks: int, index: MemoryIndex) -> Path:
    """A single file of about ``target_chunks`` chunks, built from real memory text."""
    lines: list[str] = ["# Long journal", ""]
    for f in sorted(src.rglob("memory/*.md")):
        lines += f.read_text(encoding="utf-8").splitlines()
        if len(lines) > target_chunks * 9:
            break
    path = dst / "long" / "journal.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def embed_texts_of(root: Path, pf: PathFilter, embedder: Any, cfg: Config) -> list[str]:
    """The distinct texts a cold index of ``root`` embeds (read and chunked, nothing stored)."""
    texts: dict[str, None] = {}
    for rel, _ in walk_root(root, pf, pf.accept_dir):
        content = read_memory_file(root / rel, root, cfg.watch.max_file_bytes)
        texts.update(dict.fromkeys(prepare_file(root, rel, content, embedder, cfg.chunking).embed_texts.values()))
    return list(texts)


def bare_rate_of(embedder: Any, texts: list[str]) -> float:
    t0 = time.perf_counter()
    embedder.embed_passages(texts)
    return len(texts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", nargs="?", type=Path, default=DEFAULT_EVAL)
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--limit-files", type=int, default=None)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="md-bench-"))
    root, data = tmp / "root", tmp / "data"
    n_files = copy_markdown(args.eval_dir, root, args.limit_files)
    cfg = with_overrides(Config(), roots=[root], data_dir=data)
    cfg = dataclasses.replace(cfg, embedding=EmbeddingConfig(
        provider=args.provider, threads=args.threads, batch_size=args.batch_size))
    t0 = time.perf_counter()
    embedder = CountingEmbedder(load_embedder(cfg.embedding, cfg.model_cache_dir))
    load_s = time.perf_counter() - t0
    pf = PathFilter(cfg.watch.include, cfg.watch.exclude)
    index = MemoryIndex(cfg, embedder)

    # (a) bare model on the very texts the index will embed, same batch size and threads —
    # measured before AND after the cold index, so that load from other processes shows as a spread
    texts = embed_texts_of(root, pf, embedder.inner, cfg)
    bare_before = bare_rate_of(embedder.inner, texts)

    # (b) cold index
    t0 = time.perf_counter()
    cold = reconcile(index, [root], pf, pf.accept_dir)
    cold_s = time.perf_counter() - t0
    cold_chunks = embedder.embedded
    index_rate = cold_chunks / cold_s
    bare_after = bare_rate_of(embedder.inner, texts)
    bare_rate = (bare_before + bare_after) / 2

    # (c) unchanged re-run
    before = embedder.embedded
    t0 = time.perf_counter()
    reconcile(index, [root], pf, pf.accept_dir)
    rerun_s = time.perf_counter() - t0
    unchanged_reembedded = embedder.embedded - before

    # (d) one-line edit at the top of a ~50-chunk file
    path = long_file(args.eval_dir, root, 50, index)
    reconcile(index, [root], pf, pf.accept_dir)
    rel = path.relative_to(root).as_posix()
    n_long = index.store.conn.execute(
        "SELECT count(*) FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = ?", (rel,)).fetchone()[0]
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3] + " (edited: moved to Tuesday)"
    path.write_text("\n".join(lines), encoding="utf-8")
    before = embedder.embedded
    reconcile(index, [root], pf, pf.accept_dir)
    edit_reembedded = embedder.embedded - before
    index.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    rows = [
        ("files", n_files), ("model", embedder.model_id), ("model load s", f"{load_s:.2f}"),
        ("chunks embedded (cold)", cold_chunks), ("cold index s", f"{cold_s:.1f}"),
        ("bare model chunks/s (before / after)", f"{bare_before:.2f} / {bare_after:.2f}"),
        ("index chunks/s", f"{index_rate:.2f}"),
        ("ratio index/bare", f"{index_rate / bare_rate:.3f}"),
        ("unchanged re-run: embedded", unchanged_reembedded), ("unchanged re-run s", f"{rerun_s:.2f}"),
        (f"one-line edit in a {n_long}-chunk file: re-embedded", edit_reembedded),
        ("peak RSS MB", f"{rss_mb:.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({
        "files": n_files, "chunks": cold_chunks, "model": embedder.model_id,
        "bare_chunks_per_s": round(bare_rate, 3), "bare_before_after": [round(bare_before, 3), round(bare_after, 3)],
        "index_chunks_per_s": round(index_rate, 3), "loadavg": [round(x, 2) for x in os.getloadavg()],
        "ratio_vs_bare_model": round(index_rate / bare_rate, 3),
        "unchanged_reembedded": unchanged_reembedded, "unchanged_rerun_s": round(rerun_s, 3),
        "one_line_edit_reembedded": edit_reembedded, "long_file_chunks": n_long,
        "peak_rss_mb": round(rss_mb, 1), "cold_files_indexed": cold.files_indexed,
    }))


if __name__ == "__main__":
    main()
