#!/usr/bin/env python3
"""Can a re-ordering of the ranking's tail put every part of a multi-hop question in the top 10?

    python bench/multihop_order.py [EVAL_DIR] [--work DIR] [--depth 50]

Issue #29 item 2. Runs memoryd's own hybrid search (default settings) once per question of each
EVAL_DIR folder (the layout and the ``--work`` indexes of bench/eval_retrieval.py), asking for the
first ``--depth`` chunks of the fused ranking unmerged (``merge_adjacent = false``, ``k = depth``,
at most ``[search] candidates``, else the legs would be read deeper and the ranking change; the
calibrated scores never reorder, so that is the ranking the pipeline would merge). Each
candidate ordering below is then applied to that list offline, the result merged as the pipeline
merges it (``merge_consecutive`` over the first 30 chunks, 10 hits) and scored as the eval's
score.py scores it: R@1, R@10, AllR@10 (the share of a question's evidence lines inside the top 10),
MRR@10, lines@10. The unchanged order reproduces bench/eval_retrieval.py's hybrid results exactly
(checked: the run prints how many queries differ).

Orderings (each a family of knobs; "r0" is the first merged hit that may move, so the hits above it
never do):

- ``files``: from hit r0 on, a hit from a file already shown goes below the best hit, within the
  next ``window``, of a file not yet shown (diversity across sessions);
- ``partition``: from hit r0 on, greedily, each hit's score gains ``beta`` x the IDF share of the
  query's terms it holds that no hit above holds (the query's rare terms partitioned over hits);
- ``hop``: from hit r0 on, a hit gains ``beta`` x the IDF share of the rare terms (IDF >= ``min_idf``,
  not in the query) of the best matched line of each of the first ``m`` hits (a second hop);
- ``line``: from hit r0 on, a hit gains ``beta`` x the weighted query-term coverage of its best
  single line (each term weighs IDF + ``floor``, so a name in every chunk still counts);
- ``search2``: a real second hop — the best matched line of each of the first ``sources`` hits
  (speaker label removed) is searched as a query of its own; from hit r0 on, a chunk gains
  ``gamma`` x its score there, and chunks found only there join the tail (two more searches a query);
- ``absorb`` (costs lines): a chunk whose span touches a hit that started at most ``window``
  chunks above moves up behind it, so the merge joins them (frees a slot, widens a hit);
- ``oracle`` (not a method: the ceiling): the first 3 hits kept, then every hit that holds an
  evidence line from the first 30 chunks, then the rest.

IDF here is over the chunks the run saw of each folder (an approximation of the index's own).

Leave-one-conversation-out: for each LoCoMo conversation, each family's knobs (or "off") are chosen
on the other four — the best pooled multi-hop AllR@10 among settings that lose at most one
query of R@1 and of MRR@10 there (summed over the pooled queries) — and scored on the held-out
one. Prints the per-setting table, the LOCO table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_retrieval import EVAL_DIR_HELP, prepare_root
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search import keyword
from memoryd.indexer.search.hits import MAX_MERGED_CHUNKS, Hit, merge_consecutive
from memoryd.indexer.search.matchlines import line_scores, ranked_lines
from memoryd.indexer.search.querytext import clean_query

K = 10
HOP_SOURCES = 2  # hits whose best line is searched again (the "search2" family)
Order = Callable[[list[Hit], "Question"], list[Hit]]


@dataclass
class Question:
    folder: str
    qid: str
    category: str
    relevant: list[tuple[str, int]]
    hits: list[Hit]  # the fused ranking's first chunks, unmerged
    idfs: dict[str, float] = field(default_factory=dict)  # the query's terms
    hops: list[list[Hit]] = field(default_factory=list)  # searches for the best line of the first hits
    df: Counter[str] = field(default_factory=Counter)  # the folder's (shared)
    n_docs: int = 1


# -- the run ---------------------------------------------------------------------------------------


def capture(eval_dir: Path, work: Path, depth: int, hops: bool = True) -> tuple[list[Question], int]:
    """Every question's first ``depth`` chunks; also how many differ from the default merged top 10.
    ``hops``: also run the ``search2`` family's second searches (two more searches a question)."""
    folders = sorted(p for p in eval_dir.iterdir() if (p / "queries.jsonl").exists())
    cfg = Config()
    embedder = load_embedder(cfg.embedding, work / "model")
    out: list[Question] = []
    differ = 0
    for folder in folders:
        root = work / "roots" / folder.name
        prepare_root(folder, root)
        fcfg = with_overrides(cfg, roots=[root], data_dir=work / "data" / folder.name)
        index = open_index(with_overrides(fcfg, search={"merge_adjacent": False}), embedder)
        pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
        reconcile(index, [root], pf, pf.accept_dir)
        qs = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]
        df: Counter[str] = Counter()
        seen: set[tuple[str, int]] = set()
        mine = []
        for q in qs:
            res = index.query(Query(q["question"], k=depth, mode="hybrid"))
            hits = [dataclasses.replace(h, chunk_id=n) for n, h in enumerate(res.hits)]
            for h in hits:
                if (h.path, h.start_line) not in seen:
                    seen.add((h.path, h.start_line))
                    df.update(chunk_terms(h.text))
            rel = list(dict.fromkeys((r["path"], int(r["line"])) for r in q["relevant"]))
            mine.append(Question(folder.name, q["qid"], str(q.get("category", "all")), rel, hits,
                                 hops=second_searches(index, hits, depth) if hops else []))
        index.close()
        default = open_index(fcfg, embedder)  # the shipped settings, for the reproduction check
        for q, raw in zip(mine, qs, strict=True):
            q.df, q.n_docs = df, max(len(seen), 1)
            q.idfs = {t: idf(q, t) for t in keyword.query_terms(clean_query(raw["question"]))}
            shipped = [(h.path, h.start_line, h.end_line) for h in default.query(Query(raw["question"], k=K)).hits]
            differ += shipped != spans(final(q.hits))
        default.close()
        out += mine
        print(f"searched {folder.name}: {len(qs)} questions", file=sys.stderr)
    return out, differ


