"""An in-process daemon on a scripted OpenAI-compatible server (issue #38 items 8 and 10): the API key a 401
repeats reaches no reply, no ``status`` and no log line, and a confined session is told only that the
server is unavailable; ``remember`` is accepted while the server is down (compared with the target file
by text only, written, embedded once the server is back)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.work import vector_steps
from memoryd.indexer.config import Config, EmbeddingConfig
from tests.fake_embedding_server import QUERY_MARK, FakeEmbeddingServer
from tests.helpers import running_daemon, wait_for
from tests.write_fixtures import HASH_WRITE

KEY = "local-embed-key-5f3a9c0e7b1d"  # in no format the secret detector knows: only its value can find it
ALICE = {"kind": "direct", "peer": "alice"}
FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n",
         "peers/alice/MEMORY.md": "# Alice\n\n- Alice's office is in Porto.\n"}


def _tweak(server: FakeEmbeddingServer, tmp_path: Path) -> Any:
    def tweak(cfg: Config) -> Config:
        emb = EmbeddingConfig(provider="openai", url=server.url, model="fake-embed", query_prefix=QUERY_MARK,
                              passage_prefix="", retries=0, timeout_s=5.0, cache_dir=tmp_path / "machine")
        return dataclasses.replace(cfg, embedding=emb, embedding_api_key=KEY,
                                   write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    return tweak


def test_a_key_the_server_repeats_reaches_no_reply_status_or_log_and_writes_go_on(
        tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_steps, "RETRY_BACKLOG_S", 0.05)  # the backlog tries again at once once healed
    with FakeEmbeddingServer() as server, capture_logs() as logs, \
            running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=_tweak(server, tmp_path)) as (
                d, client, root):
        server.mode = "unauthorized"
        owner = client.call("search", {"query": "office Lisbon", "mode": "hybrid"})
        assert [h["path"] for h in owner["hits"]][:1] == ["MEMORY.md"]  # the keyword leg answers
        assert "keyword results only" in owner["degraded"] and "HTTP 401" in owner["degraded"]
        again = client.call("search", {"query": "office river", "mode": "hybrid"})  # the breaker: fails at once
        assert "keyword results only" in again["degraded"]
        peer = client.call("search", {"query": "office Porto", "mode": "hybrid", "session": ALICE})
        assert peer["degraded"] == "keyword results only: embedding server unavailable"
        ctx = client.call("context", {"query": "office Lisbon", "max_tokens": 200})
        assert "Lisbon" in ctx["text"]  # a context block from the keyword leg, its lines ranked by match
        status = client.call("status")
        assert status["model"]["server"]["reachable"] is False and "HTTP 401" in status["model"]["server"]["last_error"]

        new = client.call("remember", {"content": "The user's dentist is Dr. Weber in Basel."})
        assert new["decision"] == "appended" and new["index_note"] == "embedded later: embedding server unavailable"
        close = client.call("remember", {"content": "The user's dentist is Dr. Weber, in Bern."})
        assert close["decision"] == "appended" and close["path"] == new["path"]  # resemblance alone: no replace
        same = client.call("remember", {"content": "the user's dentist is Dr. Weber in  Basel"})
        assert same["decision"] == "reinforced" and same["path"] == new["path"]  # the very text, folded
        text = (root / new["path"]).read_text(encoding="utf-8")
        assert "Dr. Weber in Basel" in text and "Dr. Weber, in Bern" in text
        found = client.call("search", {"query": "dentist Weber", "mode": "keyword"})
        assert found["hits"] and "Weber" in found["hits"][0]["text"]  # keyword-searchable at once

        for reply in (owner, again, peer, ctx, status, new, close, same):
            assert KEY not in json.dumps(reply)
        server.mode = "ok"
        d.index.embedder.inner.retry_now()  # the breaker's cool-down is time-based; the test does not wait
        wait_for(lambda: len(d.index.backlog) == 0, timeout=20, what="the vectors written while down")
        healed = client.call("search", {"query": "dentist Weber in Basel", "mode": "hybrid"})
        assert "degraded" not in healed and "Weber" in healed["hits"][0]["text"]
    assert logs and KEY not in json.dumps(logs, default=str)
    assert any(e.get("event") == "search.keyword_only" for e in logs)  # the outage was logged, the key not


def test_the_configured_key_is_redacted_from_every_log_line_by_value() -> None:
    """The second line behind the embedder's own scrubbing: the detector does not know such a key's form; its value is
    registered when the index opens (daemon/oneshot.py open_index) and redacted from memoryd's events and
    libraries' records alike."""
    import io
    import logging

    import structlog

    from memoryd.daemon.log_redaction import protect
    from memoryd.daemon.logs import configure_logging, reset_logging

    key = "log-only-key-0c4e7a91"  # protected by no other test of this process
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    try:
        structlog.get_logger("memoryd").warning("vectors.provider_down", error=f"HTTP 401: bad key {key}")
        protect(key)
        structlog.get_logger("memoryd").warning("vectors.provider_down", error=f"HTTP 401: bad key {key}")
        logging.getLogger("httpx").warning("bad key %s", KEY)
    finally:
        reset_logging()
    first, *rest = out.getvalue().splitlines()
    assert key in first  # before: the detector alone lets it through
    assert len(rest) == 2 and all(key not in line and "[REDACTED:configured]" in line for line in rest)


def test_remember_and_search_answer_while_the_server_trickles(tmp_path: Path, short_dir: Path) -> None:
    """A server sending one byte every 0.2 s held the index worker: `remember` failed -32026 and a search got
    no answer in 60 s. One deadline per call (here `timeout_s` 0.5) bounds what either waits."""
    with FakeEmbeddingServer() as server:
        base = _tweak(server, tmp_path)

        def tweak(cfg: Config) -> Config:
            cfg = base(cfg)
            return dataclasses.replace(cfg, embedding=dataclasses.replace(cfg.embedding, timeout_s=0.5))

        with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak) as (_d, client, _root):
            server.mode = "trickle_body"
            new = client.call("remember", {"content": "The user's dentist is Dr. Weber in Basel."})
            assert new["decision"] == "appended" and new["index_note"] == "embedded later: embedding server unavailable"
            found = client.call("search", {"query": "dentist Weber", "mode": "hybrid"})
            assert "keyword results only" in found["degraded"] and "Weber" in found["hits"][0]["text"]
