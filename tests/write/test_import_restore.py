"""``import`` restores an export and decides each line once (issue #37 items 3 and 4).

* lines with a ``path`` go back to their own file and section: export → clear → import gives
  the same files byte for byte, on the embedded backend and on PostgreSQL; importing an
  export into the store it came from changes no byte;
* one function decides for the dry run and the real run, judging each line against what
  is stored and the lines before it: their decisions are equal, line by line;
* a restore is refused per line outside the root, outside the session's namespaces, or
  holding a secret.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.indexer.access import DEFAULT, Session, namespace_of
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.markdown.mdlines import ITEM
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.editor import MemoryEditor
from memoryd.indexer.write.entries import memory_files, select
from memoryd.indexer.write.importer import WOULD
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.restore import Restore, check_restore
from memoryd.indexer.write.transfer import BadLine, export_jsonl, parse_jsonl
from tests.helpers import make_config
from tests.indexer.test_storage_backends import storage_config
from tests.write_fixtures import HASH_WRITE

NOW = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
STAMP = "2026-12-02T10:00:00Z"
OWNER = Session("owner")
DONE = {v: k for k, v in WOULD.items()} | {"would_append": "appended", "would_reinforce": "reinforced",
                                           "would_replace": "replaced", "would_restore": "restored"}
PATHS = ("MEMORY.md", "user/preferences.md", "memory/2026-01-05.md", "peers/alice/MEMORY.md",
         "agents/coder/notes.md")
WORDS = ("harbour", "violet", "granite", "lantern", "meadow", "copper", "thistle", "orchard", "falcon", "ember",
         "quokka", "saffron", "basalt", "juniper")


class Store:
    """A first root, its index and an editor on a fixed clock (the files' ``updated:`` stamps match it)."""

    def __init__(self, root: Path, index: MemoryIndex, cfg: Any, data: Path) -> None:
        self.root, self.index, self.cfg = root, index, cfg
        self.editor = MemoryEditor(index, root, cfg.write, clock=lambda: NOW,
                                   history=hist.History(data / "history.jsonl"))

    def reset(self, files: dict[str, str]) -> None:
        for child in self.root.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        for rel, text in files.items():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_bytes(text.encode())

    def snapshot(self) -> dict[str, bytes]:
        return {p.relative_to(self.root).as_posix(): p.read_bytes() for p in sorted(self.root.rglob("*.md"))}

    def export(self) -> str:
        files = memory_files(self.root, None, lambda rel: True, 1 << 20)
        return export_jsonl(files, select(files))[1]

    def clear_all(self) -> None:
        files = memory_files(self.root, None, lambda rel: True, 1 << 20)
        for ns in sorted({f.namespace for f in files}, key=str):
            self.editor.clear(ns, [f.rel for f in files if f.namespace == ns])

    def lines(self, data: str) -> list[tuple[int, Accepted | Restore]]:
        out: list[tuple[int, Accepted | Restore]] = []
        for item in parse_jsonl(data):
            assert not isinstance(item, BadLine), item
            if item.path is not None:
                r = check_restore(item, OWNER, self.cfg.write.max_content_bytes)
                assert isinstance(r, Restore), r
                out.append((item.line, r))
            else:
                p = prepare(item.text, DEFAULT, NOW.date(), item.type)
                assert isinstance(p, Accepted), p
                out.append((item.line, p))
        return out

    def import_(self, data: str, dry_run: bool = False) -> list[dict[str, Any]]:
        return self.editor.import_plans(self.lines(data), dry_run)


def _cfg(root: Path, data: Path, backend: str = "embedded", dsn: str | None = None) -> Any:
    cfg = storage_config(backend, root, data, dsn) if backend != "embedded" else make_config(root, data)
    return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    root = tmp_path / "root"
    root.mkdir()
    cfg = _cfg(root, tmp_path / "data")
    index = open_index(cfg, HashEmbedder())
    try:
        yield Store(root, index, cfg, tmp_path)
    finally:
        index.close()


# -- random memory files ----------------------------------------------------------------------------


@st.composite
def memory_file(draw: st.DrawFn, texts: Iterator[str]) -> str:
    """A file as people and memoryd write them: front matter or not, headings, prose, code fences, a USER
    block, entries with markers, list markers of every kind and continuation lines."""
    out = [f"---\nupdated: {STAMP}\n---\n"] if draw(st.booleans()) else []
    if draw(st.booleans()):
        out.append("# Notes\n\n")
    for s in range(draw(st.integers(0, 3)) + 1):
        if s or draw(st.booleans()):
            out.append(f"## {draw(st.sampled_from(['Facts', 'Preferences', 'Decisions', '2026-01-05']))} {s}\n\n")
        for _ in range(draw(st.integers(0, 5))):
            kind = draw(st.sampled_from(["entry", "entry", "entry", "prose", "blank", "fence", "user"]))
            if kind == "entry":
                marker = draw(st.sampled_from(["- ", "* ", "1. ", "- [ ] ", "  - "]))
                meta = draw(st.sampled_from(["", "", " <!-- memoryd: importance=3 -->",
                                             " <!-- memoryd: importance=2 reinforced=4 -->"]))
                more = "".join(f"    {draw(st.sampled_from(WORDS))} continued\n"
                               for _ in range(draw(st.integers(0, 1)) if marker != "  - " else 0))
                out.append(f"{marker}{next(texts)}{meta}\n{more}")
            elif kind == "prose":
                out.append(f"Some prose about {draw(st.sampled_from(WORDS))}.\n")
            elif kind == "blank":
                out.append("\n")
            elif kind == "fence":
                out.append("```\n- not an entry\n```\n")
            else:
                out.append("<!-- USER_BLOCK_START -->\n- the user's own line\n<!-- USER_BLOCK_END -->\n")
        out.append("\n" if draw(st.booleans()) else "")
    text = "".join(out)
    # No final newline, sometimes; not after an entry: a clear moves the missing newline to the line
    # before (a blank line there is lost with it), and nothing says afterwards that the file lacked one.
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    cut = text.endswith("\n") and not ITEM.match(last) and not last.startswith(" ") and draw(st.booleans())
    return text[:-1] if cut else text


@st.composite
def memory_tree(draw: st.DrawFn) -> dict[str, str]:
    n = iter(range(1 << 30))
    texts = (f"The {WORDS[i % len(WORDS)]} fact number {i} holds." for i in n)  # unique: an entry is its text
    rels = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=4, unique=True))
    return {rel: draw(memory_file(texts)) for rel in rels}


