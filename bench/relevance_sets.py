"""The query sets relevance calibration is fitted and judged on (bench/calibrate_scores.py).

Five kinds of query, each row of the plan saying where it is searched (``folder``), what it is
(``kind``), the fold its text belongs to (``source``: leave-one-conversation-out never trains on a
held-out fold's texts) and which half it comes from (``split``):

- ``pos``: each folder's own questions (eval data); the only answerable kind;
- ``chat``: agent-chat prompts, English and Chinese (``bench/data/relevance/*/chat_*.txt``), searched
  in every folder; prompt ``i`` belongs to fold ``i mod n``;
- ``unanswerable``: questions about people and things a folder holds whose answer it does not
  (``bench/data/relevance/*/unanswerable.jsonl``), searched in their own folder;
- ``cross``: questions of another conversation (for a LoCoMo conversation the next one's and every
  MADial question; for MADial every third question of each LoCoMo conversation);
- ``offtopic``: ``bench/data/offtopic_*.txt``, in every folder, assigned round-robin to folds.

``dev`` rows are what the fit and every choice see; ``final`` rows (the other halves of the sets built
for this) are only ever scored, for the figure that is quoted as held-out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
RELEVANCE = DATA / "relevance"
SPLITS = ("dev", "final")
NEGATIVE_KINDS = ("chat", "unanswerable", "cross", "offtopic")


def lines(path: Path) -> list[str]:
    """A prompt file's prompts: one per line, ``#`` lines are comments."""
    if not path.exists():
        return []
    return [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip() and not x.startswith("#")]


def load_queries(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]


def chat_prompts(split: str) -> list[str]:
    return lines(RELEVANCE / split / "chat_en.txt") + lines(RELEVANCE / split / "chat_zh.txt")


def unanswerable(split: str) -> list[dict[str, Any]]:
    path = RELEVANCE / split / "unanswerable.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def offtopic() -> list[str]:
    return lines(DATA / "offtopic_en.txt") + lines(DATA / "offtopic_zh.txt")


def query_plan(folders: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Per folder name: the queries to run there (see the module docstring)."""
    names = [f.name for f in folders]
    qs = {f.name: load_queries(f) for f in folders}
    locomo = [n for n in names if n.startswith("locomo")]
    madial = [n for n in names if n.startswith("madial")]
    plan: dict[str, list[dict[str, Any]]] = {}
    for n in names:
        rows = [{"kind": "pos", "source": n, "split": "dev", "qid": q["qid"], "question": q["question"],
                 "relevant": q["relevant"], "category": q.get("category")} for q in qs[n]]
        if n in locomo:
            other = [locomo[(locomo.index(n) + 1) % len(locomo)], *madial]
            cross = [(o, q) for o in other for q in qs[o]]
        else:
            cross = [(o, q) for o in locomo for q in qs[o][::3]]
        rows += [{"kind": "cross", "source": o, "split": "dev", "qid": q["qid"], "question": q["question"]}
                 for o, q in cross]
        rows += [{"kind": "offtopic", "source": names[i % len(names)], "split": "dev", "qid": f"offtopic-{i:03d}",
                  "question": x} for i, x in enumerate(offtopic())]
        for split in SPLITS:
            rows += [{"kind": "chat", "source": names[i % len(names)], "split": split, "qid": f"chat-{split}-{i:03d}",
                      "question": x} for i, x in enumerate(chat_prompts(split))]
            rows += [{"kind": "unanswerable", "source": n, "split": split, "qid": f"unans-{split}-{i:03d}",
                      "question": u["question"]} for i, u in enumerate(unanswerable(split)) if u["folder"] == n]
        plan[n] = rows
    return plan
