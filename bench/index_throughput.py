#!/usr/bin/env python3
"""Indexing throughput against the bare model, on the same texts, batch size and threads.

    python bench/index_throughput.py [EVAL_DIR] [--provider e5-small] [--threads N] [--limit-files N]

For provider e5-small it measures three passage set-ups side by side in one run,
interleaved phase by phase so that load from other processes hits them alike:
``before`` (the 4-bit graph in batches of 16 texts, the default until issue #30:
``passage_precision = "exact"``, ``batch_tokens = 0``), ``exact`` (the 4-bit graph,
length-capped batches) and ``int8`` (the default: the int8 twin, length-capped
batches), and prints each one's speed-up over ``before``. For each, on the
Markdown files under EVAL_DIR:

  a. bare model throughput: ``embed_passages`` on the very chunk texts the
     index embedded, in the pipeline's batch size, with the same threads —
     the physical limit on this machine;
  b. cold ``index`` end to end (read, chunk, embed, SQLite, FTS5, FAISS) and
     its ratio to (a); wall and CPU time (chunks per CPU-second: the figure that
     load from other processes disturbs least);
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import EVAL_DIR_HELP

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.files import read_memory_file, walk_root
from memoryd.indexer.ingestion.ingest import prepare_file
from memoryd.indexer.ingestion.reconcile import reconcile
from tests.helpers import CountingEmbedder


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


HIDDEN, FFN, LAYERS, SPECIALS = 384, 1536, 12, 5  # multilingual-e5-small; "passage: " (3) + CLS/SEP (2)


def model_flops(tokens: int) -> float:
    """Floating-point operations of one e5-small forward pass over ``tokens`` tokens (multiply-adds x 2):
    the linears (QKV, attention output, FFN in and out) and the attention products (QK^T, PV)."""
    linear = 2 * tokens * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
    attention = 2 * 2 * tokens * tokens * HIDDEN
    return float(LAYERS * (linear + attention))


_GFLOPS_PROBE = """
import sys, time
import numpy as np
a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
best, end = 0.0, time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    t0 = time.perf_counter()
    a @ a
    best = max(best, 2 * 1024**3 / (time.perf_counter() - t0) / 1e9)
print(best)
"""


def machine_gflops(threads: int, seconds: float = 2.0) -> float:
    """The machine's float32 matmul rate: numpy's BLAS on ``threads`` threads, best of ~2 s of products
    (in a child: BLAS reads its thread count from the environment when numpy is imported)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", _GFLOPS_PROBE, str(seconds)], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


def bare_rate_of(embedder: Any, texts: list[str]) -> float:
    t0 = time.perf_counter()
    embedder.embed_passages(texts)
    return len(texts) / (time.perf_counter() - t0)


SETUPS = {  # name -> (passage_precision, batch_tokens)
    "before": ("exact", 0),
    "exact": ("exact", 512),
    "int8": ("int8", 512),
}


@dataclasses.dataclass
class Run:
    """One passage set-up's index, embedder and figures."""

    name: str
    cfg: Config
    embedder: Any
    index: MemoryIndex
    load_s: float
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)


def open_run(name: str, args: argparse.Namespace, root: Path, data: Path) -> Run:
    cfg = with_overrides(Config(), roots=[root], data_dir=data)
    precision, batch_tokens = SETUPS.get(name, ("exact", 512))
    cfg = dataclasses.replace(cfg, embedding=EmbeddingConfig(
        provider=args.provider, threads=args.threads, batch_size=args.batch_size,
        passage_precision=precision, batch_tokens=batch_tokens,  # type: ignore[arg-type]
        machine_cache_entries=0))  # each set-up embeds everything itself: no set-up may reuse another's vectors
    t0 = time.perf_counter()
    embedder = CountingEmbedder(load_embedder(cfg.embedding, cfg.model_cache_dir))
    load_s = time.perf_counter() - t0
    return Run(name, cfg, embedder, open_index(cfg, embedder), load_s)


