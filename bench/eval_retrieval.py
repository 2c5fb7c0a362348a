#!/usr/bin/env python3
"""Retrieval quality on the shared evaluation data, with memoryd's own code at default settings.

    python bench/eval_retrieval.py [EVAL_DIR] [--modes hybrid,vector,keyword] [--k 10] [--work DIR]
                                   [--backend embedded|postgres] [--dsn DSN]

For each folder under EVAL_DIR holding ``queries.jsonl``:
copy its Markdown files into a root, index it with the default config (400/80
chunks, default model; ``--provider`` to change), run every query in each
mode, write results in the scorer's format, and run the scorer. Prints the
scorer's overall line per folder and per data-set group (LoCoMo, MADial),
then one JSON line. Indexes are kept under ``--work`` (default
/tmp/memoryd-eval) so that a re-run reuses the embedding cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling _common, as the other benchmarks import it

from _common import EVAL_DIR_HELP, search_overrides

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile

# Query-time rescoring knobs that are module defaults until [search] has keys for them; --search
# sets either kind (a [search] field wins over a module default once it exists).
GROUPS = ("locomo", "madial")


def prepare_root(src: Path, dst: Path) -> None:
    """Only the Markdown files: the index must never see queries.jsonl and its answers."""
    if dst.exists():
        shutil.rmtree(dst)
    for f in src.rglob("*.md"):
        (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.relative_to(src))


def score(scorer: Path, queries: Path, results: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(scorer), str(queries), str(results)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["overall"]


def index_folder(folder: Path, work: Path, cfg: Config, embedder: Any) -> tuple[Any, Config, list[dict[str, Any]]]:
    """``folder``'s Markdown files copied into a root under ``work``, indexed as the daemon would (line
    vectors filled too): the index, its config, and the folder's queries. The other eval benches start here."""
    root = work / "roots" / folder.name
    prepare_root(folder, root)
    fcfg = with_overrides(cfg, roots=[root], data_dir=work / "data" / folder.name)
    index = open_index(fcfg, embedder)
    pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
    reconcile(index, [root], pf, pf.accept_dir)
    while index.lines_pending():  # the line vectors the daemon embeds when idle (search.line_weight uses them)
        index.fill_line_vectors()
    queries = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]
    return index, fcfg, queries


