"""Every reply says what it did (issue #37, item 5): a replace or a reinforce names the entry as it was
and the undo id; an undo names the line its entry is on afterwards.

Measured on 2f88dd6: ``undo`` of a replace in a file with front matter answered line 2 (the
``updated:`` stamp the exact revert also put back was the first line that differed), and that line
and the stamp's text went into the undo's history record; a ``reinforced`` reply had no ``previous``.
The clock here ticks a minute per call, as time passes between a write and its undo, so every edit
changes the stamp.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from memoryd.daemon.client import cli_history, cli_write
from memoryd.indexer.access import DEFAULT
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.intake import Accepted, prepare
from memoryd.indexer.write.writer import MemoryWriter
from tests.helpers import make_config
from tests.write_fixtures import HASH_WRITE, WriteDaemon

# watchdog warns when memoryd creates a folder faster than its inotify thread watches it
# (tests/client/test_write_cli.py)
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
PREFS = "user/preferences.md"
VIM, NEOVIM = "The user prefers Vim as their editor.", "The user prefers Neovim as their editor."
DARK = "The user prefers dark mode in every app."
FRONT = "---\nupdated: 2020-01-01T00:00:00Z\n---\n\n## Preferences\n\n"
BARE = "## Preferences\n\n"
IMP4 = " <!-- memoryd: importance=4 -->"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Path, MemoryWriter]]:
    root = tmp_path / "root"
    (root / "user").mkdir(parents=True)
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]
    index = open_index(cfg, HashEmbedder())
    ticks = itertools.count()
    clock: Callable[[], datetime] = lambda: START + timedelta(minutes=next(ticks))  # noqa: E731
    try:
        yield root, MemoryWriter(index, root, cfg.write, clock=clock, history=hist.History.in_data_dir(cfg.data_dir))
    finally:
        index.close()


def plan(text: str) -> Accepted:
    p = prepare(text, DEFAULT, date(2025, 3, 1))
    assert isinstance(p, Accepted), p
    return p


def seed(root: Path, head: str, *entries: str) -> Path:
    f = root / PREFS
    f.write_text(head + "".join(f"- {e}{IMP4}\n" for e in entries))
    return f


def line_of(f: Path, needle: str) -> int:
    found = [i + 1 for i, line in enumerate(f.read_text().splitlines()) if needle in line]
    assert len(found) == 1, (needle, f.read_text())
    return found[0]


def add_above(f: Path, n: int) -> None:
    """The user adds ``n`` lines of their own above the section (the undo is placed by content then)."""
    text = f.read_text()
    at = text.index("## Preferences")
    f.write_text(text[:at] + "".join(f"A note of the user's own, number {i}.\n\n" for i in range(n)) + text[at:])


def undo_record(w: MemoryWriter, uid: str | None) -> dict[str, object]:
    assert w.history is not None and uid is not None
    rec = w.history.find(uid)
    assert rec is not None
    return rec


# -- the replies of a replace and a reinforce -----------------------------------------


@pytest.mark.parametrize("head", [FRONT, BARE], ids=["front-matter", "bare"])
def test_replace_and_reinforce_name_the_entry_before_and_the_undo_id(env, head: str) -> None:
    root, w = env
    seed(root, head, VIM, DARK)
    rep = w.remember(plan(NEOVIM))
    assert (rep.decision, rep.previous) == ("replaced", VIM)
    assert rep.history_id and undo_record(w, rep.history_id)["action"] == "replace"
    rein = w.remember(plan("the user prefers dark mode in every app"))
    assert (rein.decision, rein.previous, rein.reinforcement) == ("reinforced", DARK, 1)
    assert rein.history_id and undo_record(w, rein.history_id)["action"] == "reinforce"
    again = w.remember(plan("the user prefers dark mode in every app"))  # the same text: no new record
    assert (again.decision, again.previous, again.history_id) == ("reinforced", DARK, rein.history_id)
    assert {"previous", "history_id"} <= rein.to_dict().keys()


# -- the line an undo reports -----------------------------------------------------------


@pytest.mark.parametrize("head", [FRONT, BARE], ids=["front-matter", "bare"])
@pytest.mark.parametrize("above", [0, 3], ids=["untouched", "lines-added-above"])
def test_undo_of_a_replace_names_the_line_of_the_entry_put_back(env, head: str, above: int) -> None:
    root, w = env
    f = seed(root, head, DARK, "The user prefers tabs over spaces.", VIM)
    rep = w.remember(plan(NEOVIM))
    assert rep.decision == "replaced"
    add_above(f, above)
    back = w.undo(rep.history_id)  # type: ignore[arg-type]
    line = line_of(f, VIM)
    assert (back.line, back.previous) == (line, NEOVIM)
    rec = undo_record(w, back.history_id)
    assert rec["line"] == line and rec["new"] == f"- {VIM}{IMP4}" and rec["block"] == [f"- {VIM}{IMP4}"]
    assert "undone_by" in undo_record(w, rep.history_id)


@pytest.mark.parametrize("head", [FRONT, BARE], ids=["front-matter", "bare"])
@pytest.mark.parametrize("above", [0, 3], ids=["untouched", "lines-added-above"])
def test_undo_of_a_forget_names_the_line_of_the_entry_put_back(env, head: str, above: int) -> None:
    root, w = env
    f = seed(root, head, DARK, "The user prefers tabs over spaces.", VIM)
    gone = w.forget(PREFS, line_of(f, VIM))
    assert gone.previous == VIM and gone.history_id
    add_above(f, above)
    back = w.undo(gone.history_id)
    assert back.line == line_of(f, VIM) == undo_record(w, back.history_id)["line"]
    assert undo_record(w, back.history_id)["new"] == f"- {VIM}{IMP4}"


def drop_stamp(f: Path) -> None:
    """The user edits the front matter and drops memoryd's ``updated:`` line (the undo adds it back)."""
    f.write_text("".join(x for x in f.read_text().splitlines(keepends=True) if not x.startswith("updated:")))