def _roundtrip(s: Store, files: dict[str, str]) -> None:
    s.reset(files)
    before = s.snapshot()
    dump = s.export()
    again = s.import_(dump)  # into the store it came from: nothing to do
    assert {r["decision"] for r in again} <= {"unchanged"} and s.snapshot() == before
    s.clear_all()
    if dump:
        assert s.snapshot() != before
    done = s.import_(dump)
    assert [r["decision"] for r in done] == ["restored"] * len(done)
    assert s.snapshot() == before  # the same entries in the same files, byte for byte
    assert {r["decision"] for r in s.import_(dump)} <= {"unchanged"} and s.snapshot() == before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=memory_tree())
def test_export_clear_import_gives_the_same_files_embedded(store: Store, files: dict[str, str]) -> None:
    _roundtrip(store, files)


@pytest.mark.slow
# The database pool's own threads use the random module while Hypothesis draws; the strategy does not.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=memory_tree())
def test_export_clear_import_gives_the_same_files_postgres(pg_store: Store, files: dict[str, str]) -> None:
    _roundtrip(pg_store, files)


@pytest.fixture
def pg_store(pg_dsn: str, tmp_path: Path) -> Iterator[Store]:
    root = tmp_path / "root"
    root.mkdir()
    cfg = _cfg(root, tmp_path / "data", "postgres", pg_dsn)
    index = open_index(cfg, HashEmbedder())
    try:
        yield Store(root, index, cfg, tmp_path)
    finally:
        index.close()


# -- one decision for the dry run and the real run ---------------------------------------------------

SEED = {"MEMORY.md": "# Memory\n\n## Facts\n\n- The office is in Lisbon, near the river.\n",
        "user/preferences.md": "## Preferences\n\n- The user prefers green tea in the morning.\n"}
NEW = [f"The quarterly report for region {r} is due on March {d}." for r, d in
       (("North", 1), ("South", 8), ("East", 15))] + [
    "The user prefers green tea in the morning.", "The user prefers black coffee in the morning.",
    "Alice Chen works at Acme Robotics in Lisbon.", "Alice Chen works at Globex in Porto.",
    "The office is in Lisbon, near the river."]
RESTORES = [{"path": "MEMORY.md", "section": "Facts", "text": "The office is in Lisbon, near the river."},
            {"path": "MEMORY.md", "section": "Facts", "text": "The quokka fact holds in the harbour."},
            {"path": "user/preferences.md", "section": "Preferences",
             "text": "The user prefers black coffee in the morning."},
            {"path": "notes/new.md", "section": "Ideas",
             "text": "The quarterly report for region North is due on March 1."}]


def _dry_and_real(s: Store, data: str) -> tuple[list[str], list[str]]:
    s.reset(SEED)
    s.index.index_files([(s.root, rel) for rel in SEED])
    before = s.snapshot()
    dry = s.import_(data, dry_run=True)
    assert s.snapshot() == before  # a dry run writes nothing
    real = s.import_(data)
    return [DONE[r["decision"]] for r in dry], [r["decision"] for r in real]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.one_of(st.sampled_from(NEW).map(lambda t: {"text": t}), st.sampled_from(RESTORES)),
                      min_size=1, max_size=10))