_LABEL = re.compile(r"^\s*[-*]\s*\*\*[^*\n]+\*\*\s*:\s*")


def second_searches(index: MemoryIndex, hits: Sequence[Hit], depth: int) -> list[list[Hit]]:
    """A real second hop: the best matched line of each of the first ``HOP_SOURCES`` hits, its speaker
    label removed, searched as a query of its own (ids offset so they never meet the first list's)."""
    out = []
    for n, h in enumerate(hits[:HOP_SOURCES], 1):
        at = h.match_lines[0] if h.match_lines else h.start_line
        text = _LABEL.sub("", h.text.split("\n")[at - h.start_line])[:300]
        found = index.query(Query(text, k=depth, mode="hybrid")).hits if text.strip() else []
        out.append([dataclasses.replace(x, chunk_id=n * 10_000 + i) for i, x in enumerate(found)])
    return out


def idf(q: Question, term: str) -> float:
    n = q.df.get(term, 0)
    return math.log(1 + (q.n_docs - n + 0.5) / (n + 0.5))


@lru_cache(maxsize=1 << 16)
def line_terms(line: str) -> frozenset[str]:
    return frozenset(keyword.query_terms(line))


def chunk_terms(text: str) -> frozenset[str]:
    return frozenset().union(*[line_terms(x) for x in text.split("\n")])


def final(hits: Sequence[Hit]) -> list[Hit]:
    return merge_consecutive(list(hits[: K * MAX_MERGED_CHUNKS]))[:K]


def spans(hits: Iterable[Hit]) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in hits]


# -- the orderings ---------------------------------------------------------------------------------


def groups(hits: Sequence[Hit]) -> list[list[Hit]]:
    """The ranking as the merge would return it, each hit with its chunks (so a re-ordering keeps merges).
    ``chunk_id`` is each chunk's place in the captured list, unique within a question."""
    by_id = {h.chunk_id: h for h in hits}
    return [[by_id[g.chunk_id], *(by_id[i] for i in g.absorbed)] for g in merge_consecutive(list(hits))]


def flat(gs: Iterable[list[Hit]]) -> list[Hit]:
    return [h for g in gs for h in g]


def files(r0: int, window: int) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        gs = groups(hits)
        out, rest = gs[: r0 - 1], gs[r0 - 1:]
        shown = {g[0].path for g in out}
        while rest and len(out) < K + 2:
            pick = next((i for i, g in enumerate(rest[:window]) if g[0].path not in shown), 0)
            g = rest.pop(pick)
            out.append(g)
            shown.add(g[0].path)
        return flat(out + rest)
    return order


def partition(r0: int, beta: float) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        gs = groups(hits)
        out, rest = gs[: r0 - 1], gs[r0 - 1:]
        total = sum(q.idfs.values()) or 1.0
        covered = set().union(*[chunk_terms(h.text) for h in flat(out)]) if out else set()
        while rest and len(out) < K + 2:
            def gain(g: list[Hit], covered: set[str] = covered) -> float:
                new = set().union(*[chunk_terms(h.text) for h in g]) - covered
                return g[0].score + beta * sum(v for t, v in q.idfs.items() if t in new) / total
            best = max(range(len(rest)), key=lambda i: (gain(rest[i]), -i))
            g = rest.pop(best)
            out.append(g)
            covered |= set().union(*[chunk_terms(h.text) for h in g])
        return flat(out + rest)
    return order


