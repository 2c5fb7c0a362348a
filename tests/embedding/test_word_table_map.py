"""The word table is mapped, not copied, and its pages can be handed back (#42 item 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memoryd.indexer.embedding.e5_onnx import WORD_Q4, WORD_SCALES
from memoryd.indexer.embedding.word_table import load_table, shared_initializers, table_path


def _write(path: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    good = {WORD_Q4: rng.integers(0, 255, (2000, 192), dtype=np.uint8),
            WORD_SCALES: rng.random((2000, 12), dtype=np.float32)}
    np.savez(path, **good)  # type: ignore[arg-type]
    return good


def test_the_table_is_a_copy_on_write_map_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.word-table.npz"
    good = _write(path)
    table = load_table(path)
    assert table is not None
    for name, arr in table.items():
        assert isinstance(arr, np.memmap) and arr.flags.c_contiguous
        np.testing.assert_array_equal(arr, good[name])
    table[WORD_Q4][0, 0] ^= 1  # a write stays in this process: the cache file is not changed
    np.testing.assert_array_equal(load_table(path)[WORD_Q4], good[WORD_Q4])  # type: ignore[index]


def test_dropping_resident_pages_keeps_the_values(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    good = _write(table_path(model))
    shared = shared_initializers(model)
    assert shared is not None and set(shared) == {WORD_Q4, WORD_SCALES}
    assert shared.drop_resident() >= good[WORD_Q4].nbytes + good[WORD_SCALES].nbytes
    for name, value in shared.items():
        np.testing.assert_array_equal(value.numpy(), good[name])  # faulted back in from the file
