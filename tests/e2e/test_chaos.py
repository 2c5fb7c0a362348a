"""A short crash-safety run in CI: 8 SIGKILLs of a subprocess daemon (hash embedder), then the full checks.

The long run (≥ 50 kills) is ``python bench/chaos.py``; this one keeps the
harness itself from rotting and catches a regression in the repair paths.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from memoryd.indexer.config import Config
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.search.query import Query
from tests.helpers import CountingEmbedder, make_config

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _chaos() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # chaos.py imports its sibling _common as a script does
    return importlib.import_module("chaos")


@pytest.mark.slow
def test_eight_kills_lose_nothing() -> None:
    res = _chaos().run_chaos(kills=8, seed=3, corpus=None, n_files=30, echo=False)
    assert res["kills"] == 8 and sum(res["ops"].values()) > 50
    assert res["chunk_mismatch"] == 0, "index differs from a clean rebuild"
    assert res["faiss_mismatch"] == 0 and res["status_vectors_vs_chunks"] == 0
    assert res["markers_missing"] == 0, "a file's latest text is not searchable"
    assert res["files_bad"] == [], "a user file was changed, truncated or lost"
    assert res["remember_lost"] == 0
    assert res["reembedded_on_restart"] == 0
    assert res["clean_exit"] == 0
    assert res["ok"]


class _DiesMidGroup:
    """Embeds in model-sized batches like the real provider, and 'is killed' after ``limit`` texts."""

    def __init__(self, inner: Any, limit: int, batch: int = 16) -> None:
        self.inner, self.limit, self.batch = inner, limit, batch
        self.model_id, self.dimension = inner.model_id, inner.dimension
        self.embedded = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return list(self.inner.count_tokens(texts))

    def embed_passages(self, texts: Sequence[str]) -> Any:
        parts = []
        for i in range(0, len(texts), self.batch):
            chunk = list(texts[i:i + self.batch])
            if self.embedded + len(chunk) > self.limit:
                raise _Killed(f"killed after {self.embedded} embedded texts")
            self.embedded += len(chunk)
            parts.append(self.inner.embed_passages(chunk))
        return np.vstack(parts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


class _Killed(Exception):
    pass


def test_model_work_done_before_a_kill_is_not_redone(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(80):
        (root / f"n{i:02d}.md").write_text("".join(f"- Note {i} line {j} about topic {i * 100 + j}.\n\n"
                                                   for j in range(12)))
    cfg = replace(make_config(root, tmp_path / "data"), chunking=replace(Config().chunking, max_tokens=40,
                                                                         overlap_tokens=0))
    items = [(root, f"n{i:02d}.md") for i in range(80)]
    dying = _DiesMidGroup(load_embedder(cfg.embedding, cfg.data_dir), limit=160)
    idx = open_index(cfg, dying)
    with pytest.raises(_Killed):
        idx.index_files(items)
    idx.close()
    counting = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    idx = open_index(cfg, counting)
    try:
        idx.index_files(items)
        total = idx.status().chunks
    finally:
        idx.close()
    assert total > 200, "the corpus must be larger than what was embedded before the kill"
    assert counting.embedded <= total - dying.embedded + 16, (
        f"re-embedded {counting.embedded} of {total} texts although {dying.embedded} were embedded before the kill")


_BACKLOG_CHILD = """
import sys, time
from pathlib import Path
from memoryd.daemon.logs import configure_logging
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from tests.helpers import make_config

configure_logging("warning", "json")  # stderr: stdout carries the progress lines
class Slow:  # a model that takes its time, so that the kill lands mid-backlog
    def __init__(self, inner):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
    def count_tokens(self, texts):
        return self.inner.count_tokens(texts)
    def embed_query(self, text):
        return self.inner.embed_query(text)
    def embed_passages(self, texts):
        time.sleep(0.05)
        return self.inner.embed_passages(texts)

root, data = Path(sys.argv[1]), Path(sys.argv[2])
cfg = make_config(root, data)
idx = open_index(cfg, Slow(load_embedder(cfg.embedding, cfg.data_dir)), background_rebuilds=True)
idx.index_files(sorted((root, p.name) for p in root.glob("*.md")), defer_at=0)
print("committed", len(idx.backlog), flush=True)
while idx.backlog:
    idx.fill_vectors(limit=32)
    print("done", idx.backlog.meter.total, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_sigkill_mid_backlog_keeps_keyword_search_and_embeds_only_the_rest(tmp_path: Path) -> None:
    """Keyword-first indexing killed with SIGKILL while vectors are being filled in: after a restart every
    file is keyword-searchable at once, finished vectors are kept, and only the rest goes to the model."""
    import os
    import signal
    import subprocess

    root = tmp_path / "root"
    root.mkdir()
    for i in range(40):
        (root / f"n{i:02d}.md").write_text(f"# Note {i}\n\n" + "".join(
            f"## Part {j}\n\nWord marker{i}x{j} about topic {i * 100 + j}.\n\n" for j in range(6)))
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([sys.executable, "-c", _BACKLOG_CHILD, str(root), str(tmp_path / "data")], cwd=repo,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        total = int(child.stdout.readline().split()[1])
        done = 0
        while done < 64:  # at least two steps finished, most of the backlog still to go
            line = child.stdout.readline()
            assert line, "the child ended before the kill"
            done = int(line.split()[1])
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
        child.stdout.close()
    assert total == 240 and done < total
    cfg = make_config(root, tmp_path / "data")
    counting = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    idx = open_index(cfg, counting, background_rebuilds=True)
    try:
        kept = idx.vectors.size
        assert kept >= done and len(idx.backlog) == total - kept and counting.embedded == 0
        for i in (0, 17, 39):  # searchable by keyword before any vector is filled in
            hit = idx.query(Query(f"marker{i}x5", k=1, mode="keyword")).to_json()["hits"][0]
            assert hit["path"] == f"n{i:02d}.md"
        while idx.backlog:
            idx.fill_vectors()
        assert counting.embedded == total - kept and idx.vectors.size == total
    finally:
        idx.close()
