"""The storage, search and reconcile behaviours every backend must share, run on both.

``backend`` is parametrised: ``embedded`` (SQLite + FAISS) and ``postgres`` (a real
PostgreSQL + pgvector from :mod:`tests.pgfixture`). Each test states a behaviour
through :class:`~memoryd.indexer.engine.MemoryIndex`'s public methods only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from tests.helpers import CountingEmbedder, make_config

FILTER = PathFilter(("*.md",), (".git/*",))
BACKENDS = ("embedded", "postgres")

CORPUS = {
    "MEMORY.md": "# Memory\n\n- The user prefers Neovim over Vim.\n- Deploys happen on Fridays.\n",
    "memory/2023-05-01.md": "# 2023-05-01\n\n## Food\n\nAlice likes sushi and ramen; Bob cooks pasta.\n\n"
                            "## Music\n\nCaroline plays the violin every evening.\n",
    "memory/zh.md": "# 笔记\n\n我们喜欢吃寿司。周五部署。\n\n## 音乐\n\n她每天晚上拉小提琴。\n",
    "team/decisions.md": "# Decisions\n\nWe chose PostgreSQL with pgvector for the shared memory.\n"
                         "The build server runs nightly at two.\n",
}


def storage_config(backend: str, root: Path, data_dir: Path, dsn: str | None, site: str = "") -> Any:
    cfg = make_config(root, data_dir)
    if backend == "postgres":
        assert dsn is not None
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(
            cfg.storage, backend="postgres", dsn=dsn, sslmode="disable", site=site))
    return cfg


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def env(backend: str, tmp_path: Path,
        request: pytest.FixtureRequest) -> Iterator[tuple[Path, CountingEmbedder, MemoryIndex]]:
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    root = tmp_path / "root"
    for rel, text in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = storage_config(backend, root, tmp_path / "data", dsn)
    emb = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    idx = open_index(cfg, emb)
    yield root, emb, idx
    idx.close()


def test_index_then_search_finds_the_line(env: Any) -> None:
    root, emb, idx = env
    stats = reconcile(idx, [root], FILTER)
    assert stats.files_indexed == len(CORPUS) and emb.embedded == stats.chunks_added > len(CORPUS)
    top = idx.query(Query("which editor does the user prefer", k=3)).to_json()["hits"][0]
    assert top["path"] == "MEMORY.md" and top["root"] == str(root) and "Neovim" in top["text"]
    for mode in ("keyword", "vector", "hybrid"):
        assert idx.query(Query("Neovim", k=2, mode=mode)).to_json()["hits"][0]["path"] == "MEMORY.md"
    assert idx.query(Query("寿司", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "memory/zh.md"
    assert idx.status().chunks == stats.chunks_added


def test_unchanged_rerun_embeds_nothing_and_an_edit_only_what_changed(env: Any) -> None:
    root, emb, idx = env
    reconcile(idx, [root], FILTER)
    first = emb.embedded
    again = reconcile(idx, [root], FILTER)
    assert emb.embedded == first and again.files_indexed == 0 and again.files_unchanged == len(CORPUS)
    f = root / "memory" / "2023-05-01.md"
    f.write_text(f.read_text().replace("violin", "cello"), encoding="utf-8")
    edit = reconcile(idx, [root], FILTER)
    assert edit.files_indexed == 1 and edit.chunks_kept >= 1 and emb.embedded - first == edit.chunks_added >= 1
    assert idx.query(Query("cello", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "memory/2023-05-01.md"
    assert idx.query(Query("violin", k=5, mode="keyword")).to_json()["hits"] == []


def test_deleted_and_moved_files_leave_no_stale_chunk(env: Any) -> None:
    root, emb, idx = env
    reconcile(idx, [root], FILTER)
    (root / "team" / "decisions.md").unlink()
    gone = reconcile(idx, [root], FILTER)
    assert gone.files_removed == 1 and gone.chunks_removed >= 1
    assert idx.query(Query("pgvector", k=5, mode="keyword")).to_json()["hits"] == []
    before = emb.embedded
    assert idx.move_file(root, "MEMORY.md", root, "archive/MEMORY.md")
    hit = idx.query(Query("Neovim", k=1, mode="keyword")).to_json()["hits"][0]
    assert hit["path"] == "archive/MEMORY.md" and emb.embedded == before
    files, chunks = idx.store.counts()
    assert files == len(CORPUS) - 1 and chunks == idx.status().chunks


def test_path_prefix_and_excluded_folders_filter_both_legs(env: Any) -> None:
    root, _emb, idx = env
    reconcile(idx, [root], FILTER)
    for mode in ("keyword", "vector", "hybrid"):
        hits = idx.query(Query("sushi pgvector Neovim", k=10, mode=mode, path_prefix="team/")).to_json()["hits"]
        assert hits and {h["path"] for h in hits} == {"team/decisions.md"}
        hits = idx.query(Query("sushi pgvector Neovim", k=10, mode=mode, exclude_prefixes=("team/",))).to_json()["hits"]
        assert hits and all(not h["path"].startswith("team/") for h in hits)


def test_a_second_open_reuses_the_cache(env: Any, backend: str, tmp_path: Path,
                                        request: pytest.FixtureRequest) -> None:
    root, emb, idx = env
    reconcile(idx, [root], FILTER)
    idx.close()
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    cfg = storage_config(backend, root, tmp_path / "data", dsn)
    again = CountingEmbedder(emb.inner)
    idx2 = open_index(cfg, again)
    try:
        stats = reconcile(idx2, [root], FILTER)
        assert stats.files_unchanged == len(CORPUS) and again.embedded == 0
        assert idx2.query(Query("Neovim", k=1)).to_json()["hits"][0]["path"] == "MEMORY.md"
    finally:
        idx2.close()  # the fixture closes the first index again: closing twice must be harmless