def run_folder(folder: Path, work: Path, cfg: Config, embedder: Any, modes: list[str], k: int,
               out: Path, pg_base: str | None = None) -> dict[str, list[dict[str, Any]]]:
    index, fcfg, queries = index_folder(folder, work, cfg, embedder)
    if pg_base is not None:  # the same index, moved to PostgreSQL by migrate-storage, is what gets searched
        index.close()
        root = work / "roots" / folder.name
        pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
        index = _on_postgres(fcfg, embedder, pg_base, folder.name, root, pf)
    per_mode: dict[str, list[dict[str, Any]]] = {}
    for mode in modes:
        rows = []
        for q in queries:
            res = index.query(Query(q["question"], k=k, mode=mode)).to_json()
            rows.append({"qid": q["qid"], "hits": [{"path": h["path"], "start_line": h["start_line"],
                                                    "end_line": h["end_line"]} for h in res["hits"]]})
        per_mode[mode] = rows
        (out / f"{folder.name}.{mode}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    index.close()
    return per_mode


def _on_postgres(fcfg: Config, embedder: Any, base: str, name: str, root: Path, pf: PathFilter) -> Any:
    """Migrate the embedded index into a fresh database, open it there, and reconcile: 0 model calls expected."""
    from _pg import fresh_database

    from memoryd.indexer.storage import site_id
    from memoryd.indexer.storage.migrate import migrate_to_postgres

    dsn = fresh_database(base, f"memoryd_eval_{name}".replace("-", "_"))
    t0 = time.perf_counter()
    moved = migrate_to_postgres(fcfg.data_dir, dsn, "disable", site_id("", fcfg.data_dir))
    migrate_s = time.perf_counter() - t0
    pcfg = dataclasses.replace(fcfg, storage=dataclasses.replace(fcfg.storage, backend="postgres", dsn=dsn,
                                                                   sslmode="disable"))
    counting = _Counting(embedder)
    index = open_index(pcfg, counting)
    reconcile(index, [root], pf, pf.accept_dir)
    lines_before = counting.embedded
    while index.lines_pending():  # migrate-storage moves no line vectors: the daemon would embed them when idle
        index.fill_line_vectors()
    lines_embedded = counting.embedded - lines_before
    print(f"{name}: migrated {moved.chunks} chunks, {moved.cache_entries} cached vectors in {migrate_s:.1f} s; "
          f"model calls after migration: {counting.embedded - lines_embedded} (and {lines_embedded} lines"
          f" embedded: migration does not move line vectors)", file=sys.stderr)
    return index


class _Counting:
    """The embedder, counting passages embedded (the migration must leave none to embed)."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.embedded = inner, 0
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def count_tokens(self, texts: Any) -> Any:
        return self._inner.count_tokens(texts)

    def embed_query(self, text: str) -> Any:
        return self._inner.embed_query(text)

    def embed_passages(self, texts: Any) -> Any:
        self.embedded += len(texts)
        return self._inner.embed_passages(texts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--modes", default="hybrid,vector,keyword")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--backend", default="embedded", choices=["embedded", "postgres"],
                    help="postgres: migrate each embedded index into PostgreSQL (no re-embedding) and search there")
    ap.add_argument("--dsn", default=None, help="--backend postgres: a server to use (default: a private one)")
    ap.add_argument("--search", action="append", default=[], metavar="KEY=VALUE",
                    help="override a [search] setting, e.g. --search proximity_weight=0 (numbers or strings)")
    args = ap.parse_args()
    modes = args.modes.split(",")
    scorer = args.eval_dir / "score.py"
    folders = sorted(p for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    cfg = dataclasses.replace(Config(), embedding=EmbeddingConfig(provider=args.provider))
    cfg = search_overrides(cfg, args.search)
    embedder = load_embedder(cfg.embedding, args.work / "model")
    out = args.work / "results"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    pg_base = None
    if args.backend == "postgres":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _pg import server_dsn

        pg_base = server_dsn(args.dsn, args.work)
    for folder in folders:
        results[folder.name] = run_folder(folder, args.work, cfg, embedder, modes, args.k, out, pg_base)
    summary: dict[str, dict[str, Any]] = {}
    print(f"{'data':<20} {'mode':<8} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR@10':>7} {'lines@10':>8}")
    for group in GROUPS:
        names = [f.name for f in folders if f.name.startswith(group)]
        if not names:
            continue
        qfile, summary[group] = out / f"{group}.queries.jsonl", {}
        qfile.write_text("".join((args.eval_dir / n / "queries.jsonl").read_text() for n in names))
        for mode in modes:
            rfile = out / f"{group}.{mode}.jsonl"
            rfile.write_text("".join(json.dumps(r) + "\n" for n in names for r in results[n][mode]))
            s = score(scorer, qfile, rfile)
            summary[group][mode] = {key: round(s[key], 4) for key in ("n", "R@1", "R@5", "R@10", "MRR@10", "lines@10")}
            m = summary[group][mode]
            print(f"{group:<20} {mode:<8} {m['n']:>4} {m['R@1']:>6.3f} {m['R@5']:>6.3f} {m['R@10']:>6.3f} "
                  f"{m['MRR@10']:>7.3f} {m['lines@10']:>8.1f}")
    print(json.dumps({"model": embedder.model_id, "backend": args.backend, "search": dataclasses.asdict(cfg.search),
                      "seconds": round(time.perf_counter() - t0, 1), **summary}))


if __name__ == "__main__":
    main()
