"""Polite embedding: bulk passage batches run on a low-priority thread with their own session; the rest inline."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryd.daemon.work.polite import PoliteEmbedder, lower_priority
from memoryd.indexer.errors import ModelError


def nice_now() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


class Recorder:
    """A fake embedder that records on which thread, at which nice value, each call ran."""

    def __init__(self, twin_error: bool = False, name: str = "main") -> None:
        self.model_id, self.dimension, self.name = "fake", 4, name
        self.calls: list[tuple[str, int, int, int]] = []  # (embedder, thread id, nice, texts)
        self.twins: list[tuple[int, int]] = []  # (thread id, nice) where each twin was created
        self._twin_error = twin_error

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed_query(self, text: str) -> Any:
        self.calls.append((self.name, threading.get_native_id(), nice_now(), 1))
        return np.ones(4, dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        if any(t == "boom" for t in texts):
            raise ModelError("embedding model fake failed: boom")
        self.calls.append((self.name, threading.get_native_id(), nice_now(), len(texts)))
        return np.ones((len(texts), 4), dtype=np.float32)

    def with_own_session(self) -> Recorder:
        if self._twin_error:
            raise ModelError("cannot load ONNX model fake.onnx: no")
        twin = Recorder(name="twin")
        twin.calls = self.calls
        self.twins.append((threading.get_native_id(), nice_now()))
        return twin


def test_bulk_goes_to_a_niced_thread_with_its_own_session_small_calls_stay_inline() -> None:
    inner = Recorder()
    polite = PoliteEmbedder(inner, nice=3, small=4)
    me, base = threading.get_native_id(), nice_now()
    polite.start()
    try:
        assert polite.embed_passages(["a"] * 4).shape == (4, 4)  # one batch or less: inline
        assert polite.embed_passages(["b"] * 9).shape == (9, 4)  # bulk
        assert polite.embed_passages(["c"] * 5).shape == (5, 4)
        polite.embed_query("q")
    finally:
        assert polite.stop()
    small, bulk1, bulk2, query = inner.calls
    assert small[:2] == ("main", me) and query[:2] == ("main", me) and small[2] == base
    assert bulk1[0] == bulk2[0] == "twin" and bulk1[1] == bulk2[1] != me
    assert bulk1[2] == min(19, base + 3)
    assert inner.twins == [(bulk1[1], bulk1[2])]  # created once, on the niced thread (ORT pools inherit)
    assert polite.bulk_batches == 2 and nice_now() == base  # the caller's priority is untouched
    polite.embed_passages(["d"] * 9)  # after stop: inline
    assert inner.calls[-1][:2] == ("main", me)


def test_bulk_errors_reach_the_caller_and_a_failed_twin_falls_back() -> None:
    inner = Recorder(twin_error=True)
    polite = PoliteEmbedder(inner, nice=2, small=1)
    polite.start()
    try:
        with pytest.raises(ModelError, match="boom"):
            polite.embed_passages(["x", "boom"])
        polite.embed_passages(["y", "z"])
    finally:
        assert polite.stop()
    assert inner.calls[-1][0] == "main" and inner.calls[-1][1] != threading.get_native_id()


def test_nice_zero_is_a_pass_through() -> None:
    inner = Recorder()
    polite = PoliteEmbedder(inner, nice=0)
    polite.start()
    polite.embed_passages(["a"] * 40)
    assert polite.stop() and inner.calls[0][1] == threading.get_native_id() and not inner.twins
    assert lower_priority(0, "test") is False


@pytest.mark.slow
def test_onnxruntime_pool_threads_of_the_bulk_session_inherit_the_low_priority(tmp_path: Path) -> None:
    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding import load_embedder

    emb = load_embedder(EmbeddingConfig(provider="minilm", threads=2, batch_size=4), tmp_path)
    base = nice_now()
    before = _thread_nices()
    polite = PoliteEmbedder(emb, nice=4, small=4)
    polite.start()
    try:
        texts = [f"passage number {i} about the garden" for i in range(8)]
        bulk = polite.embed_passages(texts)
        new = {tid: n for tid, n in _thread_nices().items() if tid not in before}
        # the bulk thread and the second session's intra-op pool thread, both niced
        assert sorted(new.values()).count(min(19, base + 4)) >= 2, new
        assert np.allclose(bulk, emb.embed_passages(texts), atol=1e-5)  # same vectors as the query session's
    finally:
        assert polite.stop()


def _thread_nices() -> dict[int, int]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as fh:
            out[int(tid)] = int(fh.read().rsplit(")", 1)[1].split()[16])
    return out
