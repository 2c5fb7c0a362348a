from __future__ import annotations

import pytest

from memoryd.indexer.search.fusion import fuse, minmax, rrf, zscore


def test_zscore_is_scale_free_and_handles_ties_and_missing() -> None:
    a = zscore({1: 1.0, 2: 2.0, 3: 3.0}, [1, 2, 3])
    b = zscore({1: 10.0, 2: 20.0, 3: 30.0}, [1, 2, 3])
    assert a == pytest.approx(b) and a[2] == pytest.approx(0.0) and a[3] > 0 > a[1]
    assert zscore({1: 5.0, 2: 5.0}, [1, 2]) == {1: 0.0, 2: 0.0}
    assert zscore({1: 4.0}, [1, 2])[2] < 0  # a candidate without a keyword match ranks below one with it


def test_rrf_uses_ranks_only() -> None:
    out = rrf({1: 0.9, 2: 0.1, 3: 0.5}, [1, 2, 3, 4])
    assert out[1] > out[3] > out[2] > out[4] == 0.0
    assert out[1] == pytest.approx(1 / 60)


@pytest.mark.parametrize("method", ["zscore", "minmax", "rrf"])
def test_fuse_weights_move_the_ranking(method: str) -> None:
    vec = {1: 0.9, 2: 0.5, 3: 0.4}
    kw = {2: 12.0, 3: 1.0}
    ids = [1, 2, 3]
    only_vec = fuse(method, vec, kw, ids, 1.0, 0.0)
    only_kw = fuse(method, vec, kw, ids, 0.0, 1.0)
    assert max(only_vec, key=only_vec.__getitem__) == 1
    assert max(only_kw, key=only_kw.__getitem__) == 2


def test_keyword_leg_does_not_collapse_to_ones() -> None:
    """The 1/(1+rank) trap: every keyword hit scoring 1.0 makes hybrid silently vector-only."""
    out = minmax({1: 3.2, 2: 8.0, 3: 5.0}, [1, 2, 3])
    assert len(set(out.values())) == 3 and out[2] == 1.0 and out[1] == 0.0