def test_the_dry_run_decides_what_the_real_run_does_line_by_line(tmp_path_factory: pytest.TempPathFactory,
                                                                 picks: list[dict[str, str]]) -> None:
    base = tmp_path_factory.mktemp("dry")
    (base / "root").mkdir()
    cfg = _cfg(base / "root", base / "data")
    index = open_index(cfg, HashEmbedder())
    try:
        dry, real = _dry_and_real(Store(base / "root", index, cfg, base), "".join(json.dumps(p) + "\n" for p in picks))
    finally:
        index.close()
    assert dry == real


def test_the_reviewers_five_lines_and_a_repeat_the_dry_run_says_what_the_import_does(store: Store) -> None:
    """Lines of one import are judged against each other: a line repeated later in the same import is a
    reinforcement of the first in both runs (before, the dry run said 'would_append' for it)."""
    bob = "Bob Stone works at Initech in Madrid."
    lines = [*NEW[:3], "Alice Chen works at Acme Robotics in Lisbon.", bob, bob]
    dry, real = _dry_and_real(store, "".join(json.dumps({"text": t}) + "\n" for t in lines))
    assert dry == real and real[-1] == "reinforced"


def test_a_restore_goes_to_its_file_and_section_not_through_the_router(store: Store) -> None:
    store.reset(SEED)
    line = json.dumps({"path": "MEMORY.md", "section": "Facts", "text": "Bought 3 kg of saffron today."})
    [r] = store.import_(line + "\n")  # the router would send this to today's journal
    assert (r["decision"], r["path"], r["line"]) == ("restored", "MEMORY.md", 6)
    assert (store.root / "MEMORY.md").read_text().splitlines()[5] == "- Bought 3 kg of saffron today."
    assert not (store.root / "memory").exists()


def test_restores_are_refused_per_line_outside_the_root_or_the_sessions_namespace(store: Store) -> None:
    store.reset(SEED)
    (store.root / "peers/bob").mkdir(parents=True)
    (store.root / "peers/bob/MEMORY.md").symlink_to(store.root / "MEMORY.md")
    rows = [{"path": "../outside.md", "text": "An entry outside the root."},
            {"path": "/etc/motd.md", "text": "An absolute path."},
            {"path": "MEMORY.txt", "text": "Not a memory file."},
            {"path": ".git/notes.md", "text": "Into a hidden folder."},
            {"path": "MEMORY.md", "namespace": "peer:alice", "text": "A namespace that is not the path's."},
            {"path": "MEMORY.md", "text": "one", "lines": ["- two"]}]
    for row in rows:
        [item] = parse_jsonl(json.dumps(row))
        assert not isinstance(item, BadLine)
        got = check_restore(item, OWNER, 2048)
        assert isinstance(got, dict) and got["decision"] in ("rejected", "invalid"), (row, got)
    [item] = parse_jsonl(json.dumps({"path": "peers/bob/MEMORY.md", "text": "Bob's entry."}))
    alice = check_restore(item, Session("direct", peer="alice"), 2048)
    assert isinstance(alice, dict) and alice["stage"] == "path" and "peer:bob" in alice["reason"]
    owner = check_restore(item, OWNER, 2048)
    assert isinstance(owner, Restore)
    before = store.snapshot()
    [r] = store.editor.import_plans([(1, owner)], dry_run=False)
    assert r["decision"] == "rejected" and "symlink" in r["reason"] and store.snapshot() == before
    [d] = store.editor.import_plans([(1, owner)], dry_run=True)
    assert d["decision"] == "rejected"  # the dry run says so too
    assert namespace_of("peers/bob/MEMORY.md").id == "bob"
    secret = json.dumps({"path": "MEMORY.md", "text": "The deploy token is ghp_Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0dC9bA"})
    for dry in (True, False):
        [r] = store.import_(secret + "\n", dry_run=dry)
        assert (r["decision"], r["stage"]) == ("rejected", "privacy") and store.snapshot() == before


def test_new_lines_for_one_file_are_written_in_one_rewrite_of_it(tmp_path: Path) -> None:
    """Appends decided for one file are carried out in one conditional write, not one rewrite per line."""
    root = tmp_path / "root"
    root.mkdir()
    cfg = _cfg(root, tmp_path / "data")
    index = open_index(cfg, HashEmbedder())
    writes: list[Path] = []
    try:
        s = Store(root, index, cfg, tmp_path)
        s.editor = MemoryEditor(index, root, cfg.write, clock=lambda: NOW, before_write=writes.append)
        s.reset(SEED)
        texts = ("Met Lisbon's harbour master about violin lessons.", "Porto shipment arrives with garden soil.",
                 "Repaired the bicycle chain in Madrid yesterday.", "Berlin tax forms were filed early.",
                 "Piano tuning happens every spring in Oslo.", "Vienna roof tiles cracked during winter storms.")
        data = "".join(json.dumps({"text": t}) + "\n" for t in texts)
        done = s.import_(data)
    finally:
        index.close()
    assert [r["decision"] for r in done] == ["appended"] * 6 and len({r["path"] for r in done}) == 1
    assert len(writes) == 1
    text = (root / done[0]["path"]).read_text().splitlines()
    assert [text[r["line"] - 1].split(" <!--")[0] for r in done] == [f"- {t}" for t in texts]
