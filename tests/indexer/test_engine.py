"""The index end to end with the fast hash embedder: indexing, caching, repair, search."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded.backend import VECTORS_NAME
from tests.helpers import CountingEmbedder, make_config

FILTER = PathFilter(("*.md",), (".git/*",))


def dialogue(n: int, tag: str = "") -> str:
    topics = ["garden", "violin", "hiking trip", "new job", "painting class", "dog named Rex", "camping"]
    lines = [f"# 2023-05-0{1 + n % 9}", "", "## Session 1", ""]
    for i in range(n):
        who = "Caroline" if i % 2 else "Melanie"
        lines.append(f"- **{who}**: I talked about the {topics[i % len(topics)]} again {tag} number {i}.")
    return "\n".join(lines) + "\n"


@pytest.fixture
def env(tmp_path: Path):
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The user prefers Neovim over Vim.\n- Deploys happen on Fridays.\n")
    (root / "memory" / "2023-05-01.md").write_text(dialogue(60))
    cfg = make_config(root, tmp_path / "data")
    emb = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    idx = open_index(cfg, emb)
    yield root, cfg, emb, idx
    idx.close()


def test_index_then_search_finds_the_line(env) -> None:
    root, _cfg, emb, idx = env
    stats = reconcile(idx, [root], FILTER)
    assert stats.files_indexed == 2 and emb.embedded == stats.chunks_added > 2
    res = idx.query(Query("which editor does the user prefer", k=3)).to_json()
    top = res["hits"][0]
    assert top["path"] == "MEMORY.md" and top["start_line"] <= 3 <= top["end_line"]
    assert "Neovim" in top["text"] and top["root"] == str(root)
    for mode in ("keyword", "vector"):
        assert idx.query(Query("Neovim", k=2, mode=mode)).to_json()["hits"][0]["path"] == "MEMORY.md"


def test_unchanged_rerun_embeds_nothing_and_one_line_edit_few(env) -> None:
    root, _cfg, emb, idx = env
    reconcile(idx, [root], FILTER)
    first = emb.embedded
    again = reconcile(idx, [root], FILTER)
    assert emb.embedded == first and again.files_unchanged == 2 and again.files_indexed == 0
    f = root / "memory" / "2023-05-01.md"
    lines = f.read_text().split("\n")
    lines[5] += " (edited)"
    f.write_text("\n".join(lines))
    stats = reconcile(idx, [root], FILTER)
    assert stats.files_indexed == 1
    assert 1 <= emb.embedded - first <= 2
    assert stats.chunks_kept >= stats.chunks_added  # most windows kept their ids


def test_touch_without_change_reads_but_does_not_rechunk(env) -> None:
    root, _cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    f = root / "MEMORY.md"
    os.utime(f, ns=(1, 1))
    stats = reconcile(idx, [root], FILTER)
    assert stats.files_unchanged == 2 and stats.files_indexed == 0
    assert reconcile(idx, [root], FILTER).files_unchanged == 2  # the new mtime was recorded


def test_rename_and_delete(env) -> None:
    root, _cfg, emb, idx = env
    reconcile(idx, [root], FILTER)
    before = emb.embedded
    assert idx.move_file(root, "MEMORY.md", root, "notes/MEMORY.md")
    (root / "notes").mkdir()
    (root / "MEMORY.md").rename(root / "notes" / "MEMORY.md")
    stats = reconcile(idx, [root], FILTER)
    assert emb.embedded == before and stats.files_unchanged == 2
    assert idx.query(Query("Neovim", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "notes/MEMORY.md"
    # a rename the index did not see (delete + create) re-embeds nothing either: the cache has the texts
    (root / "notes" / "MEMORY.md").rename(root / "M2.md")
    stats = reconcile(idx, [root], FILTER)
    assert emb.embedded == before and stats.files_removed == 1 and stats.files_indexed == 1
    (root / "M2.md").unlink()
    reconcile(idx, [root], FILTER)
    assert idx.query(Query("Neovim", k=3, mode="keyword")).to_json()["hits"] == []
    st = idx.status()
    assert st.files == 1 and st.index.vectors == st.chunks


def test_vectors_rebuilt_from_cache_without_embedding(env, tmp_path: Path) -> None:
    root, cfg, emb, idx = env
    reconcile(idx, [root], FILTER)
    n = idx.vectors.size
    idx.close()
    for damage in (lambda p: p.unlink(), lambda p: p.write_bytes(b"\x00corrupt" * 10)):
        if (cfg.data_dir / VECTORS_NAME).exists():
            damage(cfg.data_dir / VECTORS_NAME)
        emb2 = CountingEmbedder(emb.inner)
        idx2 = open_index(cfg, emb2)
        assert idx2.vectors.size == n and emb2.embedded == 0
        assert idx2.query(Query("Neovim", k=1)).to_json()["hits"][0]["path"] == "MEMORY.md"
        idx2.close()
    emb3 = CountingEmbedder(emb.inner)
    idx3 = open_index(cfg, emb3)  # a stale snapshot (missing the newest file) is topped up from the cache
    (root / "new.md").write_text("A fresh note about kayaking.\n")
    reconcile(idx3, [root], FILTER)
    idx3.vectors.dirty = False  # simulate a crash before the snapshot was written
    idx3.backend.readers.close()
    idx3.store.close()
    idx4 = open_index(cfg, CountingEmbedder(emb.inner))
    assert idx4.vectors.size == n + 1 and idx4.query(Query("kayaking", k=1)).to_json()["hits"][0]["path"] == "new.md"
    idx4.close()
    idx.store._conn = None  # already closed above; keep the fixture's close() harmless


def test_model_change_drops_chunks_once(env) -> None:
    root, cfg, emb, idx = env
    reconcile(idx, [root], FILTER)
    idx.close()

    class Other(CountingEmbedder):
        pass

    other = Other(emb.inner)
    other.model_id = "another-model"
    idx2 = open_index(cfg, other)
    assert idx2.status().chunks == 0
    stats = reconcile(idx2, [root], FILTER)
    assert stats.files_indexed == 2 and other.embedded == stats.chunks_added
    idx2.close()
    idx.store._conn = None


def test_follow_symlinks_decides_whether_a_link_inside_the_root_is_indexed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "real.md").write_text("- The kayak is stored in the garage.\n")
    (root / "link.md").symlink_to(root / "real.md")
    for follow, linked in ((True, True), (False, False)):
        cfg = make_config(root, tmp_path / f"data-{follow}", follow_symlinks=follow)
        idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
        try:
            reconcile(idx, [root], FILTER)
            paths = {h["path"] for h in idx.query(Query("kayak", k=5, mode="keyword")).to_json()["hits"]}
            reasons = {s.path.rsplit("/", 1)[-1]: s.reason for s in idx.status().skipped}
        finally:
            idx.close()
        assert paths == ({"real.md", "link.md"} if linked else {"real.md"})
        assert ("link.md" in reasons) is not linked
        assert linked or reasons["link.md"].startswith("symlink")


def test_bad_files_are_skipped_with_reasons_and_do_not_stop_the_rest(env) -> None:
    root, cfg, _emb, idx = env
    (root / "bin.md").write_bytes(b"abc\x00def")
    (root / "latin1.md").write_bytes("caf\xe9 au lait notes".encode("latin-1"))
    (root / "empty.md").write_text("")
    (root / "crlf.md").write_bytes(b"# T\r\n\r\n- kiwi line one\r\n- mango line two\r\n")
    (root / "utf16.md").write_bytes("# Notes\n\nquokka sighting\n".encode("utf-16"))
    os.mkfifo(root / "fifo.md")
    outside = root.parent / "outside.md"
    outside.write_text("secret outside text\n")
    (root / "link.md").symlink_to(outside)
    (root / "loop.md").symlink_to(root / "loop.md")
    big = root / "big.md"
    big.write_text("x" * (cfg.watch.max_file_bytes + 1))
    stats = reconcile(idx, [root], FILTER)
    reasons = {s.path.rsplit("/", 1)[-1]: s.reason for s in idx.status().skipped}
    assert reasons["bin.md"].startswith("binary")
    assert reasons["big.md"].startswith("too-large")
    assert reasons["link.md"].startswith("symlink-outside-root")
    assert reasons["fifo.md"].startswith("not-a-regular-file")
    assert stats.files_indexed >= 5
    hit = idx.query(Query("mango", k=1, mode="keyword")).to_json()["hits"][0]
    assert hit["path"] == "crlf.md" and hit["start_line"] <= 4 == hit["end_line"] and "\r" not in hit["text"]
    assert idx.query(Query("quokka", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "utf16.md"
    assert idx.query(Query("lait", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "latin1.md"
    assert idx.query(Query("secret outside", k=3, mode="keyword")).to_json()["hits"] == []


@pytest.mark.parametrize("query", ['"unbalanced', "a AND", "NEAR(a b", "terms:x", "*", "(((", "\x00", "", "-"])
def test_nasty_queries_never_raise(env, query: str) -> None:
    root, _cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    for mode in ("hybrid", "keyword", "vector"):
        assert isinstance(idx.query(Query(query or " ", k=3, mode=mode)).to_json()["hits"], list)


def test_hybrid_scores_are_calibrated_and_explainable(env) -> None:
    root, _cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    res = idx.query(Query("violin Caroline", k=8, explain=True)).to_json()
    hits = res["hits"]
    assert hits and all(0.0 <= h["score"] <= 1.0 and 0.0 <= h["text_score"] <= 1.0 for h in hits)
    text_scores = {h["text_score"] for h in hits}
    assert len(text_scores) > 1  # keyword hits are not all 1.0 (the 1/(1+rank) trap)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    fused = [h["explain"]["fused"] for h in hits]  # the ranking's own value, min-max over the candidates
    assert fused[0] == pytest.approx(1.0) and all(0.0 <= f <= 1.0 for f in fused)


def test_path_prefix_filter(env) -> None:
    root, _cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    hits = idx.query(Query("garden", k=8, path_prefix="memory/")).to_json()["hits"]
    assert hits and all(h["path"].startswith("memory/") for h in hits)
    assert idx.query(Query("Neovim", k=8, path_prefix="memory/", mode="keyword")).to_json()["hits"] == []
    absolute = idx.query(Query("Neovim", k=8, path_prefix=str(root / "MEMORY"), mode="keyword")).to_json()["hits"]
    assert absolute and absolute[0]["path"] == "MEMORY.md"


def test_searches_run_while_indexing(env) -> None:
    root, _cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    errors: list[BaseException] = []
    stop = threading.Event()

    def searcher() -> None:
        while not stop.is_set():
            try:
                res = idx.query(Query("violin", k=5)).to_json()
                for h in res["hits"]:
                    assert h["text"]
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(15):
            (root / "memory" / f"2023-06-{i:02d}.md").write_text(dialogue(20, tag=f"t{i}"))
            reconcile(idx, [root], FILTER)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors
    assert idx.status().files == 17


def test_read_only_open_needs_an_index(tmp_path: Path) -> None:
    from memoryd.indexer.errors import StoreError

    cfg = make_config(tmp_path, tmp_path / "nodata")
    with pytest.raises(StoreError, match="memoryd index"):
        open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir), read_only=True)


def test_abstention_and_explain(env) -> None:
    root, cfg, _emb, idx = env
    reconcile(idx, [root], FILTER)
    res = idx.query(Query("xylophone quasar", k=3, min_score=0.5)).to_json()
    assert res["hits"] == [] and res["abstained"] and "no confident match" in res["reason"]
    kept = idx.query(Query("Neovim", k=3, min_score=0.5)).to_json()  # every query word matched: confident
    assert kept["hits"] and kept["hits"][0]["path"] == "MEMORY.md" and "abstained" not in kept
    ex = idx.query(Query("Neovim editor", k=2, explain=True)).to_json()["hits"][0]["explain"]
    assert ex["fusion"] == cfg.search.fusion and ex["keyword_rank"] == 1 and ex["bm25"] > 0
    assert ex["vector_rank"] >= 1 and -1.0 <= ex["cosine"] <= 1.0


def test_corrupt_database_is_kept_aside_and_rebuilt_from_the_files(env) -> None:
    root, cfg, emb, idx = env
    reconcile(idx, [root], FILTER)
    idx.close()
    db = cfg.data_dir / "index.sqlite3"
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # smash the header and the first page
    db.write_bytes(bytes(data))
    idx2 = open_index(cfg, emb)
    try:
        assert list(cfg.data_dir.glob("index.sqlite3.corrupt-*"))  # kept for inspection
        assert idx2.status().files == 0
        reconcile(idx2, [root], FILTER)
        assert idx2.query(Query("Neovim", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "MEMORY.md"
    finally:
        idx2.close()
    idx.store._conn = None
