"""A deterministic, dependency-light fake embedder for tests (provider "hash").

Tokens are lowercase word runs plus single CJK characters (Han, kana, Hangul),
so Chinese text gets useful overlap without a segmenter. Each token is hashed
with blake2b (stable across processes, unlike ``hash()``) into one of
``dimension`` buckets with a ±1 sign; the sum is L2-normalised. Texts sharing
tokens therefore score higher than unrelated ones, which is all that search
tests need. A text without tokens gets the vector of a fixed sentinel token,
so every vector has norm 1.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
_EMPTY = "\x00empty"


def hash_tokens(text: str) -> list[str]:
    """The tokens of ``text``: lowercase word runs and single CJK characters, in order."""
    return _TOKEN.findall(text.lower())


class HashEmbedder:
    """Implements :class:`memoryd.indexer.types.Embedder`; ``model_id`` is ``hash-<dimension>``."""

    def __init__(self, dimension: int = 64) -> None:
        if dimension < 2:
            raise ValueError(f"hash embedder dimension must be >= 2, got {dimension}")
        self.dimension = dimension
        self.model_id = f"hash-{dimension}"

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(hash_tokens(t)) for t in texts]

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._vector(text)
        return out

    def embed_query(self, text: str) -> FloatArray:
        return self._vector(text)

    def _vector(self, text: str) -> FloatArray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        for token in hash_tokens(text) or [_EMPTY]:
            h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            vec[h % self.dimension] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # signs cancelled out exactly; fall back to the sentinel
            return self._vector("")
        return vec / norm