def best_line(h: Hit, idfs: dict[str, float]) -> str:
    scores = line_scores(h.text, h.start_line, idfs, [(h.start_line, h.end_line, h.vector_score)])
    if not scores:
        return ""
    return h.text.split("\n")[ranked_lines(scores)[0] - h.start_line]


def rescored_tail(r0: int, bonus: Callable[[Hit], float], hits: list[Hit]) -> list[Hit]:
    gs = groups(hits)
    head, tail = gs[: r0 - 1], gs[r0 - 1:]
    return flat(head + sorted(tail, key=lambda g: -(g[0].score + max(bonus(h) for h in g))))


def hop(m: int, beta: float, min_idf: float, r0: int = 3) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        hop_terms = {t: idf(q, t) for h in hits[:m] for t in line_terms(best_line(h, q.idfs))
                     if t not in q.idfs and idf(q, t) >= min_idf}
        total = math.fsum(hop_terms.values())  # fsum: the same sum whatever the set order
        if not total:
            return hits
        return rescored_tail(r0, lambda h: beta * math.fsum(v for t, v in hop_terms.items()
                                                      if t in chunk_terms(h.text)) / total, hits)
    return order


def line(floor: float, beta: float, r0: int = 3) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        w = {t: v + floor for t, v in q.idfs.items()}
        total = sum(w.values()) or 1.0
        return rescored_tail(r0, lambda h: beta * max((math.fsum(w.get(t, 0.0) for t in line_terms(x))
                                                       for x in h.text.split("\n")), default=0.0) / total, hits)
    return order


def search2(sources: int, gamma: float, r0: int) -> Order:
    """From hit r0 on, each chunk's score gains ``gamma`` x its best score in the second searches of the
    first ``sources`` hits; chunks only those searches found join with that gain alone."""
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        gain: dict[tuple[str, int], float] = {}
        extra: dict[tuple[str, int], Hit] = {}
        for found in q.hops[:sources]:
            for x in found:
                gain[(x.path, x.start_line)] = max(gain.get((x.path, x.start_line), 0.0), x.score)
                extra.setdefault((x.path, x.start_line), x.rescored(0.0))
        gs = groups(hits)
        head = flat(gs[: r0 - 1])
        tail = flat(gs[r0 - 1:])
        known = {(h.path, h.start_line) for h in hits}
        pool = tail + [x for key, x in extra.items() if key not in known]
        return head + sorted(pool, key=lambda h: -(h.score + gamma * gain.get((h.path, h.start_line), 0.0)))
    return order


def absorb(window: int) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        gs: list[tuple[int, list[Hit]]] = []
        for i, h in enumerate(hits):
            home = next((g for start, g in gs if len(g) < MAX_MERGED_CHUNKS and i - start <= window
                         and any(c.path == h.path and h.start_line <= c.end_line + 1 and h.end_line >= c.start_line - 1
                                 for c in g)), None)
            if home is not None:
                home.append(h)
            else:
                gs.append((i, [h]))
        return flat(g for _, g in gs)
    return order


def oracle(hits: list[Hit], q: Question) -> list[Hit]:
    gs = groups(hits[:30])
    def holds(g: list[Hit]) -> bool:
        return any(h.path == p and h.start_line <= n <= h.end_line for h in g for p, n in q.relevant)
    return flat(gs[:3] + sorted(gs[3:], key=lambda g: not holds(g))) + hits[30:]


FAMILIES: dict[str, dict[str, Order]] = {
    "files": {f"r0={r} window={w}": files(r, w) for r in (2, 3, 4, 5) for w in (3, 5, 10)},
    "partition": {f"r0={r} beta={b}": partition(r, b) for r in (2, 3, 4) for b in (0.1, 0.2, 0.5)},
    "hop": {f"m={m} beta={b} min_idf={i}": hop(m, b, i) for m in (1, 2) for b in (0.1, 0.3) for i in (1.5, 2.5)},
    "line": {f"floor={f} beta={b}": line(f, b) for f in (0.5, 1.0) for b in (0.1, 0.2)},
    "search2": {f"sources={n} gamma={g} r0={r}": search2(n, g, r) for n in (1, 2) for g in (0.2, 0.5, 1.0)
                for r in (2, 4)},
    "absorb": {f"window={w}": absorb(w) for w in (2, 3, 5, 10)},
}


