"""Real SIGKILLs during clear, the undo of a clear and import (``bench/write_chaos.py``): nothing lost or duplicated.

The long run (60 kills) is ``python bench/write_chaos.py``; this one keeps the harness from rotting and
catches a regression in the write-ahead path (``tests/write/test_write_ahead.py`` covers every step exactly).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the bench scripts import their sibling _common as scripts do
    return importlib.import_module("write_chaos")


@pytest.mark.slow
def test_kills_during_clear_undo_and_import_lose_and_duplicate_nothing() -> None:
    res = _bench().run(kills=9, seed_=5, per_file=300)
    assert res["kills"] == 9 and set(res["ops"]) == {"clear", "undo-clear", "import"}
    assert res["lost"] == 0, "an entry vanished from every file without a history record"
    assert res["duplicated"] == 0 and res["dup_ids"] == 0
    assert res["journal_left"] == 0, "a start left an interrupted edit unsettled"
    assert res["ok"]
