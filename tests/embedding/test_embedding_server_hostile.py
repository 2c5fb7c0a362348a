"""A hostile or broken OpenAI-compatible embedding server (issue #38 items 2, 3, 21), against a real HTTP
server on loopback (tests/fake_embedding_server.py): non-finite vectors, a width changed mid-run, a
trickle, silence, a huge body. Search keeps answering from its keyword leg and says why in ``degraded``;
nothing non-finite is stored or cached; once the server heals the vectors fill in and hybrid search
works, after a restart too; an index an older memoryd poisoned heals on open."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.indexer.config import Config, EmbeddingConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.embedding import openai_embedder as oe
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import ProviderUnavailable
from memoryd.indexer.search.query import Query
from memoryd.indexer.types import Embedder
from tests.fake_embedding_server import QUERY_MARK, FakeEmbeddingServer
from tests.helpers import make_config

BOUND_S = 10.0  # a call with a 0.5 s deadline must have failed by then, however loaded the machine


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer() as srv:
        yield srv


def _cfg(tmp_path: Path, url: str, **kw: Any) -> Config:
    root = tmp_path / "notes"
    root.mkdir(exist_ok=True)
    (root / "a.md").write_text("# Editors\n\nThe user prefers Neovim for Python.\n", encoding="utf-8")
    emb = EmbeddingConfig(provider="openai", url=url, model="fake-embed", query_prefix=QUERY_MARK, passage_prefix="",
                          cache_dir=tmp_path / "machine", **{"retries": 0, "timeout_s": 5.0, **kw})
    return dataclasses.replace(make_config(root, tmp_path / "data"), embedding=emb)


def _retry_now(emb: Embedder) -> None:
    """The server healed: skip the breaker's cool-down (time-based; the test does not wait it out)."""
    inner: Any = getattr(emb, "inner", emb)
    inner.retry_now()


def _stored_vectors(index: MemoryIndex, cfg: Config) -> list[np.ndarray]:
    """Every vector the index holds: FAISS, the index's embedding cache, the machine cache."""
    rows = [index.backend.faiss.vectors_of(index.backend.faiss.ids())]
    for db in (index.backend.sqlite.path, cfg.embedding_cache_dir / "embeddings.sqlite3"):
        if db.exists():
            with sqlite3.connect(db) as conn:
                rows += [np.frombuffer(v, dtype=np.float32) for (v,) in conn.execute("SELECT vector FROM embed_cache")]
    return rows


def _assert_all_finite(index: MemoryIndex, cfg: Config) -> None:
    assert all(np.isfinite(v).all() for v in _stored_vectors(index, cfg))


def _answers(index: MemoryIndex, query: str) -> Any:
    found = index.query(Query(query, mode="hybrid"))
    json.dumps(found.to_json(), allow_nan=False)  # what the socket sends: "Out of range float values" before
    return found


@pytest.mark.parametrize(("mode", "what"), [("nan", "NaN in vector 0"), ("inf", "past float32"),
                                            ("huge_value", "past float32"), ("wider", "width 24, expected 16")])
def test_a_bad_answer_is_an_embedding_error_nothing_bad_is_stored_and_it_heals(
        server: FakeEmbeddingServer, tmp_path: Path, mode: str, what: str) -> None:
    cfg = _cfg(tmp_path, server.url)
    root = cfg.watch.roots[0]
    emb = load_embedder(cfg.embedding, tmp_path / "models")
    index = open_index(cfg, emb)
    try:
        index.index_files([(root, "a.md")])
        server.mode = mode
        (root / "b.md").write_text("# Trips\n\nWe drove to the lighthouse at Skagen in May.\n", encoding="utf-8")
        stats = index.index_files([(root, "b.md")])  # a width change used to crash the task here
        assert stats.files_indexed == 1 and len(index.backlog) == 1  # committed keyword first, its vector pending
        _assert_all_finite(index, cfg)
        found = _answers(index, "lighthouse Skagen")
        assert [h.path for h in found.hits] == ["b.md"]
        assert found.degraded and found.degraded.startswith("keyword results only") and what in found.degraded
        assert server.url in found.degraded
        server_health = index.status().model.server
        assert server_health is not None and what in server_health["last_error"]
        with pytest.raises(ProviderUnavailable):
            index.fill_vectors()  # retried later, like any failed embedding
        assert len(index.backlog) == 1
        server.mode = "ok"
        _retry_now(emb)
        assert index.fill_vectors() == 1 and len(index.backlog) == 0
        found = _answers(index, "lighthouse Skagen")
        assert found.degraded is None and found.hits[0].path == "b.md"
        _assert_all_finite(index, cfg)
        index.save()
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]
    emb = load_embedder(cfg.embedding, tmp_path / "models")  # a restart
    index = open_index(cfg, emb)
    try:
        assert index.vectors.size == 2 and len(index.backlog) == 0
        found = _answers(index, "lighthouse Skagen")
        assert found.degraded is None and found.mode == "hybrid" and found.hits[0].path == "b.md"
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]


