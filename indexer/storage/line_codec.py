"""How a chunk's line vectors are stored: which lines, the row's bytes, and the cosines read from it.

Shared by the fill (:mod:`memoryd.indexer.fill.line_vectors`), each backend's rows
(:mod:`memoryd.indexer.storage.embedded.store_lines`, :mod:`memoryd.indexer.storage.postgres.line_rows`) and their
readers; it depends on nothing but numpy, so any of them may import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def chunk_lines(text: str) -> list[str]:
    """The lines of a chunk that get a vector: the non-blank ones, as the context excerpts score them."""
    return [line for line in text.split("\n") if line.strip()]


def encode(vectors: Any) -> bytes:
    """A chunk's line vectors as stored: float16 rows (half the bytes; cosines move by < 1e-3)."""
    return np.ascontiguousarray(vectors, dtype=np.float16).tobytes()


def decode_lines(text: str, blob: bytes, dimension: int) -> dict[str, Any]:
    """A chunk's stored row as ``line text -> float32 vector`` (the context excerpts look lines up by
    text); {} for a row of another width or line count (another model, a torn row)."""
    lines = chunk_lines(text)
    m = np.frombuffer(blob, dtype=np.float16)
    if not lines or m.size != len(lines) * dimension:
        return {}
    vectors = m.reshape(len(lines), dimension).astype(np.float32)
    return {line: vectors[i] for i, line in enumerate(lines)}


def best_cosines(rows: Sequence[tuple[int, bytes]], qvec: Any) -> dict[int, float]:
    """Each chunk's best line cosine with the unit ``qvec`` (rows: chunk id, stored blob)."""
    q = np.asarray(qvec, dtype=np.float32).ravel()
    out: dict[int, float] = {}
    for chunk_id, blob in rows:
        m = np.frombuffer(blob, dtype=np.float16)
        if m.size % q.size:
            continue  # another model's width: as if not filled
        out[int(chunk_id)] = -1.0 if m.size == 0 else float((m.reshape(-1, q.size).astype(np.float32) @ q).max())
    return out


PendingChunk = tuple[int, str, str]  # a chunk without line vectors: id, sha256 of its text, its text
LineRow = tuple[int, str, bytes]  # what a fill writes: chunk id, the sha256 it was read with, encoded vectors



