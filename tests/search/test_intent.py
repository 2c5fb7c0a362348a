"""Query intent: the rule-based classifier (English, Chinese), its targets, and the boost it gives."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.intent import classify, intent_boost, targets
from memoryd.indexer.search.query import Query
from tests.helpers import make_config


@pytest.mark.parametrize(("query", "expected"), [
    ("When did Caroline go to the LGBTQ support group?", ("temporal",)),
    ("What year did we move to Berlin?", ("temporal",)),
    ("What is Melanie's favorite book?", ("preference",)),
    ("Does Jon prefer tea or coffee", ("preference",)),
    ("What did we decide about the database?", ("decision",)),
    ("Which framework did the team choose", ("decision",)),
    ("Who is Caroline's mentor?", ("person",)),
    ("How do I rotate the API keys?", ("howto",)),
    ("When did we decide to switch?", ("temporal", "decision")),
    ("Tell me about the garden", ()),
    ("Whoever wrote this", ()),  # "who" only as a whole word
])
def test_english_cues(query: str, expected: tuple[str, ...]) -> None:
    assert classify(query) == expected


@pytest.mark.parametrize(("query", "expected"), [
    ("我们什么时候去的上海？", ("temporal",)),
    ("她最喜欢的电影是哪部", ("preference",)),
    ("关于数据库我们做了什么决定", ("decision",)),
    ("谁帮我修的电脑？", ("person",)),
    ("如何配置代理服务器", ("howto",)),
    ("今天天气不错", ()),
])
def test_chinese_cues(query: str, expected: tuple[str, ...]) -> None:
    assert classify(query) == expected


def test_only_the_end_of_a_long_query_is_read() -> None:
    assert classify("When was it? " + "x " * 1000) == ()
    assert classify("x " * 1000 + "When was it?") == ("temporal",)


def test_targets_are_read_from_the_heading_and_the_path() -> None:
    assert targets("decision", "Decision Highlights", "MEMORY.md")
    assert targets("decision", None, "notes/decisions.md")
    assert targets("preference", "偏好", "MEMORY.md")
    assert targets("temporal", None, "memory/2024-03-01.md")
    assert targets("temporal", "Session 1 (1:56 pm on 8 May, 2023)", "MEMORY.md")
    assert targets("howto", "How-to: deploy", "notes.md")
    assert targets("person", "People", "MEMORY.md")
    assert not targets("decision", "Daily log", "MEMORY.md")
    assert not targets("howto", "Showtimes", "notes.md")
    assert targets("decision", "Project", "notes.md", "# Project\n\n## Decisions\n- Postgres.\n")
    assert not targets("decision", "Project", "notes.md", "- we made a decision\n")  # text, not a heading


def test_boost_raises_only_the_targets_by_standard_deviations() -> None:
    fused = {1: 1.0, 2: 0.0, 3: -1.0}
    places = {1: ("Notes", "a.md", ""), 2: ("Decisions", "a.md", ""), 3: ("Notes", "b.md", "")}
    sd = (2 / 3) ** 0.5
    out = intent_boost(fused, places, ("decision",), 2.0)
    assert out[1] == 1.0 and out[3] == -1.0 and out[2] == pytest.approx(2.0 * sd)


def test_boost_is_a_no_op_when_off_when_nothing_or_everything_is_a_target() -> None:
    fused = {1: 1.0, 2: 0.0}
    none = {1: ("Notes", "a.md", "- decide"), 2: ("Notes", "b.md", "")}
    every = {1: ("Decisions", "a.md", ""), 2: ("Notes", "b.md", "# Notes\n## Decision log\n")}
    assert intent_boost(fused, every, ("decision",), 1.0) == fused
    assert intent_boost(fused, none, ("decision",), 1.0) == fused
    assert intent_boost(fused, {1: ("Decisions", "a.md", ""), 2: ("Notes", "b.md", "")}, ("decision",), 0.0) == fused
    assert intent_boost(fused, none, (), 1.0) == fused


def _ranked(tmp_path: Path, boost: float, query: str) -> list[str]:
    root = tmp_path / "root"
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "notes" / "project.md").write_text(
        "# Project\n\n## Decisions\n\n- Postgres holds the storage.\n\n"
        "## Daily log\n\n- Could not decide on Postgres storage; storage talk again, decide Friday.\n")
    cfg = make_config(root, tmp_path / f"data-{boost}")
    cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, intent_boost=boost, merge_adjacent=False))
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        res = idx.query(Query(query, k=5, mode="keyword", explain=True))
        assert res.query_analysis is not None and res.query_analysis["intent"] == ["decision"]
        return [h.text.splitlines()[-1] for h in res.hits]
    finally:
        idx.close()


def test_a_decision_question_ranks_the_decisions_section_first_only_with_the_boost(tmp_path: Path) -> None:
    query = "what did we decide about postgres storage"
    # The section starts inside the chunk labelled "Project": its own heading still counts.
    assert _ranked(tmp_path, 0.0, query)[0].startswith("- Could not decide")
    assert _ranked(tmp_path, 5.0, query)[0] == "- Postgres holds the storage."