def test_an_index_poisoned_by_an_older_memoryd_heals_on_open(server: FakeEmbeddingServer, tmp_path: Path) -> None:
    """A NaN row already in FAISS and in both caches (stored before answers were checked): on open the
    FAISS row is dropped, the cached rows read as misses, the chunk is embedded again, searches answer."""
    cfg = _cfg(tmp_path, server.url)
    root = cfg.watch.roots[0]
    (root / "b.md").write_text("# Trips\n\nWe drove to the lighthouse at Skagen in May.\n", encoding="utf-8")
    emb = load_embedder(cfg.embedding, tmp_path / "models")
    index = open_index(cfg, emb)
    index.index_files([(root, "a.md"), (root, "b.md")])
    (bad,) = index.store.chunk_ids_of(index.store.root_id(root), "b.md")
    key = index.store.embed_keys([bad])[bad]
    poison = np.full(index.embedder.dimension, np.nan, dtype=np.float32)
    with index.lock:
        index.vectors.remove([bad])
        index.vectors.add([bad], poison[None, :])
    index.save(force=True)
    db = index.backend.sqlite.path
    index.close()
    emb.close()  # type: ignore[attr-defined]
    for path in (db, cfg.embedding_cache_dir / "embeddings.sqlite3"):
        with sqlite3.connect(path) as conn:
            assert conn.execute("UPDATE embed_cache SET vector = ? WHERE key = ?", (poison.tobytes(), key)).rowcount
    passages = server.requests["passage"]
    emb = load_embedder(cfg.embedding, tmp_path / "models")
    index = open_index(cfg, emb)
    try:
        found = _answers(index, "lighthouse Skagen")
        assert found.degraded is None and found.hits[0].path == "b.md"
        index.fill_vectors()  # a no-op when open re-embedded it already
        assert index.vectors.size == 2 and len(index.backlog) == 0
        assert server.requests["passage"] == passages + 2  # the probe, then b.md's chunk again (a.md's: cached)
        _assert_all_finite(index, cfg)
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]


def _embedder(server: FakeEmbeddingServer, tmp_path: Path, **kw: Any) -> Embedder:
    return load_embedder(_cfg(tmp_path, server.url, **kw).embedding, tmp_path / "models")


@pytest.mark.parametrize("mode", ["trickle_head", "trickle_body"])
def test_a_trickling_server_is_cut_at_one_deadline_per_call(server: FakeEmbeddingServer, tmp_path: Path,
                                                            mode: str) -> None:
    """One byte every 0.2 s never trips a per-read timeout (0.5 s); the whole answer would take 100 s
    and more. The call's deadline (0.5 s) ends it, and it is not retried."""
    emb = _embedder(server, tmp_path, timeout_s=0.5, retries=2)
    try:
        server.mode = mode
        t0 = time.monotonic()
        with pytest.raises(ProviderUnavailable, match=r"no complete answer within 0.5 s"):
            emb.embed_passages(["x"])
        assert time.monotonic() - t0 < BOUND_S
        assert server.requests["passage"] == 2  # the probe, then one try: a passed deadline is not retried
        _retry_now(emb)
        t0 = time.monotonic()
        with pytest.raises(ProviderUnavailable, match=r"no complete answer"):
            emb.embed_query("x")
        assert time.monotonic() - t0 < BOUND_S
    finally:
        emb.close()  # type: ignore[attr-defined]


