"""With the real default model (multilingual-e5-small): the issue's two reproductions and the labelled set's targets."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.access import DEFAULT
from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.types import Embedder
from memoryd.indexer.write.dedup import Thresholds
from memoryd.indexer.write.history import History
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config, running_daemon

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the tuning is bench-only code
import dedup_tuning as cal

DATA = Path(__file__).parent / "data" / "dedup_pairs.jsonl"


@pytest.fixture(scope="module")
def e5(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return load_embedder(EmbeddingConfig(), tmp_path_factory.mktemp("e5"))


@pytest.fixture
def writer(tmp_path: Path, e5: Embedder) -> Iterator[tuple[MemoryWriter, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    cfg = dataclasses.replace(make_config(root, tmp_path / "data"), embedding=EmbeddingConfig())  # default thresholds
    index = open_index(cfg, e5)
    try:
        yield MemoryWriter(index, root, cfg.write, history=History.in_data_dir(cfg.data_dir)), root
    finally:
        index.close()


def _plan(text: str) -> Accepted:
    p = prepare(text, DEFAULT, date(2025, 3, 1))
    assert isinstance(p, Accepted), p
    return p


@pytest.mark.slow
@pytest.mark.parametrize(("first", "second"), [
    ("Always use tabs for indentation in Go files", "偏好使用 Vim 编辑器写代码"),
    ("We decided to use PostgreSQL for the billing service", "我们决定采用微服务架构来重构整个订单系统"),
])
def test_an_unrelated_memory_in_another_language_is_written_next_to_the_old_one(
        writer: tuple[MemoryWriter, Path], first: str, second: str) -> None:
    w, root = writer
    a = w.remember(_plan(first))
    b = w.remember(_plan(second))
    assert (a.decision, b.decision) == ("appended", "appended"), b
    text = "".join(p.read_text() for p in root.rglob("*.md"))
    assert first in text and second in text  # nothing replaced, nothing swallowed
    assert w.history is not None and list(w.history.records()) == []


@pytest.mark.slow
def test_the_labelled_set_meets_the_targets(e5: Embedder) -> None:
    pairs = cal.load_trust_pairs(DATA)
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, e5.embed_passages(texts), strict=True))
    cos = {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}
    th = Thresholds.from_config(WriteConfig())
    for lang in cal.TRUST_LANGS:
        m = cal.trust_matrix([p for p in pairs if p.lang == lang], cos, th)
        s = cal.trust_summary(m)
        assert s["unrelated_harmed"] == 0 and s["updates_lost"] == 0, cal.render_trust(m, lang)
        assert s["updates_caught"] >= 0.9, cal.render_trust(m, lang)
        assert lang == "cross" or s["paraphrases_reinforced"] >= 0.8, cal.render_trust(m, lang)
        assert m[("paraphrase", "append")] <= 3, cal.render_trust(m, lang)


@pytest.mark.slow
def test_the_calibration_set_loses_nothing_either(e5: Embedder) -> None:
    pairs = cal.as_trust(cal.load_pairs(Path(__file__).parent.parent / "data" / "calibration.jsonl"))
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, e5.embed_passages(texts), strict=True))
    cos = {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}
    m = cal.trust_matrix(pairs, cos, Thresholds.from_config(WriteConfig()))
    s = cal.trust_summary(m)
    assert s["unrelated_harmed"] == 0 and s["updates_lost"] == 0 and s["updates_caught"] >= 0.9, cal.render_trust(m, "")


@pytest.fixture
def e5_daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Client, Path]]:
    """An in-process daemon with the real model and the default write config, serving the socket."""
    sock = short_dir / "m.sock"
    with running_daemon(tmp_path, sock, {}, timeout=60, embedding=EmbeddingConfig()) as (_d, client, root):
        yield client, root


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_through_the_socket_nothing_is_lost_and_a_replace_can_be_undone(e5_daemon: tuple[Client, Path]) -> None:
    client, root = e5_daemon
    texts = ["Always use tabs for indentation in Go files", "偏好使用 Vim 编辑器写代码",
             "We decided to use PostgreSQL for the billing service", "我们决定采用微服务架构来重构整个订单系统"]
    decisions = [client.call("remember", {"content": t})["decision"] for t in texts]
    assert decisions == ["appended"] * 4
    assert client.call("history", {})["entries"] == []
    files = "".join(p.read_text() for p in root.rglob("*.md"))
    assert all(t in files for t in texts)
    client.call("remember", {"content": "We deploy the API to production every Tuesday."})
    rep = client.call("remember", {"content": "We deploy the API to production every Thursday."})
    assert rep["decision"] == "replaced" and rep["previous"] == "We deploy the API to production every Tuesday."
    [entry] = client.call("history", {"path": rep["path"]})["entries"]
    assert (entry["id"], entry["action"], entry["old"]) == (rep["history_id"], "replace", rep["previous"])
    assert client.call("undo", {"id": rep["history_id"]})["decision"] == "restored"
    text = (root / rep["path"]).read_text()
    assert "every Tuesday." in text and "every Thursday." not in text


# -- issue #28 item 2: route-scoped dedup and paraphrases, with the real model ------------------------


@pytest.mark.slow
def test_a_preference_never_replaces_a_journal_line_and_paraphrases_reinforce(
        writer: tuple[MemoryWriter, Path]) -> None:
    w, root = writer
    journal = root / "memory" / "2026-11-26.md"
    journal.parent.mkdir()
    journal.write_text("# 2026-11-26\n\n- The user prefers Vim as their editor.\n")
    w.index.index_files([(root, "memory/2026-11-26.md")])
    before = journal.read_bytes()
    out = w.remember(_plan("The user prefers Neovim as their editor."))
    assert (out.decision, out.path) == ("appended", "user/preferences.md")
    assert out.related is not None and (out.related["path"], out.related["line"]) == ("memory/2026-11-26.md", 3)
    assert journal.read_bytes() == before
    chain = ["The user prefers dark mode in every editor.", "The user likes dark mode in every editor.",
             "The user enjoys dark mode in every editor."]
    first, *rest = [w.remember(_plan(t)) for t in chain]
    assert first.decision == "appended"
    assert [(o.decision, o.path, o.line, o.reinforcement) for o in rest] == [
        ("reinforced", first.path, first.line, 1), ("reinforced", first.path, first.line, 2)]
    assert (root / first.path).read_text().count("dark mode") == 1


@pytest.mark.slow
def test_the_held_out_synonym_pairs_reinforce_and_harm_nothing(e5: Embedder) -> None:
    rows = {json.loads(x)["id"]: json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()}
    pairs = [p for p in cal.load_trust_pairs(DATA) if rows[p.id].get("split") == "heldout"]
    assert len([p for p in pairs if p.cls == "paraphrase"]) >= 20
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, e5.embed_passages(texts), strict=True))
    cos = {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}
    m = cal.trust_matrix(pairs, cos, Thresholds.from_config(WriteConfig()))
    s = cal.trust_summary(m)
    assert s["unrelated_harmed"] == 0 and s["updates_lost"] == 0, cal.render_trust(m, "held out")
    assert s["paraphrases_reinforced"] >= 0.9, cal.render_trust(m, "held out")
