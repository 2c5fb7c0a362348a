"""Synonym expansion of the keyword leg: the table, user files and their errors, and the bound."""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search import keyword, synonyms
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.synonyms import SynonymFileError, SynonymTable, load, parse
from tests.helpers import make_config


def _expand(table: SynonymTable, query: str) -> tuple[list[str], dict[str, list[str]]]:
    return table.expand(query, keyword.query_terms(query))


def test_builtin_table_bridges_english_abbreviations_and_chinese() -> None:
    table = load()
    terms, added = _expand(table, "which database did we pick")
    assert "db" in terms and "数据" in terms and "据库" in terms
    assert added == {"database": ["db", "数据", "据库"]}
    terms, added = _expand(table, "我们的数据库密码在哪里")
    assert "databas" in terms and "db" in terms and "password" in terms
    assert set(added) == {"数据库", "密码"}


def test_a_multi_word_name_is_searched_as_a_phrase_and_recognised_by_all_its_words() -> None:
    table = SynonymTable(tuple(parse("pull request, PR\n", "t")))
    assert _expand(table, "review the PR")[1] == {"PR": ["pull request"]}
    assert _expand(table, "open a pull request")[1] == {"pull request": ["pr"]}
    assert _expand(table, "pull the latest")[1] == {}


def test_a_query_without_any_name_is_left_alone() -> None:
    terms = keyword.query_terms("garden tomatoes")
    assert load().expand("garden tomatoes", terms) == (terms, {})


def test_expansion_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ", ".join(f"name{i}x" for i in range(30))
    table = SynonymTable(tuple(parse(f"{names}\n", "t")))
    terms, _ = _expand(table, "name0x")
    assert len(terms) == 1 + synonyms.MAX_ADDED_TERMS
    monkeypatch.setattr(keyword, "MAX_QUERY_TERMS", 3)
    assert len(_expand(table, "name0x")[0]) == 3


def test_user_file_adds_groups_and_can_stand_alone(tmp_path: Path) -> None:
    f = tmp_path / "syn.txt"
    f.write_text("# ours\n\nzebracorn、斑马角，zc\n", encoding="utf-8")
    table = load(f, builtin=False)
    assert len(table.groups) == 1
    assert _expand(table, "where is zebracorn")[1] == {"zebracorn": ["斑马", "马角", "zc"]}
    assert len(load(f).groups) == len(load().groups) + 1


@pytest.mark.parametrize(("text", "line", "why"), [
    ("database, DB\nlonely\n", 2, "at least two different names"),
    ("# c\nsame, same\n", 2, "at least two different names"),
    ("a1, , b1\n", 1, "empty name"),
    ("\n\nreal, the\n", 3, "no searchable word"),
    ("x, " * 40 + "y\n", 1, "at most"),
])
def test_a_bad_line_is_named_with_its_file_and_number(tmp_path: Path, text: str, line: int, why: str) -> None:
    f = tmp_path / "syn.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(SynonymFileError, match=rf"{re.escape(str(f))}:{line}: .*{why}"):
        load(f)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SynonymFileError, match=r"missing\.txt cannot be read"):
        load(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a, b\nc, \xff\n")
    with pytest.raises(SynonymFileError, match=rf"{re.escape(str(bad))}:2: not valid UTF-8"):
        load(bad)


def test_search_finds_a_note_through_a_synonym_and_explains_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2024-01-01.md").write_text("# Notes\n\n- 数据库 迁移 到 新 机器\n", encoding="utf-8")
    (root / "memory" / "2024-01-02.md").write_text("# Notes\n\n- The garden needs water.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        res = idx.query(Query("database", k=3, mode="keyword", explain=True)).to_json()
        assert [h["path"] for h in res["hits"]] == ["memory/2024-01-01.md"]
        assert res["query_analysis"]["synonyms"] == {"database": ["db", "数据", "据库"]}
        # The synonyms are searched; the English ones are in no chunk, so FTS5 is spared them.
        assert res["keyword_plan"]["passes"][0]["terms"] == ["数据", "据库"]
        assert res["keyword_plan"]["absent_terms"] == ["databas", "db"]
    finally:
        idx.close()
    cfg = make_config(root, tmp_path / "data2")
    off = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, synonyms=False))
    idx = open_index(off, load_embedder(off.embedding, off.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        assert idx.query(Query("database", k=3, mode="keyword")).hits == []
    finally:
        idx.close()


class _Clock:
    """A hand-moved clock: the reload check is paced by it, so no test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _rewrite(f: Path, text: str) -> None:
    f.write_text(text, encoding="utf-8")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a new mtime even on a coarse clock


def _user_groups(table: object, query: str) -> dict[str, list[str]]:
    assert isinstance(table, synonyms.ReloadingTable)
    return table.expand(query, keyword.query_terms(query))[1]


def test_an_edited_user_file_is_used_after_the_check_interval(tmp_path: Path) -> None:
    f = tmp_path / "syn.txt"
    f.write_text("zebracorn, zc\n", encoding="utf-8")
    clock = _Clock()
    table = load(f, builtin=False, clock=clock)
    _rewrite(f, "zebracorn, zc\nquokka, qk\n")
    clock.now = synonyms.RELOAD_CHECK_SECONDS / 2
    assert _user_groups(table, "quokka") == {}  # within the window: no stat, the old table
    clock.now = synonyms.RELOAD_CHECK_SECONDS
    with capture_logs() as logs:
        assert _user_groups(table, "quokka") == {"quokka": ["qk"]}
    assert [e["event"] for e in logs] == ["synonyms.reloaded"]
    assert logs[0]["file"] == str(f) and logs[0]["groups"] == 2


def test_a_bad_new_version_keeps_the_previous_table_and_is_reported_once(tmp_path: Path) -> None:
    f = tmp_path / "syn.txt"
    f.write_text("zebracorn, zc\n", encoding="utf-8")
    clock = _Clock()
    table = load(f, builtin=False, clock=clock)
    _rewrite(f, "quokka, qk\nlonely\n")
    with capture_logs() as logs:
        for step in (1, 2, 3):
            clock.now = step * synonyms.RELOAD_CHECK_SECONDS
            assert _user_groups(table, "zebracorn") == {"zebracorn": ["zc"]}
            assert _user_groups(table, "quokka") == {}
    assert [(e["event"], e["log_level"], e["file"], e["line"]) for e in logs] == [
        ("synonyms.reload_failed", "error", str(f), 2)]
    _rewrite(f, "quokka, qk\n")  # fixed: used at the next check
    clock.now = 4 * synonyms.RELOAD_CHECK_SECONDS
    assert _user_groups(table, "quokka") == {"quokka": ["qk"]}
    assert _user_groups(table, "zebracorn") == {}


def test_a_removed_user_file_keeps_the_previous_table(tmp_path: Path) -> None:
    f = tmp_path / "syn.txt"
    f.write_text("zebracorn, zc\n", encoding="utf-8")
    clock = _Clock()
    table = load(f, builtin=False, clock=clock)
    f.unlink()
    clock.now = synonyms.RELOAD_CHECK_SECONDS
    with capture_logs() as logs:
        assert _user_groups(table, "zebracorn") == {"zebracorn": ["zc"]}
    assert [(e["event"], e["line"]) for e in logs] == [("synonyms.reload_failed", None)]
