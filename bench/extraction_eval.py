#!/usr/bin/env python3
"""How well a model extracts memories from conversations: ``observe``'s extraction, scored.

    python bench/extraction_eval.py http://localhost:8080/v1 --model qwen2.5-7b-instruct [--limit 5]

Each session of the labelled set (``bench/data/extraction/``: LoCoMo conversation 26, one session a
line, with the question/answer pairs whose evidence lies in it) goes to the server as one combined
extraction call — the same prompt, schema and checks ``observe`` uses (indexer/observe/extract.py,
indexer/llm/client.py). The memories, experiences and profile signals it returns are scored against
the session's facts:

* **fact recall**: a fact is kept when one extracted item holds most of its answer's content words
  (at least ``--cover``, default 0.6) — by category (single-hop, multi-hop, temporal, open-domain);
* **item precision** (a lower bound): the share of items that keep at least one labelled fact
  (LoCoMo labels only what its questions ask, so a good memory may count as unmatched);
* **failures** by kind (malformed JSON, schema, timeout, HTTP), tokens and seconds per call.

The first speaker is sent as ``user``, the second as ``assistant``, each turn prefixed by its
speaker's name. A 135M model scores near zero here; the script exists so that a user with a real
model can measure it (docs/conversations.md). ``--json`` prints the report as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memoryd.indexer.llm.budget import TokenBudget  # noqa: E402  (needs the repository on sys.path)
from memoryd.indexer.llm.client import LLMClient, Settings  # noqa: E402
from memoryd.indexer.llm.config import LLMConfig  # noqa: E402
from memoryd.indexer.llm.errors import LLMError  # noqa: E402
from memoryd.indexer.observe import extract  # noqa: E402

DATA = REPO / "bench" / "data" / "extraction" / "locomo-conv-26.jsonl"
_STOP_WORDS = """a an the of to in on at for and or but is are was were be been it its this that with by from as
i you he she they we my your his her their our me him them us do did does not no yes so about what when where who how
which"""
STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[\w']+")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP}


def covers(item: str, answer: str, cover: float) -> bool:
    want = words(answer)
    if not want:
        return False
    return len(want & words(item)) / len(want) >= cover


def turns_of(session: dict[str, Any]) -> list[tuple[str, str]]:
    speakers: list[str] = []
    out = []
    for t in session["turns"]:
        if t["speaker"] not in speakers:
            speakers.append(t["speaker"])
        role = "user" if t["speaker"] == speakers[0] else "assistant"
        out.append((role, f"{t['speaker']}: {t['text']}"))
    return out


def evaluate(url: str, model: str, key: str, sessions: list[dict[str, Any]], cover: float, timeout: float,
             max_chars: int, fmt: str) -> dict[str, Any]:
    cfg = LLMConfig(provider="openai", url=url, model=model, timeout_s=timeout, retries=1, daily_tokens=0,
                    max_answer_tokens=1500, response_format=fmt)  # type: ignore[arg-type]
    client = LLMClient(Settings.from_config(cfg), key, TokenBudget(0))
    kept: Counter[str] = Counter()
    total: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    items = matched = 0
    seconds: list[float] = []
    per_session = []
    try:
        for s in sessions:
            t0 = time.perf_counter()
            try:
                answer = client.complete_json(extract.messages(turns_of(s), max_chars), extract.SCHEMA,
                                              name="extraction")
            except LLMError as exc:
                failures[_kind(str(exc))] += 1
                for f in s["facts"]:
                    total[str(f["category"])] += 1
                per_session.append({"id": s["id"], "error": str(exc)[:200]})
                client.retry_now()
                continue
            seconds.append(time.perf_counter() - t0)
            texts = [p.content for p in extract.proposals(answer, max_memories=100)]
            items += len(texts)
            hit_items = {i for i, text in enumerate(texts) for f in s["facts"] if covers(text, f["answer"], cover)}
            matched += len(hit_items)
            got = 0
            for f in s["facts"]:
                total[str(f["category"])] += 1
                if any(covers(text, f["answer"], cover) for text in texts):
                    kept[str(f["category"])] += 1
                    got += 1
            per_session.append({"id": s["id"], "items": len(texts), "facts": len(s["facts"]), "kept": got})
    finally:
        client.close()
    n_facts = sum(total.values())
    return {
        "server": url, "model": model, "sessions": len(sessions), "facts": n_facts,
        "fact_recall": round(sum(kept.values()) / n_facts, 3) if n_facts else None,
        "by_category": {c: {"facts": total[c], "recall": round(kept[c] / total[c], 3)} for c in sorted(total)},
        "items": items, "items_per_session": round(items / max(1, len(sessions) - sum(failures.values())), 2),
        "item_precision_lower_bound": round(matched / items, 3) if items else None,
        "failures": dict(failures), "tokens": client.budget.snapshot()["used"],
        "seconds_per_call": round(sum(seconds) / len(seconds), 2) if seconds else None,
        "per_session": per_session,
    }


def _kind(message: str) -> str:
    for needle, kind in (("not JSON", "malformed"), ("not fit the schema", "schema"), ("not an object", "malformed"),
                         ("cut at max_tokens", "cut"), ("within", "timeout"), ("HTTP", "http")):
        if needle in message:
            return kind
    return "other"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="the server's base URL, e.g. http://localhost:8080/v1")
    p.add_argument("--model", default="default", help="the server's model name")
    p.add_argument("--key-env", default="", help="environment variable holding the API key (hosted APIs)")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--limit", type=int, default=0, help="the first N sessions only (0: all 19)")
    p.add_argument("--cover", type=float, default=0.6, help="share of an answer's content words an item must hold")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per call")
    p.add_argument("--max-chars", type=int, default=12_000, help="conversation characters per call")
    p.add_argument("--response-format", default="json_object", choices=("json_object", "json_schema", "none"))
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = p.parse_args(argv)
    sessions = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit:
        sessions = sessions[: args.limit]
    key = os.environ.get(args.key_env, "") if args.key_env else ""
    report = evaluate(args.url, args.model, key, sessions, args.cover, args.timeout, args.max_chars,
                      args.response_format)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(f"{report['model']} at {report['server']}: {report['sessions']} sessions, {report['facts']} labelled facts")
    print(f"  fact recall {report['fact_recall']}  items/session {report['items_per_session']}  "
          f"item precision >= {report['item_precision_lower_bound']}")
    for cat, row in report["by_category"].items():
        print(f"  {cat:<12} {row['facts']:>4} facts  recall {row['recall']}")
    print(f"  failures {report['failures'] or 'none'}  tokens {report['tokens']}  "
          f"s/call {report['seconds_per_call']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
