"""bench/extraction_eval.py against the scripted fake server: the scoring, and failures counted by kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import extraction_eval  # noqa: E402
from tests.fake_chat_server import FakeChatServer  # noqa: E402


def test_fact_recall_counts_answers_kept_and_failures_by_kind() -> None:
    sessions = [json.loads(line) for line in extraction_eval.DATA.read_text().splitlines()[:2]]
    first = sessions[0]["facts"][0]
    with FakeChatServer() as srv:
        srv.replies = [{"memories": [{"type": "knowledge", "importance": 6,
                                      "content": f"Caroline went to the LGBTQ support group on {first['answer']}."},
                                     {"type": "preference", "importance": 5, "content": "Melanie likes painting."}]},
                       "Sure! Caroline likes groups."]
        report = extraction_eval.evaluate(srv.url, "fake-model", "", sessions, 0.6, 5.0, 12_000, "json_object")
        (body, _) = srv.requests
    n_facts = len(sessions[0]["facts"]) + len(sessions[1]["facts"])
    assert report["facts"] == n_facts and report["fact_recall"] == round(1 / n_facts, 3)
    assert report["failures"] == {"malformed": 1} and report["items"] == 2
    assert report["item_precision_lower_bound"] == 0.5
    assert body["messages"][1]["content"].count("Caroline: ") >= 1  # turns carry their speaker's name


def test_covers_needs_most_of_the_answer_s_content_words() -> None:
    assert extraction_eval.covers("She moved from Sweden four years ago", "Sweden", 0.6)
    assert not extraction_eval.covers("She moved four years ago", "Sweden", 0.6)
    assert not extraction_eval.covers("anything", "the", 0.6)  # no content word to find
