"""Transcript queries lose their speaker labels (indexer/search/querytext.py), in both legs and over the socket path."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memoryd.daemon.api.read import query_vector_of
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.querytext import clean_query
from tests.helpers import CountingEmbedder, make_config


@pytest.mark.parametrize(("query", "cleaned"), [
    ("Bart: look at my shirt\nAssistant: it is lovely!\nBart: mum chose it",
     "look at my shirt\nit is lovely!\nmum chose it"),
    ("小明：周末去爬山吗？\nAssistant：好主意，带上水。", "周末去爬山吗？\n好主意，带上水。"),
    ("- **Caroline**: I adopted a dog\n- **Melanie**: what is its name?", "I adopted a dog\nwhat is its name?"),
    ("Dr. Smith: take two\nJean-Luc O'Neil: thanks", "take two\nthanks"),
    ("Ann: first\n\nnot a label line\nBob: second", "first\n\nnot a label line\nsecond"),  # 2 of 3 non-empty
])
def test_transcripts_lose_their_labels(query: str, cleaned: str) -> None:
    assert clean_query(query) == cleaned


@pytest.mark.parametrize("query", [
    "What did Caroline say: was it the dog?",  # one line: a question, not a transcript
    "Todo: renew the passport\nand book the flights\nbefore the trip in May",  # one label among prose
    "10:30 standup\n11:00 review",  # times are not labels
    "Ann: one\nsome prose here\nmore prose\nand more",  # labels on fewer than half the lines
    "Ann:\nBob:",  # nothing but labels: keep what the user wrote
    "",
])
def test_everything_else_is_searched_as_written(query: str) -> None:
    assert clean_query(query) == query


def test_both_legs_search_the_cleaned_query_and_explain_says_so(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n\n- Bart's mother chose the sunflower shirt.\n")
    cfg = make_config(root, tmp_path / "data")
    emb = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    seen: list[str] = []
    original = emb.embed_query

    def recording(text: str) -> Any:
        seen.append(text)
        return original(text)

    emb.embed_query = recording  # type: ignore[method-assign]
    idx = open_index(cfg, emb)
    reconcile(idx, [root], PathFilter(("*.md",), ()))
    res = idx.query(Query("Bart: sunflower shirt\nAssistant: lovely", k=3, explain=True)).to_json()
    idx.close()
    assert seen == ["sunflower shirt\nlovely"] and res["query_searched"] == "sunflower shirt\nlovely"
    assert res["hits"] and res["hits"][0]["explain"]["keyword_rank"] == 1


def test_the_daemon_embeds_ahead_the_same_cleaned_query() -> None:
    started: list[str] = []
    embeddings = SimpleNamespace(start=lambda q: started.append(q) or (lambda: None))
    query_vector_of(embeddings)("Ann: hello there\nBob: hi")  # type: ignore[arg-type]
    assert started == [clean_query("Ann: hello there\nBob: hi")] == ["hello there\nhi"]
