"""One embedding cache per machine (indexer/storage/embedded/cache.py, MachineCache): shared by data dirs, safe with
concurrent writers, LRU-bounded; ``memoryd index --data-dir`` of a folder embedded elsewhere asks the
model nothing."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.daemon import oneshot
from memoryd.indexer.config import Config, EmbeddingConfig
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.storage.embedded import cache as cache_mod
from memoryd.indexer.storage.embedded.cache import MachineCache, cache_key, open_machine_cache
from tests.helpers import CountingEmbedder, make_config

WRITERS, PER_WRITER, BATCH = 2, 1500, 25


def _vec(i: int, dim: int = 8) -> np.ndarray:
    return np.full(dim, float(i), dtype=np.float32)


def _config(root: Path, data: Path, cache_dir: Path, **embedding: Any) -> Config:
    """A real provider's config (the machine cache is never used for "hash"), cache in ``cache_dir``."""
    cfg = make_config(root, data)
    return dataclasses.replace(cfg, embedding=EmbeddingConfig(provider="e5-small", cache_dir=cache_dir, **embedding))


def _notes(root: Path) -> None:
    root.mkdir(parents=True)
    for i in range(6):
        (root / f"note{i}.md").write_text(f"# Note {i}\n\nThe user met friend number {i} at the station.\n"
                                          f"They talked about trip {i * 7} and the weather.\n", encoding="utf-8")


def test_index_of_a_folder_embedded_under_another_data_dir_asks_the_model_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``memoryd index`` (run_index, the CLI's code) twice, two data dirs, one machine cache."""
    root, cache_dir = tmp_path / "notes", tmp_path / "xdg-cache" / "memoryd" / "embeddings"
    _notes(root)
    embedders: list[CountingEmbedder] = []

    def load(cfg: EmbeddingConfig, model_dir: Path, api_key: str = "") -> CountingEmbedder:
        embedders.append(CountingEmbedder(HashEmbedder()))
        return embedders[-1]

    monkeypatch.setattr("memoryd.indexer.embedding.load_embedder", load)
    for data in ("data-a", "data-b"):
        assert oneshot.run_index(_config(root, tmp_path / data, cache_dir)) == 0
    first, second = embedders
    assert first.embedded >= 6 and first.calls >= 1
    # the chunks come from the machine cache; their lines are each data dir's own (never written to a
    # cache: ~8 a chunk would crowd the chunks out of it), so the second run embeds those again
    lines = sum(len([x for x in text.split("\n") if x.strip()]) for text in _chunk_texts(tmp_path / "data-b"))
    assert lines > 0 and second.embedded == lines
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all(line.startswith("index: 6 files") for line in out), out
    with _open(_config(root, tmp_path / "data-b", cache_dir)) as index:
        assert index.vectors.size == index.store.counts()[1] > 0  # every chunk has its vector
        assert index.status().cache.machine == str(cache_dir / cache_mod.MACHINE_DB)


def _chunk_texts(data: Path) -> list[str]:
    with sqlite3.connect(f"file:{data / 'index.sqlite3'}?mode=ro", uri=True) as conn:
        return [str(t) for (t,) in conn.execute("SELECT text FROM chunks")]


class _open:
    """MemoryIndex as a context manager (closed on exit)."""

    def __init__(self, cfg: Config) -> None:
        self.index = open_index(cfg, HashEmbedder())

    def __enter__(self) -> MemoryIndex:
        return self.index

    def __exit__(self, *exc: object) -> None:
        self.index.close()


def test_an_older_data_dirs_own_cache_is_shared_on_open(tmp_path: Path) -> None:
    """Vectors a data dir embedded before the machine cache existed are copied in once, on open."""
    root = tmp_path / "notes"
    _notes(root)
    old = CountingEmbedder(HashEmbedder())
    cfg_old = _config(root, tmp_path / "old", tmp_path / "c", machine_cache_entries=0)  # no machine cache then
    index = open_index(cfg_old, old)
    index.index_files([(root, p.name) for p in sorted(root.glob("*.md"))])
    index.close()
    assert old.embedded >= 6
    cfg = _config(root, tmp_path / "old", tmp_path / "c")
    open_index(cfg, HashEmbedder()).close()  # the upgrade: opened once with the machine cache on
    fresh = CountingEmbedder(HashEmbedder())
    index = open_index(_config(root, tmp_path / "new", tmp_path / "c"), fresh)
    try:
        stats = index.index_files([(root, p.name) for p in sorted(root.glob("*.md"))])
    finally:
        index.close()
    assert fresh.embedded == 0 and stats.cache_hits >= 6


def test_the_hash_provider_and_read_only_indexes_never_open_it(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    _notes(root)
    cfg = make_config(root, tmp_path / "d")
    cfg = dataclasses.replace(cfg, embedding=dataclasses.replace(cfg.embedding, cache_dir=tmp_path / "c"))
    index = open_index(cfg, HashEmbedder())
    try:
        assert index.cache.machine is None
    finally:
        index.close()
    assert not (tmp_path / "c").exists()


def test_keys_differ_by_model_id_so_a_precision_switch_re_embeds() -> None:
    assert cache_key("e5:abc", "x") != cache_key("e5:abc/passages=int8-1", "x")


def test_lru_bound_kept(tmp_path: Path) -> None:
    machine = MachineCache(tmp_path, capacity=100)
    for i in range(100):
        machine.put_many({cache_key("m", f"t{i}"): _vec(i)})
    machine.put_many({cache_key("m", "t0"): _vec(0)})  # used again: now the most recent
    machine.put_many({cache_key("m", f"t{i}"): _vec(i) for i in range(100, 110)})  # the tenth: eviction due
    assert machine.entries() == 90
    kept = machine.get_many([cache_key("m", f"t{i}") for i in range(110)], 8)
    assert cache_key("m", "t0") in kept and cache_key("m", "t1") not in kept
    assert all(cache_key("m", f"t{i}") in kept for i in range(100, 110))
    np.testing.assert_array_equal(kept[cache_key("m", "t105")], _vec(105))
    machine.close()


def _writer(directory: str, worker: int, start: Any) -> None:
    machine = MachineCache(Path(directory), capacity=1_000_000)
    start.wait(30)
    for b in range(0, PER_WRITER, BATCH):
        ok = machine.put_many({cache_key("m", f"w{worker}-{i}"): _vec(i) for i in range(b, b + BATCH)})
        if not ok:
            raise SystemExit(3)
    machine.close()


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    machine = MachineCache(tmp_path, capacity=1_000_000)
    assert machine.entries() == WRITERS * PER_WRITER
    got = machine.get_many([cache_key("m", f"w1-{PER_WRITER - 1}")], 8)
    np.testing.assert_array_equal(next(iter(got.values())), _vec(PER_WRITER - 1))
    assert sqlite3.connect(machine.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    machine.close()


def test_a_locked_file_is_a_miss_and_a_skipped_write_not_an_error(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_mod, "BUSY_TIMEOUT_MS", 50)
    machine = MachineCache(tmp_path, capacity=1000)
    holder = sqlite3.connect(machine.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert machine.put_many({cache_key("m", "x"): _vec(1)}) is False
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert machine.put_many({cache_key("m", "x"): _vec(1)}) is True
    machine.close()


def test_cache_dir_defaults_to_xdg_and_zero_turns_it_off(tmp_path: Path) -> None:
    cfg = dataclasses.replace(Config(), cache_home=tmp_path / "xdg")
    assert cfg.embedding_cache_dir == tmp_path / "xdg" / "memoryd" / "embeddings"
    assert open_machine_cache(tmp_path / "off", 0) is None and not (tmp_path / "off").exists()
