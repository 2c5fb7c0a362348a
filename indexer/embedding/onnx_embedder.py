"""A generic ONNX + ``tokenizer.json`` embedder (the default e5 model, MiniLM, or a user's file).

The graph's inputs are read from the model: ``input_ids`` and
``attention_mask`` are required, ``token_type_ids`` (zeros) and
``position_ids`` (0..seq-1) are fed when present. The first output of rank 3
([batch, seq, hidden]) is pooled here (mean over the attention mask, or the
first token for "cls"); a rank-2 output is taken as already pooled. Vectors
are L2-normalised float32.

Texts are embedded in batches grouped by token length (sorted, batched, then
put back in the caller's order), which cuts padding; results do not depend on
how texts are grouped. A batch holds at most ``batch_size`` texts and about
:data:`BATCH_TOKENS` tokens (padded width x rows): measured on 2 cores (docs/scaling.md,
"Embedding speed"), a 300-token chunk runs 1.45x faster alone than in a batch of 16 (no
padding, activations that stay in cache), while 20-token lines still gain from
batches of 16. An instance holds no mutable state after construction
and may be shared between threads.

:meth:`OnnxEmbedder.with_own_session` makes a twin on a new session. Why:
onnxruntime creates a session's intra-op pool threads with the session, and on
Linux a thread inherits the CPU priority (nice value) of the thread that
creates it — so a session created by a low-priority thread computes at low
priority, while the original one keeps serving queries at normal priority and
never shares its thread pool with bulk passage batches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from memoryd.indexer.embedding.tokenization import TokenizerAdapter
from memoryd.indexer.errors import ModelError

if TYPE_CHECKING:
    FloatArray = npt.NDArray[np.float32]

_INT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")
#: Tokens per model run (rows x padded width) that a batch grows to at most (a longer text runs alone).
#: Measured per CPU-second on e5-small int8: 20-token texts best at 16 a run, 80-160-token texts at 4,
#: 300-token texts alone (docs/scaling.md, "Embedding speed").
BATCH_TOKENS = 512


def make_session(model: Path, threads: int, shared: Mapping[str, ort.OrtValue] | None = None) -> ort.InferenceSession:
    """A CPU session: ``threads`` intra-op threads (0 = all cores), one inter-op thread, sequential.

    ``shared`` initializers replace the model's own by name, without a copy (the caller keeps them
    alive as long as the session: see :mod:`memoryd.indexer.embedding.word_table`). Raises
    :class:`ModelError` naming the file when it cannot be loaded.
    """
    opts = ort.SessionOptions()
    for name, value in (shared or {}).items():
        opts.add_initializer(name, value)
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Pool threads spin between the ~100 small operators of one run (waking a blocked thread per
    # operator cost a query ~3 ms: 11.7 -> 8.6 ms p50 on 2 cores), but stop spinning as soon as the
    # run returns: without force_spinning_stop they spin on for ~40 ms of CPU after every query,
    # stealing a core from a daemon that mostly waits. CPU per query is unchanged (~17 ms).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    opts.log_severity_level = 3  # onnxruntime's own warnings would go to stderr, bypassing our logs
    try:
        return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ModelError(f"cannot load ONNX model {model}: {exc}") from None


@dataclass(frozen=True)
class EmbedderSettings:
    """How texts become vectors; every field that changes vectors must be reflected in the model id."""

    pooling: str = "mean"  # "mean" or "cls"
    query_prefix: str = ""
    passage_prefix: str = ""
    max_tokens: int = 512  # including special tokens
    batch_size: int = 16
    batch_tokens: int = BATCH_TOKENS  # rows x padded width per run at most (one longer text runs alone); 0: no cap


class OnnxEmbedder:
    """Implements :class:`memoryd.indexer.types.Embedder` over an onnxruntime session."""

    def __init__(self, session: ort.InferenceSession, tokenizer: TokenizerAdapter, *, model_id: str,
                 settings: EmbedderSettings, source: str = "",
                 new_session: Callable[[], ort.InferenceSession] | None = None,
                 query_session: ort.InferenceSession | None = None,
                 precision: tuple[str, str] | None = None,
                 release_pages: Callable[[], int] | None = None) -> None:
        self.model_id = model_id
        self._release_pages = release_pages  # drops resident pages of memory-mapped weights; None: none
        self._session = session
        # Queries only: a faster graph of the same weights (the int8 e5 twin). It must give the
        # same vector space, since query vectors are compared with ``session``'s passage vectors.
        self._query_session = query_session
        self._tok = tokenizer
        self._settings = settings
        self._source = source
        self._new_session = new_session  # makes another session of the same file and thread count
        # (queries, passages): "int8" or "exact", for status; None: as the sessions given say
        self._precision = precision or ("int8" if query_session is not None else "exact", "exact")
        # Hand the activation arena back after each run: a 16 x 512 batch peaks at ~250 MB that
        # would otherwise stay resident in a long-lived daemon; measured at no throughput cost.
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        name = source or model_id
        self._inputs = _check_inputs(session, name)
        self._output, self._pooled, dim = _pick_output(session, name)
        self.dimension = dim if dim else int(self._embed(["dimension probe"]).shape[1])

    @property
    def query_precision(self) -> str:
        """"int8" when queries run on a faster twin graph (shown by ``status``), else "exact"."""
        return self._precision[0]

    @property
    def passage_precision(self) -> str:
        """"int8" when passages run on the int8 twin (part of the model id), else "exact"."""
        return self._precision[1]

    def with_own_session(self) -> OnnxEmbedder:
        """A twin (same model id, tokenizer, settings) on a new session created by the calling thread.

        Costs ~20 MB RSS for e5-small-q4 (its word table is shared, see word_table.py). Raises ModelError
        when this embedder was built without a session factory or the file cannot be loaded.
        """
        if self._new_session is None:
            raise ModelError(f"embedding model {self.model_id}: no session factory, cannot open a second session")
        return OnnxEmbedder(self._new_session(), self._tok, model_id=self.model_id, settings=self._settings,
                            source=self._source, new_session=self._new_session, query_session=self._query_session,
                            precision=self._precision, release_pages=self._release_pages)

    def release_pages(self) -> int:
        """After bulk work: hand back the resident pages of memory-mapped weights (the e5 word table),
        which queries fault back in a row at a time; returns the bytes advised (0: nothing mapped)."""
        return self._release_pages() if self._release_pages is not None else 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Model tokens per text, without special tokens or prefixes (never truncated)."""
        return self._tok.count(texts)

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        """Shape (len(texts), dimension); each text gets the passage prefix and is cut to max_tokens."""
        return self._embed([self._settings.passage_prefix + t for t in texts])

    def embed_query(self, text: str) -> FloatArray:
        """Shape (dimension,), with the query prefix."""
        row: FloatArray = self._embed([self._settings.query_prefix + text], self._query_session)[0]
        return row

    def _embed(self, texts: list[str], session: ort.InferenceSession | None = None) -> FloatArray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        ids = self._tok.encode(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        parts = [self._run([ids[i] for i in batch], session or self._session)
                 for batch in length_batches(order, [len(r) for r in ids], self._settings.batch_size,
                                             self._settings.batch_tokens or 1 << 62)]
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _run(self, rows: list[list[int]], session: ort.InferenceSession) -> FloatArray:
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self._tok.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        feeds: dict[str, npt.NDArray[np.integer]] = {
            name: _feed(name, ids, mask).astype(dtype, copy=False) for name, dtype in self._inputs.items()
        }
        try:
            result = np.asarray(session.run([self._output], feeds, self._run_options)[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelError(f"embedding model {self.model_id} failed: {exc}") from None
        pooled = result if self._pooled else _pool(result, mask, self._settings.pooling)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: FloatArray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return unit


def length_batches(order: Sequence[int], lengths: Sequence[int], max_rows: int, max_tokens: int) -> list[list[int]]:
    """``order`` (indices sorted by ascending ``lengths``) cut into runs of at most ``max_rows`` texts whose
    padded size (rows x the widest, which is the last) stays within ``max_tokens``; a longer text runs alone."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) >= max_rows or (len(current) + 1) * lengths[i] > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _feed(name: str, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    if name == "input_ids":
        return ids
    if name == "attention_mask":
        return mask
    if name == "token_type_ids":
        return np.zeros_like(ids)
    return np.ascontiguousarray(np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape))


def _pool(hidden: FloatArray, mask: npt.NDArray[np.int64], pooling: str) -> FloatArray:
    if pooling == "cls":
        return hidden[:, 0, :]
    weights = mask.astype(np.float32)
    summed = np.matmul(weights[:, None, :], hidden)[:, 0, :]
    mean: FloatArray = summed / np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
    return mean


def _check_inputs(session: ort.InferenceSession, name: str) -> dict[str, type]:
    inputs: dict[str, type] = {}
    for arg in session.get_inputs():
        if arg.name not in _KNOWN_INPUTS or arg.type not in _INT_TYPES:
            raise ModelError(f"{name}: unsupported model input '{arg.name}' ({arg.type}); "
                             f"expected integer inputs among {_KNOWN_INPUTS}")
        inputs[arg.name] = _INT_TYPES[arg.type]
    missing = {"input_ids", "attention_mask"} - inputs.keys()
    if missing:
        raise ModelError(f"{name}: model lacks required input(s) {sorted(missing)}")
    return inputs


def _pick_output(session: ort.InferenceSession, name: str) -> tuple[str, bool, int | None]:
    """The output to use, whether it is already pooled ([batch, hidden]) and its width if static."""
    outputs = session.get_outputs()
    for rank, pooled in ((3, False), (2, True)):
        for out in outputs:
            if len(out.shape) == rank and out.type == "tensor(float)":
                width = out.shape[-1]
                return out.name, pooled, width if isinstance(width, int) and width > 0 else None
    raise ModelError(f"{name}: no float output of shape [batch, seq, hidden] or [batch, hidden]")