# -- scoring ---------------------------------------------------------------------------------------


def measure(q: Question, hits: Sequence[Hit]) -> dict[str, float]:
    """score.py's numbers for one question."""
    top = spans(final(hits))
    def holds(h: tuple[str, int, int], r: tuple[str, int]) -> bool:
        return h[0] == r[0] and h[1] <= r[1] <= h[2]
    first = next((i for i, h in enumerate(top) if any(holds(h, r) for r in q.relevant)), None)
    lines = {(h[0], n) for h in top for n in range(h[1], h[2] + 1)}
    return {"R@1": float(first == 0), "R@10": float(first is not None),
            "AllR@10": sum(any(holds(h, r) for h in top) for r in q.relevant) / max(len(q.relevant), 1),
            "MRR@10": 0.0 if first is None else 1.0 / (first + 1), "lines@10": float(len(lines))}


def run(qs: Sequence[Question], order: Order | None) -> dict[str, dict[str, float]]:
    return {q.qid: measure(q, order(list(q.hits), q) if order else q.hits) for q in qs}


def pooled(qs: Sequence[Question], per_q: dict[str, dict[str, float]], keep: Callable[[Question], bool]
           ) -> dict[str, float]:
    rows = [per_q[q.qid] for q in qs if keep(q)]
    out = {k: sum(r[k] for r in rows) for k in ("R@1", "R@10", "AllR@10", "MRR@10", "lines@10")}
    return {**out, "n": float(len(rows))}


def mean(s: dict[str, float]) -> dict[str, float]:
    n = s["n"] or 1.0
    return {k: (v if k == "n" else v / n) for k, v in s.items()}


def is_mh(q: Question) -> bool:
    return q.folder.startswith("locomo") and q.category == "1"


def group(name: str) -> Callable[[Question], bool]:
    return lambda q: q.folder.startswith(name)


def row(label: str, qs: Sequence[Question], per_q: dict[str, dict[str, float]]) -> dict[str, Any]:
    mh, lo, ma = (mean(pooled(qs, per_q, f)) for f in (is_mh, group("locomo"), group("madial")))
    return {"label": label, "multihop": mh, "locomo": lo, "madial": ma}


def print_row(r: dict[str, Any]) -> None:
    mh, lo, ma = r["multihop"], r["locomo"], r["madial"]
    print(f"{r['label']:<34} {mh['AllR@10']:>6.3f} {mh['R@10']:>6.3f} {lo['R@1']:>6.3f} {lo['MRR@10']:>7.4f} "
          f"{lo['lines@10']:>6.1f} {ma['R@1']:>6.3f} {ma['MRR@10']:>7.4f}")


TABLE_HEADER = (f"{'ordering':<34} {'mh AllR@10':>6} {'mh R@10':>6} {'LoCoMo R@1':>6} {'MRR@10':>7} {'lines@10':>6} "
                f"{'MADial R@1':>6} {'MRR@10':>7}")


def run_families(qs: Sequence[Question], families: dict[str, dict[str, Order]],
                 runs: dict[str, dict[str, dict[str, float]]]) -> list[dict[str, Any]]:
    """The table: today's order (``runs["off"]``), then every family's every setting, run into ``runs``
    and printed as it goes."""
    table = [row("off (today)", qs, runs["off"])]
    print(TABLE_HEADER)
    print_row(table[0])
    for fam, orders in families.items():
        for knobs, order in orders.items():
            label = f"{fam} {knobs}"
            runs[label] = run(qs, order)
            table.append(row(label, qs, runs[label]))
            print_row(table[-1])
    return table


def within_one_query(s: dict[str, float], base: dict[str, float]) -> bool:
    """R@1 and MRR@10 (sums over the same queries) at most one query below ``base``."""
    return s["R@1"] >= base["R@1"] - 1 and s["MRR@10"] >= base["MRR@10"] - 1


