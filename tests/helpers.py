"""Test helpers: a counting embedder wrapper and a config for throw-away indexes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from indexer.config import Config, EmbeddingConfig, WatchConfig, with_overrides


class CountingEmbedder:
    """Wraps an embedder and counts the passages it embeds (to prove cache hits)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.embedded = 0
        self.calls = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        self.embedded += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def make_config(root: Path | list[Path], data_dir: Path, **watch: Any) -> Config:
    roots = root if isinstance(root, list) else [root]
    cfg = with_overrides(Config(), roots=roots, data_dir=data_dir)
    return dataclasses.replace(
        cfg,
        embedding=EmbeddingConfig(provider="hash"),
        watch=dataclasses.replace(cfg.watch, **watch) if watch else cfg.watch,
    )


__all__ = ["CountingEmbedder", "WatchConfig", "make_config"]
