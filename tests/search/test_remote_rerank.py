"""The optional remote reranker (issue 41 item 2; indexer/search/rerank_step.py, rerank_remote.py): the first
hits reordered by a scripted fake server, and for every way a server fails the fused order kept, logged and
counted. No test waits on time: a slow server is one that never answers, cut by the call's deadline."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog

from memoryd.daemon.client.render import render_status
from memoryd.indexer.config import Config, ConfigError, load
from memoryd.indexer.engine import open_index
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.rerank_remote import RemoteReranker, RerankFailed, parse_scores, request_body
from memoryd.indexer.search.rerank_step import RerankStep
from memoryd.indexer.settings.rerank import RerankConfig, rerank_key
from tests.helpers import CountingEmbedder, make_config
from tests.search.rerank_fake import FakeReranker, documents_of, never_answers, relevance, trickle

KEY = "rk-test-key-0123456789"


def _hits(n: int = 6, answer_at: int = 4) -> list[Hit]:
    return [Hit(i, "/r", f"n{i}.md", 1, 2, "", f"note {i}" + (" the answer" if i == answer_at else ""),
                1.0 - i / 10, 0.5, 0.5) for i in range(n)]


def _step(url: str, **cfg: Any) -> RerankStep:
    rc = RerankConfig(url=url, model="bge-test", timeout_ms=300, **cfg)
    return RerankStep(rc, RemoteReranker(rc, KEY))


def test_the_server_order_is_applied_and_the_rest_keeps_its_place() -> None:
    with FakeReranker(relevance) as fake:
        step = _step(fake.url, top_n=5)
        out = step.rerank("where is the answer", _hits(7))
        assert [h.chunk_id for h in out.hits] == [4, 0, 1, 2, 3, 5, 6]  # 5 and 6 were not sent
        assert out.reason is None and set(out.scores) == {0, 1, 2, 3, 4}
        body = fake.requests[0]
        assert body["top_n"] == 5 and len(body["documents"]) == 5 and body["model"] == "bge-test"
        assert fake.headers[0]["Authorization"] == f"Bearer {KEY}"
        assert step.stats()["applied"] == 1 and step.stats()["fallbacks"] == 0


def test_scores_are_cached_by_model_query_and_text() -> None:
    with FakeReranker(relevance) as fake:
        step = _step(fake.url)
        step.rerank("where is the answer", _hits())
        again = step.rerank("where is the answer", _hits())
        assert len(fake.requests) == 1 and again.cached == 6 and again.hits[0].chunk_id == 4
        step.rerank("another question", _hits())
        assert len(fake.requests) == 2


def test_tei_shape_and_request() -> None:
    def tei(body: dict[str, Any]) -> tuple[int, bytes]:
        docs = documents_of(body)
        return 200, json.dumps([{"index": i, "score": 0.8 if "answer" in d else 0.2}
                                for i, d in enumerate(docs)]).encode()

    with FakeReranker(tei) as fake:
        step = _step(fake.url.replace("/v1/rerank", "/rerank"))
        out = step.rerank("q", _hits())
        assert "texts" in fake.requests[0] and "documents" not in fake.requests[0]
        assert out.hits[0].chunk_id == 4


def _rows(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"index": i, "relevance_score": 0.1 * i, **extra} for i in range(n)]


HOSTILE = {
    "wrong length": json.dumps({"results": _rows(5)}),
    "top_n ignored (more than sent)": json.dumps({"results": [*_rows(6), {"index": 6, "relevance_score": 1.0}]}),
    "NaN": json.dumps({"results": [*_rows(5), {"index": 5, "relevance_score": float("nan")}]}),
    "Infinity": '{"results": [' + ",".join(f'{{"index": {i}, "relevance_score": Infinity}}' for i in range(6)) + "]}",
    "duplicate index": json.dumps({"results": [*_rows(5), {"index": 0, "relevance_score": 0.3}]}),
    "out-of-range index": json.dumps({"results": [*_rows(5), {"index": 9, "relevance_score": 0.3}]}),
    "negative index": json.dumps({"results": [*_rows(5), {"index": -1, "relevance_score": 0.3}]}),
    "string score": json.dumps({"results": [*_rows(5), {"index": 5, "relevance_score": "0.3"}]}),
    "boolean index": json.dumps({"results": [*_rows(5), {"index": True, "relevance_score": 0.3}]}),
    "not JSON": "<html>busy</html>",
    "no results": json.dumps({"error": "model loading"}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_answer_leaves_the_fused_order(case: str) -> None:
    with FakeReranker(lambda body: (200, HOSTILE[case].encode())) as fake:
        step = _step(fake.url)
        hits = _hits()
        out = step.rerank("q", hits)
        assert out.hits == hits and not out.scores and out.reason
        assert step.stats()["fallbacks"] == 1 and step.stats()["last_error"] == out.reason


def test_an_unsorted_answer_is_sorted_here() -> None:
    def unsorted(body: dict[str, Any]) -> tuple[int, bytes]:
        n = len(documents_of(body))
        return 200, json.dumps({"results": [{"index": i, "relevance_score": [0.2, 0.9, 0.1, 0.5, 0.3, 0.4][i]}
                                            for i in (2, 0, 5, 1, 4, 3)][:n]}).encode()

    with FakeReranker(unsorted) as fake:
        out = _step(fake.url).rerank("q", _hits())
        assert [h.chunk_id for h in out.hits] == [1, 3, 5, 4, 0, 2]


def test_http_500_and_a_huge_body_fall_back() -> None:
    with FakeReranker(lambda body: (500, b'{"error": {"message": "bad key ' + KEY.encode() + b'"}}')) as fake:
        step = _step(fake.url)
        out = step.rerank("q", _hits())
        assert out.reason is not None and "HTTP 500" in out.reason and KEY not in out.reason
    with FakeReranker(lambda body: (200, b'{"results": [' + b" " * 8_000_000 + b"]}")) as fake:
        out = _step(fake.url).rerank("q", _hits())
        assert out.reason is not None and "bytes" in out.reason


@pytest.mark.parametrize("behaviour", [never_answers, trickle])
def test_a_slow_server_is_cut_at_the_budget(behaviour: Any) -> None:
    with FakeReranker(lambda body: behaviour(fake)) as fake:
        step = _step(fake.url)
        hits = _hits()
        out = step.rerank("q", hits)
        assert out.hits == hits and out.reason is not None
        assert "300 ms" in out.reason or "deadline" in out.reason


def test_a_server_that_is_down_falls_back_and_is_not_asked_again_at_once() -> None:
    with FakeReranker(relevance) as fake:
        url = fake.url
    step = _step(url)  # the port is closed now
    first = step.rerank("q", _hits())
    assert first.reason is not None and "Connect" in first.reason
    second = step.rerank("q2", _hits())
    assert second.reason is not None and "failed recently" in second.reason
    assert step.stats()["fallbacks"] == 2


def test_the_key_is_never_logged_nor_shown(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs, \
            FakeReranker(lambda body: (401, f'{{"error": "invalid key {KEY}"}}'.encode())) as fake:
        step = _step(fake.url)
        step.rerank("q", _hits())
    text = json.dumps(logs) + json.dumps(step.stats()) + repr(step._scorer)
    assert logs and logs[0]["event"] == "rerank.fallback" and KEY not in text


def test_the_key_file_must_be_0600(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(KEY + "\n")
    os.chmod(f, 0o644)
    with pytest.raises(ConfigError, match=r"rerank\.api_key_file.*0600"):
        rerank_key(RerankConfig(url="http://x/v1/rerank", api_key_file=f), {})
    os.chmod(f, 0o600)
    assert rerank_key(RerankConfig(url="http://x/v1/rerank", api_key_file=f), {}) == KEY
    assert rerank_key(RerankConfig(url="http://x", api_key_env="RK"), {"RK": KEY}) == KEY
    cfg_file = tmp_path / "memoryd.toml"
    cfg_file.write_text(f'[rerank]\nurl = "http://127.0.0.1:1/v1/rerank"\napi_key_file = "{f}"\n')
    os.chmod(cfg_file, 0o600)
    cfg = load(cfg_file, env={})
    assert cfg.rerank_api_key == KEY and KEY not in repr(cfg)
    assert Config().rerank.url == ""  # off by default


def test_parse_and_request_shapes() -> None:
    assert parse_scores(b'[{"index": 1, "score": 2.5}, {"index": 0, "score": -1}]', 2) == [-1.0, 2.5]
    with pytest.raises(RerankFailed):
        parse_scores(b'{"results": [{"index": 0, "relevance_score": NaN}]}', 1)
    body = request_body(RerankConfig(url="http://h/v1/rerank"), "q", ["a", "b"])
    assert body["documents"] == ["a", "b"] and body["top_n"] == 2 and "model" not in body


def test_calibration_on_the_rerankers_scale() -> None:
    step = RerankStep(RerankConfig(url="http://h/v1/rerank", scale=2.0, shift=-1.0), relevance)  # type: ignore[arg-type]
    probs = step.probabilities({1: 0.5, 2: 0.9})  # probabilities: logit 0 and 2.197
    assert probs[1] == pytest.approx(1 / (1 + 2.718281828 ** 1.0), rel=1e-4)
    raw = step.probabilities({1: 3.0, 2: -2.0})  # a score outside [0, 1]: logits as they are
    assert raw[1] > 0.99 and raw[2] < 0.01


def test_search_applies_it_and_status_counts_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(6):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nThe project note {i} about the deadline"
                                       + (" and the answer" if i == 2 else "") + ".\n")
    with FakeReranker(relevance) as fake:
        cfg = make_config(root, tmp_path / "data")
        cfg = dataclasses.replace(cfg, rerank=RerankConfig(url=fake.url, timeout_ms=2000))
        from memoryd.indexer.embedding import load_embedder

        idx = open_index(cfg, CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir)))
        try:
            idx.index_files([(root, p.name) for p in sorted(root.glob("*.md"))])
            res = idx.query(Query("project note deadline", k=3, explain=True)).to_json()
            assert res["hits"][0]["path"] == "n2.md" and res["query_analysis"]["rerank"]["applied"]
            assert res["hits"][0]["explain"]["rerank_score"] == 0.9
            assert res["hits"][0]["score"] == pytest.approx(0.9)  # the reranker's scale (defaults: as it is)
            assert idx.status().to_json()["rerank"]["applied"] == 1
            chat = idx.query(Query("thanks, that works", k=3)).to_json()["hits"]  # a chat turn stays at 0
            assert chat and all(h["score"] == 0.0 for h in chat)
        finally:
            idx.close()
        fake.script = lambda body: (500, b"{}")
        idx = open_index(cfg, CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir)))
        try:
            res = idx.query(Query("project note deadline", k=3, explain=True)).to_json()
            assert "fallback" in res["query_analysis"]["rerank"] and res["hits"]
            st = idx.status().to_json()
            assert st["rerank"]["fallbacks"] == 1
            assert "1 kept the fused order, last: HTTP 500" in render_status(st)  # type: ignore[arg-type]
        finally:
            idx.close()