def loco(qs: Sequence[Question], runs: dict[str, dict[str, dict[str, float]]], labels: Sequence[str]
         ) -> list[dict[str, Any]]:
    """Per held-out LoCoMo conversation: the label chosen on the others, and its held-out numbers."""
    out = []
    for held in sorted({q.folder for q in qs if q.folder.startswith("locomo")}):
        train = [q for q in qs if q.folder != held and q.folder.startswith("locomo")]
        base_tr = pooled(train, runs["off"], lambda q: True)
        allowed = [lab for lab in labels if within_one_query(pooled(train, runs[lab], lambda q: True), base_tr)]
        pick = max(allowed,
                   key=lambda lab: (pooled(train, runs[lab], is_mh)["AllR@10"], lab == "off"))
        test = [q for q in qs if q.folder == held]
        base, got = (mean(pooled(test, runs[lab], lambda q: True)) for lab in ("off", pick))
        mb, mg = (mean(pooled(test, runs[lab], is_mh)) for lab in ("off", pick))
        out.append({"held_out": held, "chosen": pick, "multihop_allr10": [mb["AllR@10"], mg["AllR@10"]],
                    "R@1": [base["R@1"], got["R@1"]], "MRR@10": [base["MRR@10"], got["MRR@10"]],
                    "lines@10": [base["lines@10"], got["lines@10"]], "n_multihop": mb["n"]})
    return out


def missing(qs: Sequence[Question]) -> dict[str, int]:
    """The multi-hop questions' evidence, the chunks their shipped top 10 uses, and where the evidence
    lines it leaves out sit in the fused ranking."""
    out = {"questions": 0, "evidence in 2+ files": 0, "chunks in the top 10": 0, "missing": 0,
           "in the first 30 chunks": 0, "in chunks 31-depth": 0, "not in the first depth": 0,
           "in a file the top 10 shows": 0}
    for q in qs:
        if not is_mh(q):
            continue
        top = final(q.hits)
        out["questions"] += 1
        out["evidence in 2+ files"] += len({p for p, _ in q.relevant}) > 1
        out["chunks in the top 10"] += sum(1 + len(h.absorbed) for h in top)
        for p, n in q.relevant:
            if any(h.path == p and h.start_line <= n <= h.end_line for h in top):
                continue
            out["missing"] += 1
            at = next((i for i, h in enumerate(q.hits) if h.path == p and h.start_line <= n <= h.end_line), None)
            where = "not in the first depth" if at is None else \
                "in the first 30 chunks" if at < 30 else "in chunks 31-depth"
            out[where] += 1
            out["in a file the top 10 shows"] += any(h.path == p for h in top)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--depth", type=int, default=Config().search.candidates,
                    help="chunks of the fused ranking each ordering may use (at most [search] candidates: "
                         "a larger k would widen the legs and change the ranking itself)")
    args = ap.parse_args()
    most = Config().search.candidates
    if not 3 * K <= args.depth <= most:
        raise SystemExit(f"--depth {args.depth}: between {3 * K} and [search] candidates ({most})")
    qs, differ = capture(args.eval_dir, args.work, args.depth)
    print(f"unchanged order vs the shipped search: {differ} of {len(qs)} questions differ")
    gaps = missing(qs)
    print("multi-hop questions (missing: evidence lines outside the top 10, then where they are): "
          + ", ".join(f"{k} {v}" for k, v in gaps.items()))
    runs = {"off": run(qs, None), "oracle": run(qs, oracle)}
    table = run_families(qs, FAMILIES, runs)
    table.append(row("oracle (ceiling, not a method)", qs, runs["oracle"]))
    print_row(table[-1])
    print("\nleave-one-conversation-out, per family (held-out multi-hop AllR@10 off -> chosen; R@1; MRR@10; lines@10)")
    chosen: dict[str, list[dict[str, Any]]] = {}
    for fam, orders in FAMILIES.items():
        labels = ["off", *(f"{fam} {k}" for k in orders)]
        chosen[fam] = loco(qs, runs, labels)
        n = sum(r["n_multihop"] for r in chosen[fam])
        before = sum(r["multihop_allr10"][0] * r["n_multihop"] for r in chosen[fam]) / n
        after = sum(r["multihop_allr10"][1] * r["n_multihop"] for r in chosen[fam]) / n
        deltas = " ".join(f"{r['multihop_allr10'][1] - r['multihop_allr10'][0]:+.3f}" for r in chosen[fam])
        print(f"{fam:<10} pooled {before:.3f} -> {after:.3f}; per conversation {deltas}")
        for r in chosen[fam]:
            print(f"    {r['held_out']:<16} {r['chosen']:<30} R@1 {r['R@1'][0]:.3f}->{r['R@1'][1]:.3f} "
                  f"MRR {r['MRR@10'][0]:.4f}->{r['MRR@10'][1]:.4f} "
                  f"lines {r['lines@10'][0]:.1f}->{r['lines@10'][1]:.1f}")
    print(json.dumps({"depth": args.depth, "differ": differ, "missing": gaps, "table": table, "loco": chosen}))


if __name__ == "__main__":
    main()
