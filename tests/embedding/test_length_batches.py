"""Length-capped batches (indexer/embedding/onnx_embedder.py): a long chunk runs alone, short texts share a run."""

from __future__ import annotations

from memoryd.indexer.embedding.onnx_embedder import length_batches


def test_a_batch_holds_at_most_max_tokens_of_padded_rows_and_max_rows_texts() -> None:
    lengths = [300, 20, 20, 80, 20, 300, 80, 160, 20]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches = length_batches(order, lengths, max_rows=3, max_tokens=512)
    assert [i for b in batches for i in b] == order  # every text once, in length order
    assert all(len(b) <= 3 and len(b) * max(lengths[i] for i in b) <= 512 for b in batches if len(b) > 1)
    assert [len(b) for b in batches] == [3, 3, 1, 1, 1]  # 20 20 20 | 20 80 80 | 160 | 300 | 300


def test_no_token_cap_is_the_old_fixed_size_batching() -> None:
    lengths = [300] * 5
    assert length_batches(list(range(5)), lengths, max_rows=2, max_tokens=1 << 62) == [[0, 1], [2, 3], [4]]
    assert length_batches([0], [900], max_rows=16, max_tokens=512) == [[0]]  # too long for the cap: alone
