"""MemoryWriter on a real in-process index (hash embedder): re-index, concurrent edits, fallbacks, refusals."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import BadTarget, EntryNotFound, WriteConflict
from memoryd.indexer.markdown.memblocks import user_blocks
from memoryd.indexer.search.query import Query
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MAX_ATTEMPTS, MemoryWriter
from tests.helpers import make_config
from tests.write_fixtures import HASH_WRITE

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
USER = ("<!-- USER_BLOCK_START -->\r\n## Preferences\r\n- The user prefers Vim as their editor.\r\n"
        "<!-- USER_BLOCK_END -->\r\n")

IMP4 = " <!-- memoryd: importance=4 -->"  # the marker the router's importance for a preference leaves


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[MemoryIndex, Path, MemoryWriter]]:
    root = tmp_path / "root"
    (root / "user").mkdir(parents=True)
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    index = open_index(cfg, HashEmbedder())
    try:
        yield index, root, MemoryWriter(index, root, cfg.write, clock=lambda: NOW)
    finally:
        index.close()


def plan(text: str, ns: Namespace = DEFAULT) -> Accepted:
    p = prepare(text, ns, date(2025, 3, 1))
    assert isinstance(p, Accepted), p
    return p


def test_remember_reindexes_before_returning(env) -> None:
    index, root, w = env
    out = w.remember(plan("The user prefers zebracorn keyboards for typing."))
    assert (out.decision, out.path, out.line) == ("appended", "user/preferences.md", 7)
    assert (root / out.path).read_text().startswith("---\nupdated: 2025-03-01T09:00:00Z\n---\n\n## Preferences\n")
    hits = index.query(Query("zebracorn", mode="keyword")).to_json()["hits"]
    assert hits and hits[0]["path"] == "user/preferences.md"


def test_user_blocks_stay_byte_identical_through_every_decision(env) -> None:
    index, root, w = env
    f = root / "user" / "preferences.md"
    f.write_bytes(("# Prefs\r\n\r\n" + USER).encode())
    index.index_files([(root, "user/preferences.md")])
    before = user_blocks(f.read_bytes().decode())
    for text in ["The user prefers Vim as their editor.", "The user prefers dark mode in every editor.",
                 "The user prefers dark mode in every editor.", "The user prefers light mode in every editor."]:
        w.remember(plan(text))
        assert user_blocks(f.read_bytes().decode()) == before
    data = f.read_bytes()
    assert data.count(b"Vim") == 2 and b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b"light mode" in data and b"dark mode" not in data


def test_a_concurrent_edit_by_another_process_survives(env) -> None:
    _index, root, w = env
    f = root / "user" / "preferences.md"
    f.write_text("## Preferences\n\n- The user likes tea.\n")
    calls = []

    def other_process_edits(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            code = f"open({str(path)!r}, 'a').write('- Added by hand while memoryd was writing.\\n')"
            subprocess.run([sys.executable, "-c", code], check=True, timeout=30)

    w._before_write = other_process_edits
    with capture_logs() as logs:
        out = w.remember(plan("The user prefers window seats on long flights."))
    text = f.read_text()
    assert "- Added by hand while memoryd was writing.\n" in text and "- The user prefers window seats" in text
    assert text.splitlines()[out.line - 1] == "- The user prefers window seats on long flights." + IMP4
    assert len(calls) == 2 and any(e["event"] == "write.concurrent_edit" for e in logs)


def test_a_concurrent_edit_by_a_thread_during_replace_survives(env) -> None:
    _index, root, w = env
    w.remember(plan("The user prefers Vim as their editor."))
    f = root / "user" / "preferences.md"
    done = threading.Event()

    def thread_edits(path: Path) -> None:
        if not done.is_set():
            t = threading.Thread(target=lambda: path.write_text("- Inserted at the top by the user.\n"
                                                                + path.read_text()))
            t.start()
            t.join(10)
            done.set()

    w._before_write = thread_edits
    out = w.remember(plan("The user prefers Neovim as their editor."))
    text = f.read_text()
    assert out.decision == "replaced" and text.startswith("- Inserted at the top by the user.\n---")
    assert "Neovim" in text and "prefers Vim" not in text
    assert text.splitlines()[out.line - 1] == "- The user prefers Neovim as their editor." + IMP4


def test_an_entry_edited_away_meanwhile_falls_back_to_append(env) -> None:
    _index, root, w = env
    w.remember(plan("The user prefers Vim as their editor."))
    f = root / "user" / "preferences.md"
    state = {"n": 0}

    def user_deletes_it(path: Path) -> None:
        state["n"] += 1
        if state["n"] == 1:
            path.write_text(path.read_text().replace("- The user prefers Vim as their editor." + IMP4 + "\n", ""))

    w._before_write = user_deletes_it
    out = w.remember(plan("The user prefers Neovim as their editor."))
    assert out.decision == "appended" and "edited away" in out.reason
    assert f.read_text().count("- The user prefers Neovim as their editor." + IMP4 + "\n") == 1


def test_a_file_that_never_stops_changing_is_a_conflict_and_nothing_is_written(env) -> None:
    _index, root, w = env
    f = root / "user" / "preferences.md"
    f.write_text("- start\n")

    def always(path: Path) -> None:
        path.write_text(path.read_text() + "- user again\n")

    w._before_write = always
    with pytest.raises(WriteConflict, match=f"{MAX_ATTEMPTS} attempts"):
        w.remember(plan("The user prefers window seats on long flights."))
    assert "window" not in f.read_text() and f.read_text().count("user again") == MAX_ATTEMPTS


def test_non_utf8_files_and_broken_blocks_are_never_rewritten(env) -> None:
    _index, root, w = env
    f = root / "user" / "preferences.md"
    f.write_bytes(b"- caf\xe9 latin-1\n")
    with pytest.raises(BadTarget, match="UTF-8"):
        w.remember(plan("The user prefers window seats on long flights."))
    assert f.read_bytes() == b"- caf\xe9 latin-1\n"
    f.write_text("<!-- USER_BLOCK_START -->\n- open block\n")
    with pytest.raises(WriteConflict, match="never closed"):
        w.remember(plan("The user prefers window seats on long flights."))
    assert f.read_text() == "<!-- USER_BLOCK_START -->\n- open block\n"


def test_a_duplicate_in_another_file_of_the_namespace_is_reinforced_there_never_written_twice(env) -> None:
    index, root, w = env
    fact = "The user prefers window seats on long flights."
    (root / "notes.md").write_text(f"# Notes\n\n- {fact}\n")
    index.index_files([(root, "notes.md")])
    out = w.remember(plan(fact))  # issue #37 item 2: the same entry anywhere in the scope (seed 000)
    assert (out.decision, out.path, out.line, out.previous) == ("reinforced", "notes.md", 3, fact)
    assert not (root / "user" / "preferences.md").exists()
    again = w.remember(plan(fact.lower()))
    assert (again.decision, again.path, again.line, again.reinforcement) == ("reinforced", "notes.md", 3, 2)
    assert (root / "notes.md").read_text().count(fact) == 1


def test_a_restatement_in_another_file_of_the_namespace_is_named_not_edited(env) -> None:
    index, root, w = env
    notes = "# Notes\n\n- The user prefers window seats on long flights.\n"
    (root / "notes.md").write_text(notes)
    index.index_files([(root, "notes.md")])
    out = w.remember(plan("The user prefers window seats on flights that are long."))
    assert (out.decision, out.path) == ("appended", "user/preferences.md")  # where the route says
    assert (root / "notes.md").read_text() == notes  # a paraphrase elsewhere is never edited


def test_other_namespaces_are_not_candidates(env) -> None:
    index, root, w = env
    (root / "peers" / "bob").mkdir(parents=True)
    (root / "peers" / "bob" / "MEMORY.md").write_text("- The user prefers window seats on long flights.\n")
    index.index_files([(root, "peers/bob/MEMORY.md")])
    out = w.remember(plan("The user prefers window seats on long flights."))
    assert (out.decision, out.path) == ("appended", "user/preferences.md")


def test_forget(env) -> None:
    index, root, w = env
    a = w.remember(plan("The user prefers window seats on long flights."))
    with pytest.raises(EntryNotFound):
        w.forget("user/nothing.md", 1)
    with pytest.raises(EntryNotFound):
        w.forget(a.path, a.line, expect="something else")
    out = w.forget(a.path, a.line)
    assert out.decision == "removed" and out.previous == "The user prefers window seats on long flights."
    assert "window" not in (root / a.path).read_text()
    assert not index.query(Query("window seats", mode="keyword")).to_json()["hits"]
