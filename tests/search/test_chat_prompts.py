"""Agent-chat prompts in eight languages are chat turns, questions to a memory are not (issue 41 item 4).

The labelled set is bench/data/relevance/agent_chat.jsonl (bench/chat_prompts_eval.py reports it per
language); its rows are split by sha256(id), and the common-word lists
(indexer/search/common_words.txt, read by indexer/search/content_words.py) were checked against the
``tune`` half only. Here the ``held`` half: >= 0.95 of its chat prompts must get no memory at all (no
content word and no intent: every hit scores 0), and >= 0.95 of its questions must keep content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memoryd.indexer.search import intent, keyword
from memoryd.indexer.search.content_words import content_terms
from memoryd.indexer.search.querytext import clean_query

SET = Path(__file__).resolve().parents[2] / "bench" / "data" / "relevance" / "agent_chat.jsonl"


def _held() -> list[dict[str, str]]:
    rows = [json.loads(x) for x in SET.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [r for r in rows if hashlib.sha256(r["id"].encode()).hexdigest()[0] not in "01234567"]


def _chat(text: str) -> bool:
    cleaned = clean_query(text)
    terms = keyword.query_terms(cleaned)
    return not content_terms(terms) and not (terms and intent.classify(cleaned))


def test_the_held_out_half_covers_eight_languages_both_kinds() -> None:
    held = _held()
    assert {r["lang"] for r in held} == {"en", "zh", "es", "fr", "de", "pt", "ru", "ja"}
    assert {r["kind"] for r in held} == {"chat", "question"} and len(held) > 150


def test_held_out_chat_prompts_abstain_and_questions_are_kept() -> None:
    held = _held()
    chat = [r for r in held if r["kind"] == "chat"]
    questions = [r for r in held if r["kind"] == "question"]
    abstained = sum(_chat(r["text"]) for r in chat) / len(chat)
    kept = sum(not _chat(r["text"]) for r in questions) / len(questions)
    assert abstained >= 0.95 and kept >= 0.95, (abstained, kept)


@pytest.mark.parametrize(("query", "kept"), [
    ("What is Melanie's son's name?", {"son"}),  # "son" is a Spanish/French function word, not here
    ("Which war did his grandfather fight in?", {"war"}),
    ("Why did the plant die?", {"die"}),
    ("¿Cuándo es la reunión con Ana?", {"reunión", "ana"}),
    ("Wann habe ich mit Klaus über den Umzug gesprochen?", {"klaus", "umzug"}),
    ("山小屋のWi-Fiのパスワードは？", {"パス"}),
])
def test_a_language_s_common_words_do_not_empty_another_language_s_question(query: str, kept: set[str]) -> None:
    assert kept <= set(content_terms(keyword.query_terms(query)))


@pytest.mark.parametrize("prompt", ["vale, sigue", "d'accord, continue", "ja, mach weiter", "pode continuar",
                                    "да, продолжай", "はい、続けて", "push it", "sounds good", "再来一遍"])
def test_chat_turns_in_other_languages_have_no_content_words(prompt: str) -> None:
    assert content_terms(keyword.query_terms(prompt)) == []
