from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.indexer.search.query import Query
from memoryd.indexer.search.rerank import file_time, mmr_order, recency_factor

NOW = datetime(2026, 11, 25, tzinfo=UTC).timestamp()


def test_file_time_by_name_then_mtime_and_memory_md_never_ages() -> None:
    assert file_time("memory/2026-11-18.md", 0) == datetime(2026, 11, 18, tzinfo=UTC).timestamp()
    assert file_time("notes/todo.md", 5_000_000_000) == 5.0
    assert file_time("MEMORY.md", 5_000_000_000) is None
    assert file_time("memory/2026-13-45.md", 0) is None  # not a date: falls back to mtime (none)


def test_recency_halves_every_half_life() -> None:
    assert recency_factor("memory/2026-11-18.md", 0, 7.0, NOW) == pytest.approx(0.5)
    assert recency_factor("memory/2026-11-25.md", 0, 7.0, NOW) == pytest.approx(1.0)
    assert recency_factor("MEMORY.md", 1, 7.0, NOW) == 1.0
    assert recency_factor("memory/2020-01-01.md", 0, 0.0, NOW) == 1.0  # off


def test_mmr_prefers_a_different_second_hit() -> None:
    vecs = np.array([[1, 0], [0.999, 0.045], [0, 1]], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rel = [1.0, 0.95, 0.7]
    assert mmr_order(rel, lambda idx: vecs[list(idx)], 1.0, 3) == [0, 1, 2]  # λ = 1: relevance only
    assert mmr_order(rel, lambda idx: vecs[list(idx)], 0.5, 3)[:2] == [0, 2]  # near-duplicate pushed down


def test_recency_reorders_engine_results(tmp_path) -> None:
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.ingestion.reconcile import reconcile
    from tests.helpers import make_config

    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    day = datetime.now(UTC).date()
    recent, older = (day - timedelta(days=1)).isoformat(), (day - timedelta(days=5)).isoformat()
    (root / "memory" / "2020-01-01.md").write_text("- standup moved to ten\n")
    (root / "memory" / f"{recent}.md").write_text("- standup moved to nine\n")
    (root / "memory" / f"{older}.md").write_text("- lunch moved\n")
    cfg = make_config(root, tmp_path / "d")
    plain = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    reconcile(plain, [root], lambda rel: rel.endswith(".md"))
    plain.close()
    decayed_cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, recency_half_life_days=30.0))
    idx = open_index(decayed_cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        hits = idx.query(Query("standup moved to ten", k=3, mode="keyword")).to_json()["hits"]
        assert hits[0]["path"] == f"memory/{recent}.md"  # an old exact match decays below a recent one
    finally:
        idx.close()