def test_a_silent_server_costs_a_search_one_short_wait_then_none(server: FakeEmbeddingServer, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``timeout_s`` 30 (passages may take long), but a query waits QUERY_DEADLINE_S at most; then the
    breaker is open and the next searches go keyword-only without asking the server."""
    monkeypatch.setattr(oe, "QUERY_DEADLINE_S", 0.5, raising=False)
    cfg = _cfg(tmp_path, server.url, timeout_s=30.0)
    emb = load_embedder(cfg.embedding, tmp_path / "models")
    index = open_index(cfg, emb)
    try:
        index.index_files([(cfg.watch.roots[0], "a.md")])
        server.mode = "silent"
        t0 = time.monotonic()
        first = _answers(index, "Neovim")
        assert time.monotonic() - t0 < BOUND_S
        assert first.degraded and "no complete answer within 0.5 s" in first.degraded
        assert [h.path for h in first.hits] == ["a.md"]
        second = _answers(index, "Neovim Python")
        assert second.degraded and "is down" in second.degraded and [h.path for h in second.hits] == ["a.md"]
        assert server.requests["query"] == 1  # the second search did not wait on the server
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]


def test_a_huge_answer_is_cut_at_the_size_cap(server: FakeEmbeddingServer, tmp_path: Path) -> None:
    """160 MB sent as one "vector": reading stops past the cap (batch x width x a generous bytes-per-float)."""
    emb = _embedder(server, tmp_path)
    try:
        server.mode = "huge"
        with pytest.raises(ProviderUnavailable, match=r"bytes a batch may take"):
            emb.embed_passages(["x"])
        assert oe.answer_cap(1, 16) < 100_000
        assert server.sent < 16 * 1024 * 1024  # what the socket buffers took, not 160 MB
    finally:
        emb.close()  # type: ignore[attr-defined]


def test_the_breaker_doubles_its_cool_down_and_lets_one_probe_through() -> None:
    from memoryd.indexer.embedding.breaker import COOLDOWN_MAX_S, COOLDOWN_S, Breaker

    now = [0.0]
    b = Breaker(clock=lambda: now[0])
    assert b.admit(query=True) is None
    assert b.failed() == COOLDOWN_S and b.admit(query=True) == COOLDOWN_S
    now[0] += COOLDOWN_S
    assert b.admit(query=False) is None  # the probe goes
    assert b.admit(query=True) == 0.0  # a search does not queue behind it
    assert b.admit(query=False) is None  # the background may
    assert b.failed() == 2 * COOLDOWN_S
    for _ in range(20):
        last = b.failed()
    assert last == COOLDOWN_MAX_S
    b.succeeded()
    assert b.admit(query=True) is None


def test_on_postgres_a_nan_answer_is_refused_and_search_answers(server: FakeEmbeddingServer, tmp_path: Path,
                                                                pg_dsn: str) -> None:
    """pgvector refuses NaN: the file was skipped (``prepare-failed: embedding: DataException: NaN not allowed
    in vector``), not searchable at all. Now the answer never gets there, and the PostgreSQL index's search
    has the embedded one's outage path (it had none: the embedder's error reached the client)."""
    from memoryd.indexer.engine import open_index
    from tests.indexer.test_storage_backends import storage_config

    base = _cfg(tmp_path, server.url)
    cfg = dataclasses.replace(storage_config("postgres", base.watch.roots[0], tmp_path / "data", pg_dsn),
                              embedding=base.embedding)
    root = cfg.watch.roots[0]
    emb = load_embedder(cfg.embedding, tmp_path / "models")
    index = open_index(cfg, emb)
    try:
        index.index_files([(root, "a.md")])
        server.mode = "nan"
        (root / "b.md").write_text("# Trips\n\nWe drove to the lighthouse at Skagen in May.\n", encoding="utf-8")
        assert index.index_files([(root, "b.md")]).files_indexed == 1 and len(index.backlog) == 1
        found = _answers(index, "lighthouse Skagen")
        assert found.degraded and "NaN in vector 0" in found.degraded and found.hits[0].path == "b.md"
        server.mode = "ok"
        _retry_now(emb)
        assert index.fill_vectors() == 1
        found = _answers(index, "lighthouse Skagen")
        assert found.degraded is None and found.hits[0].path == "b.md"
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]


def test_server_text_loses_the_key_detected_secrets_and_control_characters() -> None:
    from memoryd.indexer.embedding.server_text import MAX_CHARS, scrub

    key = "local-embed-key-5f3a9c0e7b1d"  # no form the detector knows
    text = f"Incorrect API key provided: {key}.\x1b[2J also tried sk-test-0123456789abcdef " + "x" * 500
    out = scrub(text, key)
    assert key not in out and "[REDACTED:embedding.api_key]" in out
    assert "sk-test-0123456789abcdef" not in out and "\x1b" not in out and len(out) <= MAX_CHARS
    assert scrub("plain words", "") == "plain words"