@pytest.mark.parametrize("head", [FRONT, BARE], ids=["front-matter", "bare"])
@pytest.mark.parametrize("since", ["untouched", "lines-added-above", "stamp-dropped"])
def test_undo_of_a_reinforce_names_the_line_of_the_memory_it_writes(env, head: str, since: str) -> None:
    """The undone reinforcement writes the absorbed memory right under the entry that absorbed it,
    whose marker it also changes: two changed lines of the same words, the reply names the new one."""
    root, w = env
    f = seed(root, head, DARK, "The user prefers tabs over spaces.")
    absorbed = "the user prefers dark mode in every app"
    rein = w.remember(plan(absorbed))
    assert rein.decision == "reinforced"
    add_above(f, 3 if since == "lines-added-above" else 0)
    if since == "stamp-dropped":
        drop_stamp(f)
    back = w.undo(rein.history_id)  # type: ignore[arg-type]
    assert back.line == line_of(f, f"- {absorbed}") == line_of(f, DARK) + 1
    assert undo_record(w, back.history_id)["line"] == back.line


# -- through the socket ---------------------------------------------------------------


def test_replies_through_the_socket_say_what_changed_and_where(wd: WriteDaemon) -> None:
    f = wd.root / PREFS
    for text in (DARK, VIM):
        assert wd.client.call("remember", {"content": text})["decision"] == "appended"
    stamp = next(line for line in f.read_text().splitlines() if line.startswith("updated:"))
    f.write_text(f.read_text().replace(stamp, "updated: 2020-01-01T00:00:00Z"))  # the exact undo puts it back
    rep = wd.client.call("remember", {"content": NEOVIM})
    assert (rep["decision"], rep["previous"]) == ("replaced", VIM) and rep["history_id"].startswith("h-")
    rein = wd.client.call("remember", {"content": "the user prefers dark mode in every app"})
    assert (rein["decision"], rein["previous"]) == ("reinforced", DARK) and rein["history_id"].startswith("h-")
    back = wd.client.call("undo", {"id": rep["history_id"]})
    assert back["line"] == line_of(f, VIM) != 2
    listed = wd.client.call("history", {"path": PREFS, "limit": 1})["entries"][0]
    assert (listed["action"], listed["line"], listed["new"]) == ("undo", back["line"], f"- {VIM}{IMP4}")


# -- the CLI --------------------------------------------------------------------------


def cli(wd: WriteDaemon, module: ModuleType, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memoryd")
    module.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args([argv[0], "--socket", str(wd.socket), *argv[1:]])
    return int(module.COMMANDS[args.command](args))


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What the command printed (the in-process daemon's log lines share stdout here)."""
    return [x for x in capsys.readouterr().out.splitlines() if not re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[", x)]


def test_the_cli_prints_the_entry_before_and_the_undo_command(wd: WriteDaemon,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = wd.root / PREFS
    for text in (DARK, VIM):
        assert cli(wd, cli_write, "remember", text) == 0
    capsys.readouterr()
    assert cli(wd, cli_write, "remember", NEOVIM) == 0
    head = printed(capsys)[0]
    rid = head.rsplit(" ", 1)[-1]
    assert head == f'replaced {PREFS}:{line_of(f, NEOVIM)} (was: "{VIM}") — undo: memoryd undo {rid}'
    assert rid.startswith("h-")
    assert cli(wd, cli_write, "remember", "the user prefers dark mode in every app") == 0
    out = printed(capsys)
    rid2 = out[0].rsplit(" ", 1)[-1]
    assert out[0] == f'reinforced {PREFS}:{line_of(f, DARK)} (was: "{DARK}") — undo: memoryd undo {rid2}'
    assert out[1].endswith("(now reinforced 1×)")
    f.write_text(f.read_text().replace("## Preferences", "A line of the user's own.\n\n## Preferences"))
    assert cli(wd, cli_history, "undo", rid) == 0
    assert printed(capsys)[0].startswith(f"restored: {PREFS}:{line_of(f, VIM)} (")
