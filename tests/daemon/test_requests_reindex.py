"""``reindex``'s paths are checked once, when the params are parsed (the handler gets strings only)."""

from __future__ import annotations

import pytest

from memoryd.daemon.api.requests import parse_reindex
from memoryd.daemon.rpc.errors import InvalidParams


def test_paths_are_parsed_into_strings_once() -> None:
    assert parse_reindex({"paths": ["notes/a.md", "b"], "wait": True}).paths == ("notes/a.md", "b")
    assert parse_reindex({}).paths is None  # everything


@pytest.mark.parametrize("bad", [["a.md", 3], [""], [None], [["a.md"]]])
def test_a_path_that_is_no_string_is_refused_when_parsed(bad: list[object]) -> None:
    with pytest.raises(InvalidParams, match="non-empty strings"):
        parse_reindex({"paths": bad})