def cold_index(runs: list[Run], roots: dict[str, Path], pf: PathFilter, group: int = 4) -> None:
    """(b) every set-up indexes the same files cold, ``group`` files at a time, taking turns (the first
    to go rotates), so that load from other processes falls on all of them alike. Wall and CPU time."""
    rels = sorted(rel for rel, _ in walk_root(roots[runs[0].name], pf, pf.accept_dir))
    wall = dict.fromkeys((r.name for r in runs), 0.0)
    cpu = dict.fromkeys((r.name for r in runs), 0.0)
    files = dict.fromkeys((r.name for r in runs), 0)
    for turn, start in enumerate(range(0, len(rels), group)):
        part = rels[start : start + group]
        for r in runs[turn % len(runs):] + runs[: turn % len(runs)]:
            t0, c0 = time.perf_counter(), time.process_time()
            stats = r.index.index_files([(roots[r.name], rel) for rel in part])
            wall[r.name] += time.perf_counter() - t0
            cpu[r.name] += time.process_time() - c0
            files[r.name] += stats.files_indexed
    for r in runs:
        n = r.embedder.embedded
        r.figures.update(chunks=n, cold_s=round(wall[r.name], 2), cold_cpu_s=round(cpu[r.name], 2),
                         index_chunks_per_s=round(n / wall[r.name], 3),
                         index_chunks_per_cpu_s=round(n / cpu[r.name], 3), files_indexed=files[r.name])


def bare_rates(runs: list[Run], texts: list[str], rounds: int, bare: dict[str, list[float]],
               bare_cpu: dict[str, float], slice_size: int = 32) -> None:
    """(a) the bare model on ``texts``, a slice at a time per set-up in turn (load falls on all alike)."""
    for _ in range(rounds):
        wall = dict.fromkeys((r.name for r in runs), 0.0)
        for turn, start in enumerate(range(0, len(texts), slice_size)):
            part = texts[start : start + slice_size]
            for r in runs[turn % len(runs):] + runs[: turn % len(runs)]:
                t0, c0 = time.perf_counter(), time.process_time()
                r.embedder.inner.embed_passages(part)
                wall[r.name] += time.perf_counter() - t0
                bare_cpu[r.name] += time.process_time() - c0
        for r in runs:
            bare[r.name].append(len(texts) / wall[r.name])


def edits(run: Run, args: argparse.Namespace, root: Path, pf: PathFilter) -> None:
    """(c) an unchanged re-run and (d) a one-line edit in a ~50-chunk file: chunks re-embedded."""
    index, embedder = run.index, run.embedder
    before = embedder.embedded
    t0 = time.perf_counter()
    reconcile(index, [root], pf, pf.accept_dir)
    run.figures.update(unchanged_rerun_s=round(time.perf_counter() - t0, 3),
                       unchanged_reembedded=embedder.embedded - before)
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
    run.figures.update(one_line_edit_reembedded=embedder.embedded - before, long_file_chunks=n_long)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--limit-files", type=int, default=None)
    ap.add_argument("--setups", default=",".join(SETUPS), help="e5-small: which of " + ", ".join(SETUPS))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="md-bench-"))
    names = args.setups.split(",") if args.provider == "e5-small" else [args.provider]
    roots = {n: tmp / n / "root" for n in names}
    n_files = 0
    for n in names:
        n_files = copy_markdown(args.eval_dir, roots[n], args.limit_files)
    runs = [open_run(n, args, roots[n], tmp / n / "data") for n in names]
    pf = PathFilter(runs[0].cfg.watch.include, runs[0].cfg.watch.exclude)
    # (a) bare model on the very texts the index will embed, same batch size and threads —
    # measured before AND after the cold index, so that load from other processes shows as a spread
    texts = embed_texts_of(roots[names[0]], pf, runs[0].embedder.inner, runs[0].cfg)
    bare: dict[str, list[float]] = {r.name: [] for r in runs}
    bare_cpu: dict[str, float] = dict.fromkeys(names, 0.0)
    gflops = {t: machine_gflops(t) for t in (1, 2)}
    counts = runs[0].embedder.inner.count_tokens(texts)
    flops = sum(model_flops(min(n + SPECIALS, 512)) for n in counts)
    bare_rates(runs, texts, 1, bare, bare_cpu)
    cold_index(runs, roots, pf)  # (b)
    bare_rates(runs, texts, 1, bare, bare_cpu)
    gflops = {t: max(g, machine_gflops(t)) for t, g in gflops.items()}
    for r in runs:
        edits(r, args, roots[r.name], pf)
        r.index.close()
        rate = sum(bare[r.name]) / 2
        r.figures.update(model=r.embedder.model_id, load_s=round(r.load_s, 2), bare_chunks_per_s=round(rate, 3),
                         bare_before_after=[round(x, 3) for x in bare[r.name]],
                         bare_chunks_per_cpu_s=round(2 * len(texts) / bare_cpu[r.name], 3),
                         bare_gflops=round(flops / len(texts) * rate / 1e9, 1),
                         bare_gflops_per_cpu_s=round(2 * flops / bare_cpu[r.name] / 1e9, 1),
                         ratio_vs_bare_model=round(r.figures["index_chunks_per_s"] / rate, 3))
    base = runs[0].figures
    for r in runs:
        r.figures["speedup_index"] = round(r.figures["index_chunks_per_s"] / base["index_chunks_per_s"], 2)
        r.figures["speedup_bare"] = round(r.figures["bare_chunks_per_s"] / base["bare_chunks_per_s"], 2)
        r.figures["speedup_index_cpu"] = round(r.figures["index_chunks_per_cpu_s"] / base["index_chunks_per_cpu_s"], 2)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print_rows(runs, n_files, rss_mb)
    shutil.rmtree(tmp, ignore_errors=True)
    mean_tokens = sum(counts) / max(1, len(counts))
    print(f"model work: {flops / len(texts) / 1e9:.2f} GFLOP per chunk on average ({mean_tokens:.0f} tokens), "
          f"{model_flops(400) / 1e9:.2f} GFLOP per 400-token chunk; machine float32 matmul (numpy, best): "
          f"{gflops[1]:.0f} GFLOP/s on 1 thread, {gflops[2]:.0f} on 2")
    print(json.dumps({"files": n_files, "loadavg": [round(x, 2) for x in os.getloadavg()],
                      "gflop_per_chunk": round(flops / len(texts) / 1e9, 3), "mean_tokens": round(mean_tokens, 1),
                      "gflop_per_400_token_chunk": round(model_flops(400) / 1e9, 3),
                      "machine_gflops": {str(t): round(g, 1) for t, g in gflops.items()},
                      "peak_rss_mb": round(rss_mb, 1), "setups": {r.name: r.figures for r in runs}}))


