"""Entry markers (importance, reinforcement) and the optional ranking prior built on them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memoryd.indexer.ingestion.embedtext import embedding_text, keyword_text
from memoryd.indexer.markdown.entrymeta import EntryMeta, split, strip, summarize
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.prior import apply_prior, prior
from memoryd.indexer.search.query import Query


def test_marker_round_trip_keeps_unknown_pairs_and_clamps_importance() -> None:
    text, meta = split("Prefers Vim <!-- memoryd: importance=9 reinforced=2 by=me -->")
    assert text == "Prefers Vim" and meta == EntryMeta(5, 2, (("by", "me"),))
    assert meta.render() == " <!-- memoryd: importance=5 reinforced=2 by=me -->"
    assert split("Prefers Vim <!-- a comment -->") == ("Prefers Vim <!-- a comment -->", None)
    assert split("x <!-- memoryd: importance=3 --> trailing") == ("x <!-- memoryd: importance=3 --> trailing", None)
    assert EntryMeta().render() == ""


def test_markers_are_invisible_to_the_model_and_the_keyword_index() -> None:
    marked = "## Prefs\n- **Vim** is the editor <!-- memoryd: importance=4 reinforced=3 -->\n- Tabs"
    plain = "## Prefs\n- **Vim** is the editor\n- Tabs"
    assert embedding_text("", marked) == embedding_text("", plain)
    assert keyword_text("h", marked) == keyword_text("h", plain)
    assert strip(plain) is plain


def test_summary_takes_the_strongest_entry() -> None:
    text = "- a <!-- memoryd: importance=2 reinforced=4 -->\n- b <!-- memoryd: importance=5 -->\n- c"
    assert summarize(text) == EntryMeta(5, 4)
    assert summarize("- user wrote this") is None
    assert summarize("- x <!-- memoryd: reinforced=1 -->") == EntryMeta(None, 1)


def test_prior_parts_and_range() -> None:
    assert prior("- plain", 0.0) == pytest.approx((0.5 + 0 + 1) / 3)
    assert prior("- x <!-- memoryd: importance=5 reinforced=1 -->", 0.0) == pytest.approx((1 + 0.5 + 1) / 3)
    assert prior("- x <!-- memoryd: importance=1 -->", 30.0) == pytest.approx((0 + 0 + 0.5) / 3)


def hit(cid: int, path: str, text: str, score: float) -> Hit:
    return Hit(cid, "/r", path, 1, 1, "", text, score, score, 0.0)


def test_apply_prior_reorders_only_with_a_weight() -> None:
    hits = [hit(1, "memory/2025-01-01.md", "- old fact", 0.9),
            hit(2, "memory/2025-06-01.md", "- new fact <!-- memoryd: importance=5 reinforced=3 -->", 0.85)]
    assert apply_prior(hits, {}, 0.0) == hits
    out = apply_prior(hits, {}, 0.2)
    assert [h.chunk_id for h in out] == [2, 1] and out[0].score > 0.85
    assert hits[1].to_dict()["importance"] == 5 and hits[1].to_dict()["reinforcements"] == 3
    assert "importance" not in hits[0].to_dict()


def test_prior_weight_reorders_engine_results(tmp_path: Path) -> None:
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.ingestion.reconcile import reconcile
    from tests.helpers import make_config

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("- the deploy runs on fridays\n")
    (root / "b.md").write_text("- the deploy runs on fridays too <!-- memoryd: importance=5 reinforced=4 -->\n")
    cfg = make_config(root, tmp_path / "d")
    for weight, first in ((0.0, "a.md"), (0.5, "b.md")):
        wcfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, prior_weight=weight))
        idx = open_index(wcfg, load_embedder(cfg.embedding, cfg.data_dir))
        try:
            reconcile(idx, [root], lambda rel: rel.endswith(".md"))
            hits = idx.query(Query("deploy runs on fridays", k=2, mode="keyword")).to_json()["hits"]
            assert hits[0]["path"] == first, (weight, hits)
            assert hits[[h["path"] for h in hits].index("b.md")]["reinforcements"] == 4
        finally:
            idx.close()
