"""The daemon embeds each chunk's lines when it is idle (daemon/work/line_steps.py): after a start-up
sweep, after a save, and never ahead of a save."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import memoryd.indexer.embedding as embedding
from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.storage.embedded.backend import DB_NAME
from tests.helpers import make_config, wait_for

WAIT_S = 30.0


def _without_lines(data: Path) -> int:
    with sqlite3.connect(f"file:{data / DB_NAME}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM chunks c WHERE NOT EXISTS"
                                " (SELECT 1 FROM line_vectors l WHERE l.chunk_id = c.id)").fetchone()[0])


def _chunks(data: Path) -> int:
    with sqlite3.connect(f"file:{data / DB_NAME}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


class LineGate:
    """The test's embedder: batches of one-line texts (the line fill's) wait for ``open`` once ``hold`` is set."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id, self.dimension = inner.model_id, inner.dimension
        self.hold = threading.Event()
        self.blocked = threading.Event()  # a line batch is waiting in the model now
        self.opened = threading.Event()
        self.fail = False
        self.line_batches = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return list(self.inner.count_tokens(texts))

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        if all("\n" not in t for t in texts) and any(t.startswith("line-fill") for t in texts):
            self.line_batches += 1
            if self.fail:
                raise RuntimeError("the model failed on these lines")
            if self.hold.is_set():
                self.blocked.set()
                assert self.opened.wait(WAIT_S), "the test never opened the gate"
        return self.inner.embed_passages(texts)


@pytest.fixture
def fail_lines() -> bool:
    return False


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch,
           fail_lines: bool) -> Iterator[tuple[Daemon, Client, LineGate, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(6):
        body = "\n".join(f"line-fill {i}-{n}: the plan for part {n} of note {i}." for n in range(30))
        (root / f"n{i}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    real = embedding.load_embedder
    gates: list[LineGate] = []

    def gated(*args: Any, **kwargs: Any) -> LineGate:
        gates.append(LineGate(real(*args, **kwargs)))
        gates[-1].fail = fail_lines
        return gates[-1]

    monkeypatch.setattr(embedding, "load_embedder", gated)
    cfg = make_config(root, tmp_path / "data", debounce_ms=50, max_delay_ms=500)
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=short_dir / "lf.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=WAIT_S)
    try:
        yield d, client, gates[-1], root
    finally:
        gates[-1].opened.set()
        client.close()
        d.shutdown()


def test_an_idle_daemon_gives_every_chunk_its_line_vectors(daemon: Any, tmp_path: Path) -> None:
    _, client, gate, root = daemon
    data = tmp_path / "data"
    wait_for(lambda: _chunks(data) > 0 and _without_lines(data) == 0, WAIT_S, "every chunk's line vectors")
    assert gate.line_batches > 1  # in bounded steps
    hits = client.call("search", {"query": "the plan for part 7 of note 3", "k": 8, "explain": True})
    assert hits["hits"][0]["explain"]["best_line_cosine"] > 0
    assert hits["query_analysis"]["line_blend"] == "applied"  # every candidate has its lines: hits 4+ reordered
    (root / "n9.md").write_text("# Later\n\nline-fill 9-0: a note saved later.\n", encoding="utf-8")
    wait_for(lambda: client.call("search", {"query": "a note saved later", "k": 1, "mode": "keyword"})["hits"],
             WAIT_S, "the saved note indexed")
    wait_for(lambda: _without_lines(data) == 0, WAIT_S, "the saved note's line vectors")


def test_context_reads_the_filled_lines_instead_of_embedding_them(daemon: Any, tmp_path: Path) -> None:
    _, client, gate, _ = daemon
    data = tmp_path / "data"
    wait_for(lambda: _chunks(data) > 0 and _without_lines(data) == 0, WAIT_S, "every chunk's line vectors")
    batches = gate.line_batches
    block = client.call("context", {"query": "the plan for part 7 of note 3", "max_tokens": 120, "min_score": 0})
    assert any("lines" in src for src in block["sources"])  # an excerpt: its lines were ranked by the model
    assert gate.line_batches == batches  # ...with the rows the index filled, not a model call


def test_a_save_does_not_wait_behind_the_line_fill(daemon: Any, tmp_path: Path) -> None:
    _, client, gate, root = daemon
    data = tmp_path / "data"
    wait_for(lambda: _chunks(data) > 0 and _without_lines(data) == 0, WAIT_S, "the first fill")
    gate.hold.set()  # the next line batch waits in the model
    (root / "n0.md").write_text("# Note 0\n\n" + "\n".join(f"line-fill 0-{n}: changed {n}." for n in range(30))
                                + "\n", encoding="utf-8")
    assert gate.blocked.wait(WAIT_S), "no line batch reached the model"  # n0's 30 new lines: the bulk session
    (root / "n1.md").write_text("# Note 1\n\nsavedwhileheldqz is the word.\n", encoding="utf-8")
    wait_for(lambda: client.call("search", {"query": "savedwhileheldqz", "k": 1, "mode": "keyword"})["hits"],
             WAIT_S, "the save searchable while a line batch is held")
    gate.opened.set()
    wait_for(lambda: _without_lines(data) == 0, WAIT_S, "the fill finished after the gate opened")


@pytest.mark.parametrize("fail_lines", [True])
def test_a_failing_line_fill_pauses_and_the_daemon_goes_on(daemon: Any, tmp_path: Path) -> None:
    d, client, gate, root = daemon
    data = tmp_path / "data"
    wait_for(lambda: d.worker.line_steps.retry_in() > 0, WAIT_S, "a failed line step, paused")
    assert d.worker.alive and _without_lines(data) > 0
    assert "the model failed on these lines" in (d.worker.last_error or "")
    gate.fail = False
    (root / "n1.md").write_text("# Note 1\n\nline-fill 1-0: savedafterfailqz.\n", encoding="utf-8")
    wait_for(lambda: client.call("search", {"query": "savedafterfailqz", "k": 1, "mode": "keyword"})["hits"],
             WAIT_S, "a save indexed while the line fill is paused")
    wait_for(lambda: _without_lines(data) == 0, WAIT_S, "the fill resumed after the save")
