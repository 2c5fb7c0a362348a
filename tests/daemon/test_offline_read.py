"""``--offline`` reads run the socket's own handlers in-process: the same parse, the same Query, the same reply.

The index is a recording fake handed to the offline commands in place of the read-only one
(``oneshot.open_index``), so each test compares what the offline command asked of the index with
what the socket method asks for the same params, without a model or a daemon.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon import oneshot
from memoryd.daemon.api.read import ReadMethods, query_vector_of
from memoryd.daemon.offline_read import OfflineParamsError, offline_context, offline_search
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer import config as configmod
from memoryd.indexer.search.hits import Hit, SearchResult
from memoryd.indexer.search.query import Query


class _Embedder:
    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]


class RecordingIndex:
    """Answers every query with one hit and keeps the queries; ``closed`` once the command is done."""

    site: str | None = None

    def __init__(self, root: Path) -> None:
        self.root = root
        self.queries: list[Query] = []
        self.closed = False
        self.embedder = _Embedder()

    def query(self, query: Query) -> SearchResult:
        self.queries.append(query)
        hit = Hit(chunk_id=1, root=str(self.root), path="agents/bot/MEMORY.md", start_line=3, end_line=3,
                  heading="Bot", text="- The zebracorn bot note.", score=0.9, vector_score=0.8, text_score=0.7)
        return SearchResult(mode=query.mode or "hybrid", hits=[hit], took_ms=0.5)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def cfg(tmp_path: Path) -> configmod.Config:
    return configmod.with_overrides(configmod.Config(), roots=[tmp_path], data_dir=tmp_path / "data")


def _socket(cfg: configmod.Config, index: RecordingIndex) -> ReadMethods:
    """The read methods as the daemon assembles them (``app.build_handlers``), without a query-embedding thread."""
    roots = RootMap(cfg.effective_roots)
    return ReadMethods(index=index, roots=lambda: roots, worker=None,  # type: ignore[arg-type]  # reads only
                       search=cfg.search, path_filter=PathFilter(cfg.watch.include, cfg.watch.exclude),
                       max_file_bytes=cfg.watch.max_file_bytes, count_tokens=index.embedder.count_tokens,
                       query_vector=query_vector_of(None), redact_level=cfg.write.redact_index)


OWNER = Peer(os.getpid(), os.getuid(), os.getgid())
SEARCHES = [
    {"query": "zebracorn", "namespace": "agent:bot", "min_score": 0},
    {"query": "zebracorn", "k": 3, "mode": "keyword", "explain": True, "min_score": "default"},
    {"query": "zebracorn", "path_prefix": "agents/", "namespace": "default"},
]


@pytest.mark.parametrize("params", SEARCHES)
def test_offline_search_asks_the_index_what_the_socket_asks_and_answers_the_same(
        cfg: configmod.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any]) -> None:
    offline = RecordingIndex(tmp_path)
    monkeypatch.setattr(oneshot, "open_index", lambda cfg, read_only=False: offline)
    got = offline_search(cfg, params)
    socket = RecordingIndex(tmp_path)
    want = _socket(cfg, socket).search(dict(params), OWNER)
    assert offline.queries == socket.queries and len(offline.queries) == 1
    assert got == want
    assert offline.closed


def test_offline_context_asks_the_index_what_the_socket_asks_and_answers_the_same(
        cfg: configmod.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = {"query": "zebracorn", "max_tokens": 200, "namespace": "agent:bot", "mode": "keyword"}
    offline = RecordingIndex(tmp_path)
    monkeypatch.setattr(oneshot, "open_index", lambda cfg, read_only=False: offline)
    got = offline_context(cfg, params)
    socket = RecordingIndex(tmp_path)
    want = _socket(cfg, socket).context(dict(params), OWNER)
    assert offline.queries == socket.queries
    assert offline.queries[0].path_prefix == f"{tmp_path}/agents/bot/"
    assert {k: v for k, v in got.items() if k != "took_ms"} == {k: v for k, v in want.items() if k != "took_ms"}
    assert "zebracorn bot note" in got["text"]


@pytest.mark.parametrize(("command", "params", "message"), [
    (offline_search, {"query": "q", "namespace": "bogus"}, "namespace 'bogus'"),
    (offline_context, {"query": "q", "max_tokens": 100, "namespace": "bogus"}, "namespace 'bogus'"),
    (offline_search, {"query": "q", "k": 0}, "param 'k' must be in 1..1000"),
])
def test_a_param_the_daemon_refuses_is_a_clean_error_before_the_index_opens(
        cfg: configmod.Config, monkeypatch: pytest.MonkeyPatch, command: Any, params: dict[str, Any],
        message: str) -> None:
    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("the index was opened for params the daemon refuses")

    monkeypatch.setattr(oneshot, "open_index", never)
    with pytest.raises(OfflineParamsError, match=re.escape(message)):
        command(cfg, params)


def test_sites_on_the_embedded_index_is_refused_offline_as_on_the_socket(
        cfg: configmod.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old offline path handed ``sites`` to the embedded index, which ignored it: the answer held
    every site's hits while the socket refused the same params."""
    index = RecordingIndex(tmp_path)
    monkeypatch.setattr(oneshot, "open_index", lambda cfg, read_only=False: index)
    with pytest.raises(OfflineParamsError, match=re.escape("needs storage.backend = 'postgres'")):
        offline_search(cfg, {"query": "q", "sites": ["self"]})
    assert index.queries == [] and index.closed


def test_a_request_builds_its_query_once_with_what_the_handler_adds(tmp_path: Path) -> None:
    from memoryd.daemon.api.requests import Scope, SearchRequest
    from memoryd.indexer.access import OWNER as OWNER_KIND
    from memoryd.indexer.access import Session

    def check(root: str, rel: str) -> bool:
        return True

    req = SearchRequest("q", 4, "keyword", Session(OWNER_KIND), Scope("a/", ("b/",)), 0.2, True, ("self",))
    query = req.to_query(path_check=check, sites=("site-a",))
    assert query == Query("q", k=4, mode="keyword", path_prefix="a/", min_score=0.2, explain=True,
                          exclude_prefixes=("b/",), path_check=check, sites=("site-a",))
    with pytest.raises(ValueError, match="no scope"):
        dataclasses.replace(req, scope=None).to_query()