def print_rows(runs: list[Run], n_files: int, rss_mb: float) -> None:
    rows: list[tuple[str, list[Any]]] = [
        ("model", [r.figures["model"] for r in runs]),
        ("model load s", [r.figures["load_s"] for r in runs]),
        ("chunks embedded (cold)", [r.figures["chunks"] for r in runs]),
        ("cold index s", [r.figures["cold_s"] for r in runs]),
        ("bare model chunks/s (before / after)", ["{:.2f} / {:.2f}".format(*r.figures["bare_before_after"])
                                                  for r in runs]),
        ("index chunks/s", [r.figures["index_chunks_per_s"] for r in runs]),
        ("index chunks per CPU-second", [r.figures["index_chunks_per_cpu_s"] for r in runs]),
        ("bare model chunks per CPU-second", [r.figures["bare_chunks_per_cpu_s"] for r in runs]),
        ("ratio index/bare", [r.figures["ratio_vs_bare_model"] for r in runs]),
        ("bare model GFLOP/s (per CPU-second)", [f"{r.figures['bare_gflops']} ({r.figures['bare_gflops_per_cpu_s']})"
                                                 for r in runs]),
        (f"speed-up over {runs[0].name}: index", [f"{r.figures['speedup_index']:.2f}x" for r in runs]),
        (f"speed-up over {runs[0].name}: index CPU", [f"{r.figures['speedup_index_cpu']:.2f}x" for r in runs]),
        (f"speed-up over {runs[0].name}: bare", [f"{r.figures['speedup_bare']:.2f}x" for r in runs]),
        ("unchanged re-run: embedded", [r.figures["unchanged_reembedded"] for r in runs]),
        ("unchanged re-run s", [r.figures["unchanged_rerun_s"] for r in runs]),
        ("one-line edit: re-embedded (file chunks)",
         [f"{r.figures['one_line_edit_reembedded']} ({r.figures['long_file_chunks']})" for r in runs]),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'files'.ljust(width)}  {n_files}    peak RSS MB (all set-ups) {rss_mb:.0f}")
    print(f"{''.ljust(width)}  " + "  ".join(r.name.ljust(12) for r in runs))
    for k, vals in rows:
        if k == "model":
            for r, v in zip(runs, vals, strict=True):
                print(f"{('model ' + r.name).ljust(width)}  {v}")
            continue
        print(f"{k.ljust(width)}  " + "  ".join(str(v).ljust(12) for v in vals))


if __name__ == "__main__":
    main()
