"""With the real default model (multilingual-e5-small): the calibrated thresholds and the writer's decisions."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from memoryd.indexer.access import DEFAULT
from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.types import Embedder
from memoryd.indexer.write.dedup import Thresholds
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the tuning is bench-only code
import dedup_tuning as cal

DATA = Path(__file__).parents[1] / "data" / "calibration.jsonl"


@pytest.fixture(scope="module")
def e5(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return load_embedder(EmbeddingConfig(), tmp_path_factory.mktemp("e5"))


@pytest.mark.slow
def test_default_thresholds_on_the_held_out_pairs(e5: Embedder) -> None:
    pairs = [p for p in cal.load_pairs(DATA) if p.split == "heldout"]
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, e5.embed_passages(texts), strict=True))
    cos = {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}
    th = Thresholds.from_config(WriteConfig())
    m = cal.confusion(pairs, cos, th)
    assert m[("unrelated", "reinforce")] + m[("unrelated", "replace")] == 0
    assert m[("related_other_fact", "reinforce")] + m[("related_other_fact", "replace")] == 0
    assert m[("conflicting_update", "reinforce")] == 0  # an update is never silently dropped
    same = cal.confusion([p for p in pairs if p.kind != "cross"], cos, th)
    # A replace needs evidence of the same subject and slot (indexer/write/slots.py, issue #37): an update
    # the check cannot confirm is appended beside the old entry (named in `related`), so accuracy against
    # "replace every update" fell from 0.93 to 0.85 on this half — the price of never replacing a sibling.
    assert cal.accuracy(same) >= 0.83, cal.render(same, "heldout, same-language pairs")
    assert m[("conflicting_update", "replace")] >= 5, cal.render(same, "heldout, same-language pairs")
    cross = [p for p in pairs if p.kind == "cross"]  # across languages: always appended, never merged
    assert {cal.predict(p, cos[p.id], th) for p in cross} == {"append"}


@pytest.fixture
def writer(tmp_path: Path, e5: Embedder) -> Iterator[tuple[MemoryWriter, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, embedding=EmbeddingConfig())  # default thresholds, real model
    index = open_index(cfg, e5)
    try:
        yield MemoryWriter(index, root, cfg.write), root
    finally:
        index.close()


def _plan(text: str) -> Accepted:
    p = prepare(text, DEFAULT, date(2025, 3, 1))
    assert isinstance(p, Accepted)
    return p


@pytest.mark.slow
def test_real_model_reinforces_replaces_and_appends(writer: tuple[MemoryWriter, Path]) -> None:
    w, root = writer
    steps = [
        ("The user prefers Vim as their editor.", "appended"),
        ("The user prefers Vim as their editor", "reinforced"),
        ("The user prefers Neovim as their editor.", "replaced"),
        ("The user prefers dark mode in every editor.", "appended"),
        ("用户偏好使用深色模式。", "appended"),  # a looser translation of the last: cosine 0.81 < 0.83 (cross)
        ("用户喜欢暗色主题的界面。", "appended"),  # a paraphrase (0.945) sharing only 用户: not confirmed
        ("用户的猫叫味噌，是一只橘猫。", "appended"),
        ("We decided to deploy on Tuesdays.", "appended"),
        ("We decided to deploy on Thursdays from now on.", "replaced"),
        ("团队决定采用 Redis 存储会话数据。", "appended"),
        ("Redis was chosen by the team to hold session data.", "appended"),  # cross-lingual: kept, flagged
    ]
    assert [w.remember(_plan(text)).decision for text, _ in steps] == [d for _, d in steps]
    text = (root / "user" / "preferences.md").read_text()
    assert "Neovim" in text and "prefers Vim" not in text
