"""``--search KEY=VALUE`` in the benchmarks: each value is read by its field's declared type.

The old parser copied the type of the current value, so a key whose default is None
(``synonyms_path``) crashed with ``NoneType takes no arguments``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memoryd.indexer.config import Config

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _common() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # the bench scripts import their sibling _common as scripts do
    return importlib.import_module("_common")


def test_a_key_whose_default_is_none_takes_a_path() -> None:
    cfg = _common().search_overrides(Config(), ["synonyms_path=/x/y.txt"])
    assert cfg.search.synonyms_path == Path("/x/y.txt")


def test_an_empty_value_sets_an_optional_key_back_to_none() -> None:
    cfg = _common().search_overrides(Config(), ["synonyms_path=/x/y.txt", "synonyms_path="])
    assert cfg.search.synonyms_path is None


def test_numbers_booleans_and_choices_keep_their_declared_types() -> None:
    cfg = _common().search_overrides(
        Config(), ["proximity_weight=0", "k=3", "synonyms=false", "fusion=rrf", "merge_adjacent=1"])
    s = cfg.search
    assert (s.proximity_weight, s.k, s.synonyms, s.fusion, s.merge_adjacent) == (0.0, 3, False, "rrf", True)
    assert isinstance(s.proximity_weight, float)


@pytest.mark.parametrize(("flag", "named"), [
    ("k=three", "search.k"),
    ("synonyms=maybe", "search.synonyms"),
    ("fusion=best", "search.fusion"),
    ("no_such_key=1", "search.no_such_key"),
    ("k", "KEY=VALUE"),
])
def test_a_bad_flag_exits_naming_it(flag: str, named: str) -> None:
    with pytest.raises(SystemExit, match=named.replace(".", r"\.")):
        _common().search_overrides(Config(), [flag])
