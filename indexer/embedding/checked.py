"""Every vector an embedder gives is finite and of the index's width, or it is an error.

One NaN stored as a chunk's vector (or cached under its text) made every hybrid search fail
("Out of range float values") for good, through restarts, even after the server that sent it
was healthy again; a server that changed its width mid-run crashed an index task. So no
vector reaches the store, the caches or a search unchecked:

* :func:`check_vectors` is the check (count, width, finite), raising :class:`BadVectors` with
  what was wrong ("NaN in vector 3", "width 512, expected 384") and where it came from;
* :class:`CheckedEmbedder` applies it to every answer of the embedder it wraps, and
  :func:`memoryd.indexer.embedding.registry.load_embedder` wraps every provider it loads: that
  is the one place every embedder's output passes on its way to the index;
* :func:`finite_rows` is the guard on the way back (the embedding caches' reads): a row an older
  memoryd stored poisoned reads as a miss, so it is embedded again and the index heals.

:class:`BadVectors` is a :class:`~memoryd.indexer.errors.ProviderUnavailable`: it is handled as
a failed embedding everywhere — the chunk is committed keyword first and its vector retried by
the backlog, a search answers from its keyword leg and says so in ``degraded``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryd.indexer.errors import ProviderUnavailable

if TYPE_CHECKING:
    from memoryd.indexer.types import Embedder, FloatArray


class BadVectors(ProviderUnavailable):
    """An embedder answered vectors that cannot be stored (not finite, wrong width or count); the
    message names the source (server URL or model) and what was wrong."""


def check_vectors(mat: Any, n: int, width: int, source: str) -> FloatArray:
    """``mat`` as an ``(n, width)`` float32 matrix of finite values; :class:`BadVectors` otherwise.

    ``width`` 0 accepts any width (a server's first answer, before its width is known). Values
    past float32's range (1e39) become inf in the conversion, so they are caught as inf.
    """
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(mat, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BadVectors(f"{source}: not a matrix of numbers ({type(exc).__name__})") from None
    if out.ndim != 2 or out.shape[0] != n:
        got = out.shape[0] if out.ndim else 0
        raise BadVectors(f"{source}: {got} vectors for {n} texts" if out.ndim == 2 else
                         f"{source}: answer of shape {out.shape}, expected ({n}, {width or 'd'})")
    if out.shape[1] == 0 or (width and out.shape[1] != width):
        raise BadVectors(f"{source}: width {out.shape[1]}, expected {width or 'at least 1'}")
    bad = ~np.isfinite(out)
    if bad.any():
        row, col = (int(x) for x in np.argwhere(bad)[0])
        what = "NaN" if np.isnan(out[row, col]) else "a value past float32 (inf)"
        raise BadVectors(f"{source}: {what} in vector {row} (of {n}), component {col}")
    return out


def finite_rows(found: Mapping[bytes, FloatArray], width: int) -> dict[bytes, FloatArray]:
    """The entries of ``found`` that are finite vectors of ``width`` (a cache read: the rest are misses)."""
    return {k: v for k, v in found.items() if v.shape == (width,) and bool(np.isfinite(v).all())}


class CheckedEmbedder:
    """An :class:`~memoryd.indexer.types.Embedder` whose answers are all checked (:func:`check_vectors`).

    Everything else (``health``, ``close``, ``query_precision``, …) is the inner embedder's, read
    through; ``with_own_session``'s twin is checked too. ``inner`` is the wrapped embedder."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.source = str(getattr(inner, "source_name", f"embedder {inner.model_id}"))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return check_vectors(self.inner.embed_passages(texts), len(texts), self.dimension, self.source)

    def embed_query(self, text: str) -> FloatArray:
        row = np.asarray(self.inner.embed_query(text))
        checked: FloatArray = check_vectors(row.reshape(1, -1) if row.ndim == 1 else row, 1, self.dimension,
                                            self.source)[0]
        return checked

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # before __init__ set it (copy, pickle): no recursion
            raise AttributeError(name)
        value = getattr(self.inner, name)
        if name == "with_own_session" and callable(value):
            return _checked_factory(value)
        return value

    def __repr__(self) -> str:
        return f"CheckedEmbedder({self.inner!r})"


def _checked_factory(factory: Callable[[], Embedder]) -> Callable[[], CheckedEmbedder]:
    return lambda: CheckedEmbedder(factory())


def checked(embedder: Embedder) -> Embedder:
    """``embedder`` with every answer checked (itself when it already is)."""
    return embedder if isinstance(embedder, CheckedEmbedder) else CheckedEmbedder(embedder)
