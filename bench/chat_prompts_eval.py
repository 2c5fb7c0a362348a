#!/usr/bin/env python3
"""Agent-chat prompts across languages: does memoryd treat them as chat (no memory) and questions as questions?

    python bench/chat_prompts_eval.py [--split tune|held|all]

The labelled set is ``bench/data/relevance/agent_chat.jsonl`` (README there): agent-chat prompts — acks,
commands, follow-ups that refer back — and answerable questions to a memory, in English, Chinese, Spanish,
French, German, Portuguese, Russian and Japanese, each row split by sha256 of its id into a ``tune`` half
(what the common-word list was checked against) and a ``held`` half (only scored). A prompt is abstained
when the query path scores every hit 0 whatever the memory holds: it has no content word
(:mod:`memoryd.indexer.search.content_words`) and no intent of a question to a memory
(:mod:`memoryd.indexer.search.intent`); a question is kept when it has either. Prints the shares per
language and overall, then one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd.indexer.search import intent, keyword
from memoryd.indexer.search.content_words import content_terms
from memoryd.indexer.search.querytext import clean_query

SET = Path(__file__).resolve().parent / "data" / "relevance" / "agent_chat.jsonl"


def split_of(row_id: str) -> str:
    """``tune`` or ``held``: by the first hex digit of sha256(id), so a row never changes half."""
    return "tune" if hashlib.sha256(row_id.encode()).hexdigest()[0] in "01234567" else "held"


def load(path: Path = SET) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def scored_as_chat(text: str) -> bool:
    """Whether the query path scores every hit of ``text`` 0 (the pipeline's ``_content`` rule)."""
    cleaned = clean_query(text)
    terms = keyword.query_terms(cleaned)
    return not content_terms(terms) and not (terms and intent.classify(cleaned))


def evaluate(rows: list[dict[str, Any]], split: str) -> dict[str, Any]:
    """Per language and overall: chat prompts abstained, questions kept, and the rows that missed."""
    tally: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"chat": [0, 0], "question": [0, 0]})
    missed = []
    for r in rows:
        if split != "all" and split_of(r["id"]) != split:
            continue
        chat = scored_as_chat(r["text"])
        good = chat if r["kind"] == "chat" else not chat
        for lang in (r["lang"], "all"):
            tally[lang][r["kind"]][0] += good
            tally[lang][r["kind"]][1] += 1
        if not good:
            missed.append(r["id"] + ": " + r["text"])
    out = {lang: {"abstained": round(t["chat"][0] / max(t["chat"][1], 1), 4), "chat_n": t["chat"][1],
                  "kept": round(t["question"][0] / max(t["question"][1], 1), 4), "question_n": t["question"][1]}
           for lang, t in tally.items()}
    return {"split": split, "by_language": out, "missed": missed}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="held", choices=["tune", "held", "all"])
    args = ap.parse_args()
    res = evaluate(load(), args.split)
    for lang, m in sorted(res["by_language"].items()):
        print(f"{lang:<4} chat abstained {m['abstained']:.3f} ({m['chat_n']})  questions kept {m['kept']:.3f} "
              f"({m['question_n']})")
    for m in res["missed"]:
        print("missed:", m)
    print(json.dumps(res, ensure_ascii=False))


if __name__ == "__main__":
    main()
