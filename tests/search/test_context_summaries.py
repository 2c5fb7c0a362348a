"""Context with a model (issue #40, item 4): what does not fit is summarized, not cut; file abstracts.

A scripted fake model stands in for the ``[llm]`` client: it records what it was asked and answers
canned JSON, or raises as the client does when the server is down.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd.daemon.api.read import ReadMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.llm.errors import LLMBadAnswer, LLMUnavailable
from memoryd.indexer.search.abstracts import AbstractStore, abstract_key, refresh_step
from memoryd.indexer.search.context import build_context
from memoryd.indexer.search.hits import Hit, SearchResult
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.summaries import compact_context

COUNT = HashEmbedder().count_tokens
OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())


class FakeModel:
    def __init__(self, answer: Any = None, error: Exception | None = None, name: str = "fake-1") -> None:
        self.answer, self.error, self.name = answer, error, name
        self.asked: list[str] = []

    def health(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        self.asked.append(messages[-1]["content"])
        if self.error is not None:
            raise self.error
        return self.answer(messages[-1]["content"]) if callable(self.answer) else self.answer


def span(path: str, n: int, score: float, root: str = "/r") -> Hit:
    text = "\n".join(f"- In {path} entry {i} the migration of service {i} to the queue finished" for i in range(n))
    return Hit(chunk_id=hash(path) % 1000, root=root, path=path, start_line=1, end_line=n, heading="", text=text,
               score=score, vector_score=0.0, text_score=0.0)


HITS = [span("a.md", 3, 0.9), span("b.md", 30, 0.8), span("c.md", 30, 0.7)]
BUDGET = 160


def test_without_a_model_the_budget_cuts_spans_so_there_is_something_to_summarize() -> None:
    plain = build_context("migration", HITS, BUDGET, COUNT)
    assert plain.omitted or any(s.lines for s in plain.sources)


def test_the_spans_that_do_not_fit_are_summarized_with_citations() -> None:
    model = FakeModel({"points": [{"source": 1, "text": "Thirty services of b.md moved to the queue."},
                                  {"source": 2, "text": "c.md records thirty more migrations, all finished."}]})
    out = compact_context("migration", HITS, BUDGET, COUNT, model).to_json()
    assert out["tokens"] == COUNT([out["text"]])[0] <= BUDGET
    assert "### a.md:1-3\n" in out["text"]  # the span that fits goes in whole
    assert "### Summary of 2 more memories" in out["text"]
    assert "- Thirty services of b.md moved to the queue. (b.md:1-30)" in out["text"]
    assert [(s["path"], s.get("summarized", False)) for s in out["sources"]] == [
        ("a.md", False), ("b.md", True), ("c.md", True)]
    assert out["omitted"] == 0
    assert "[1] b.md:1-30" in model.asked[0] and "[2] c.md:1-30" in model.asked[0]  # what was not shown whole


def test_points_are_taken_only_while_the_budget_lasts() -> None:
    long = "word " * 60
    model = FakeModel({"points": [{"source": 1, "text": "short point about b"}, {"source": 2, "text": long}]})
    out = compact_context("migration", HITS, 110, COUNT, model).to_json()
    assert out["tokens"] <= 110 and "short point about b" in out["text"] and long.strip() not in out["text"]


def test_any_model_failure_gives_the_plain_block() -> None:
    plain = build_context("migration", HITS, BUDGET, COUNT)
    for model in (FakeModel(error=LLMUnavailable("llm server http://x is down")),
                  FakeModel(error=LLMBadAnswer("not JSON")), FakeModel({"points": [{"source": 9, "text": "x"}]}),
                  FakeModel({"oops": 1})):
        assert compact_context("migration", HITS, BUDGET, COUNT, model) == plain


def test_a_block_that_fits_asks_no_model() -> None:
    model = FakeModel(error=AssertionError("must not be called"))
    out = compact_context("migration", HITS[:1], 400, COUNT, model)
    assert out == build_context("migration", HITS[:1], 400, COUNT) and model.asked == []


def test_file_abstracts_stand_in_without_a_model_call() -> None:
    model = FakeModel(error=AssertionError("must not be called"))
    abstracts = {"b.md": "b.md: thirty service migrations, all finished.", "c.md": "c.md: thirty more."}
    out = compact_context("migration", HITS, BUDGET, COUNT, model,
                          abstract_of=lambda root, rel: abstracts.get(rel)).to_json()
    assert "- b.md: thirty service migrations, all finished. (b.md:1-30)" in out["text"] and model.asked == []


def test_abstracts_are_cached_by_model_and_text_and_a_failure_stops_the_step(tmp_path: Path) -> None:
    store = AbstractStore(tmp_path / "abstracts.sqlite")
    model = FakeModel(lambda text: {"abstract": f"About {text.split()[1]}."})
    files = [("a.md", "# alpha notes\n- one"), ("b.md", "# beta notes\n- two"), ("c.md", "  ")]
    assert refresh_step(files, store, model, limit=1) == 1 and len(model.asked) == 1
    assert refresh_step(files, store, model, limit=10) == 1 and len(model.asked) == 2  # a.md is not asked again
    assert store.get("fake-1", "# alpha notes\n- one") == "About alpha."
    assert store.get("fake-2", "# alpha notes\n- one") is None  # another model: another key
    assert store.get("fake-1", "# alpha notes\n- one, edited") is None  # an edited file: another key
    assert abstract_key("m", "t") != abstract_key("m", "t2")
    down = FakeModel(error=LLMUnavailable("down"), name="other")
    assert refresh_step(files, store, down, limit=5) == 0 and len(down.asked) == 1  # stops at the first failure
    store.close()


class ThreeHitIndex:
    site: str | None = None

    def __init__(self, root: Path) -> None:
        self.root = root

    def query(self, query: Query) -> SearchResult:
        return SearchResult(mode="hybrid", took_ms=0.1, hits=[dataclasses.replace(h, root=str(self.root))
                                                               for h in HITS])


def test_the_context_method_uses_the_model_and_the_cached_abstracts(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# b\n- thirty migrations\n")
    (tmp_path / "c.md").write_text("# c\n- thirty more\n")
    store = AbstractStore(tmp_path / "abstracts.sqlite")
    store.put("fake-1", "# b\n- thirty migrations\n", "b.md holds thirty finished migrations.")
    model = FakeModel({"points": [{"source": 1, "text": "c.md: thirty more migrations finished."}]})
    roots = RootMap([tmp_path])

    def reads(current: FakeModel | None) -> ReadMethods:
        return ReadMethods(index=ThreeHitIndex(tmp_path), roots=lambda: roots, worker=None,  # type: ignore[arg-type]
                           search=Config().search, path_filter=PathFilter(("*.md",), ()), max_file_bytes=1 << 20,
                           count_tokens=COUNT, query_vector=lambda q: None, model=lambda: current, abstracts=store)

    out = reads(model).context({"query": "migration", "max_tokens": BUDGET}, OWNER)
    assert "b.md holds thirty finished migrations. (b.md:1-30)" in out["text"]
    assert "c.md: thirty more migrations finished. (c.md:1-30)" in out["text"]
    assert len(model.asked) == 1 and "[1] c.md:1-30" in model.asked[0] and "b.md:1-30" not in model.asked[0]
    plain = reads(None).context({"query": "migration", "max_tokens": BUDGET}, OWNER)
    assert "Summary of" not in plain["text"]  # no model: today's excerpts
    store.close()
