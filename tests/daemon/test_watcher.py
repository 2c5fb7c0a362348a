"""Watcher on real observers (inotify on Linux) in tmp_path, plus the pure event translation.

No sleeps: every wait is a bounded condition wait (≤ 5 s). A "nothing else was
reported" check writes a marker file and waits for it: one observer delivers
its events in order, so everything written before the marker has been seen.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from watchdog.events import (
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)
from watchdog.observers.inotify import InotifyObserver

import memoryd.daemon.watch.watcher as watcher_mod
from memoryd.daemon.watch.debouncer import Change, Debouncer
from memoryd.daemon.watch.pathfilter import PathFilter, is_editor_temp
from memoryd.daemon.watch.watcher import Watcher, translate
from memoryd.indexer.errors import ConfigError

# watchdog 7.1 warns "Callback with id ... already exists" when a nested mkdir races its own
# recursive watch setup (benign: it re-registers the same callback). Under this suite's
# filterwarnings=error that warning would be raised inside watchdog's reader thread and kill it.
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

FILTER = PathFilter(("*.md",), (".git/*", "node_modules/*"))
WAIT_S = 5.0


class Sink:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.cond = threading.Condition()

    def __call__(self, change: Change) -> None:
        with self.cond:
            self.changes.append(change)
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[list[Change]], bool]) -> list[Change]:
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self.changes), WAIT_S)
            assert ok, f"timed out; got {self.changes}"
            return list(self.changes)

    def wait_change(self, change: Change) -> list[Change]:
        return self.wait_for(lambda cs: change in cs)

    def clear(self) -> None:
        with self.cond:
            self.changes.clear()


class Rig:
    def __init__(self, root: Path, outside: Path) -> None:
        self.root, self.outside = root, outside
        self.sink = Sink()
        self.failures: list[tuple[Path, str]] = []
        self.watcher = Watcher([root], FILTER, self.sink, lambda r, why: self.failures.append((r, why)),
                               poll_interval_s=0.05)
        self.markers = 0

    def write(self, rel: str, text: str = "x") -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def settle(self) -> list[Change]:
        """Everything reported so far, once a marker written now has been seen."""
        self.markers += 1
        marker = self.write(f"zz-marker-{self.markers}.md")
        changes = self.sink.wait_change(Change("upsert", marker))
        return [c for c in changes if "zz-marker" not in c.path.name]

    @property
    def status(self) -> dict:
        return self.watcher.status()[str(self.root)]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    r = Rig(root, outside)
    r.watcher.start()
    try:
        yield r
    finally:
        r.watcher.stop()


def up(p: Path) -> Change:
    return Change("upsert", p)


def test_create_and_modify_are_upserts(rig: Rig):
    p = rig.write("notes/x.md")
    rig.sink.wait_change(up(p))
    rig.sink.clear()
    with p.open("a") as f:
        f.write("more")
    rig.sink.wait_change(up(p))
    assert rig.status["alive"] and rig.status["backend"] == "inotify"
    assert rig.status["last_event"] is not None


def test_atomic_rename_over_is_an_upsert_of_the_target_only(rig: Rig):
    target = rig.write("x.md", "old")
    rig.settle()
    rig.sink.clear()
    tmp = rig.write("x.md.tmp", "new")
    os.replace(tmp, target)
    changes = rig.settle()
    assert up(target) in changes
    assert all(c.path.name != "x.md.tmp" and c.dest is None for c in changes)


def test_vim_save_reduces_to_one_upsert(rig: Rig):
    target = rig.write("x.md", "v1")
    rig.settle()
    rig.sink.clear()
    probe = rig.write("4913")
    probe.unlink()
    backup = rig.root / "x.md~"
    target.rename(backup)
    target.write_text("v2")
    backup.unlink()
    changes = rig.settle()
    assert {c.path.name for c in changes} == {"x.md"}  # nothing for 4913 or x.md~
    assert changes[0] == Change("delete", target) and changes[-1] == up(target)
    out: list[Change] = []
    deb = Debouncer(out.extend, quiet_ms=10)
    for c in changes:
        deb.submit(c)
    deb.flush()
    assert out == [up(target)]


def test_delete(rig: Rig):
    p = rig.write("gone.md")
    rig.sink.wait_change(up(p))
    p.unlink()
    rig.sink.wait_change(Change("delete", p))


def test_rename_within_the_root_is_a_move(rig: Rig):
    a = rig.write("a.md")
    (rig.root / "sub").mkdir()
    rig.settle()  # the new directory's watch is in place
    b = rig.root / "sub" / "b.md"
    a.rename(b)
    rig.sink.wait_change(Change("move", a, b))


def test_rename_into_a_brand_new_directory_still_ends_right(rig: Rig):
    # inotify race: the move lands before watchdog watches the new directory, so
    # it is seen as a delete plus the directory's content being discovered.
    a = rig.write("a.md")
    rig.settle()
    b = rig.root / "new" / "b.md"
    b.parent.mkdir()
    a.rename(b)
    rig.sink.wait_for(lambda cs: Change("move", a, b) in cs or {Change("delete", a), up(b)} <= set(cs))


def test_move_in_and_out_of_the_root(rig: Rig):
    src = rig.outside / "in.md"
    src.write_text("hello")
    dest = rig.root / "in.md"
    src.rename(dest)
    rig.sink.wait_change(up(dest))
    dest.rename(rig.outside / "back.md")  # reported after watchdog's 0.5 s move-pairing window
    rig.sink.wait_change(Change("delete", dest))


def test_directory_move_rescans_both_ends_and_moves_each_file(rig: Rig):
    a, b = rig.write("sub/a.md"), rig.write("sub/deep/b.md")
    rig.settle()
    rig.sink.clear()
    (rig.root / "sub").rename(rig.root / "sub2")
    want = {
        Change("rescan", rig.root / "sub"),
        Change("rescan", rig.root / "sub2"),
        Change("move", a, rig.root / "sub2" / "a.md"),
        Change("move", b, rig.root / "sub2" / "deep" / "b.md"),
    }
    got = rig.sink.wait_for(lambda cs: want <= set(cs))
    assert sum(c.kind == "rescan" for c in got) == 2  # no rescan for watchdog's synthetic sub-moves


def test_directory_moved_out_or_deleted_is_rescanned(rig: Rig):
    rig.write("d1/a.md")
    rig.write("d2/b.md")
    rig.settle()
    (rig.root / "d1").rename(rig.outside / "d1")
    rig.sink.wait_change(Change("rescan", rig.root / "d1"))
    shutil.rmtree(rig.root / "d2")
    want = {Change("rescan", rig.root / "d2"), Change("delete", rig.root / "d2" / "b.md")}
    rig.sink.wait_for(lambda cs: want <= set(cs))


def test_temp_swap_hidden_and_excluded_files_are_never_upserts(rig: Rig):
    for rel in [".x.md.swp", ".x.md.swx", "x.md.swp", "x.md~", "4913", ".#x.md", "#x.md#", "x.md.tmp",
                ".x.md.tmp", "x.md___jb_tmp___", "x.md___jb_old___", ".~lock.x.md", ".hidden.md",
                ".git/x.md", "node_modules/pkg/x.md", "x.txt"]:
        rig.write(rel)
    changes = rig.settle()
    assert changes == []


def test_a_burst_becomes_a_few_batches_through_the_debouncer(rig: Rig):
    batches: list[list[Change]] = []
    done = threading.Event()

    def on_ready(batch: list[Change]) -> None:
        batches.append(batch)
        if len({c.path for b in batches for c in b}) >= 300:
            done.set()

    deb = Debouncer(on_ready, quiet_ms=200, max_delay_ms=2000, batch_window_ms=100)
    rig.watcher.stop()
    burst = Watcher([rig.root], FILTER, deb.submit, lambda r, why: None)
    deb.start()
    burst.start()
    try:
        for i in range(300):
            rig.write(f"burst/f{i:03}.md", f"file {i}")
        assert done.wait(WAIT_S)
    finally:
        burst.stop()
        deb.stop()
    assert {c.kind for b in batches for c in b} == {"upsert"}
    assert len(batches) <= 10, [len(b) for b in batches]  # not 300 calls (nor 900 events)


def test_a_write_closed_then_chmodded_is_settled_then_metadata_only(rig: Rig):
    """Vim 9 and Neovim end ``:w`` with CLOSE_WRITE then ATTRIB; on real inotify events the
    debouncer must still release the save after ``settle_ms``, not the full quiet window."""
    p = rig.write("v.md", "v1")
    rig.settle()
    rig.sink.clear()
    with p.open("a") as f:
        f.write(" and more")
    os.chmod(p, 0o640)
    changes = [c for c in rig.settle() if c.path == p]
    assert [(c.settled, c.metadata) for c in changes][-2:] == [(True, False), (False, True)], changes
    delivered: list[Change] = []
    now = [0.0]
    deb = Debouncer(delivered.extend, quiet_ms=1500, settle_ms=200, clock=lambda: now[0])
    for c in changes:
        deb.submit(c)
    now[0] = 0.201
    assert deb.poll() == 1 and delivered == [up(p)]
    assert deb.ready_counts["settled"] == 1


def test_a_dead_observer_is_restarted_by_check(rig: Rig):
    observer = rig.watcher._roots[0].observer
    assert observer is not None
    observer.stop()
    observer.join(WAIT_S)
    assert not rig.status["alive"]
    rig.watcher.check()
    assert rig.failures == [(rig.root, "observer thread died")]
    assert rig.status["alive"]
    rig.sink.wait_change(up(rig.write("after.md")))
    rig.watcher.check()
    assert len(rig.failures) == 1  # healthy: nothing more to report


def test_a_dead_inotify_reader_thread_is_detected(rig: Rig):
    reader = watcher_mod._reader(rig.watcher._roots[0].observer)
    assert reader is not None
    cast(Any, reader).stop()  # what a crash of watchdog's reader looks like: observer alive, no events
    reader.join(WAIT_S)
    assert not rig.status["alive"]
    rig.watcher.check()
    assert rig.failures == [(rig.root, "inotify reader thread died")]
    rig.sink.wait_change(up(rig.write("after.md")))


def test_an_inotify_overflow_triggers_restart_and_failure(rig: Rig):
    # watchdog ≥ 7 only logs an overflow; a record from an unknown thread flags every inotify root.
    watchdog_log = logging.getLogger(watcher_mod._OVERFLOW_LOGGER)
    watchdog_log.warning("Inotify queue overflowed; filesystem events were lost")
    rig.watcher.check()
    assert rig.failures == [(rig.root, "inotify queue overflow")]
    assert rig.status["alive"]
    rig.sink.wait_change(up(rig.write("after.md")))


def test_root_deleted_then_recreated(rig: Rig):
    shutil.rmtree(rig.root)
    rig.sink.wait_change(Change("rescan", rig.root))
    rig.watcher.check()
    assert rig.failures == [(rig.root, "watch ended (root deleted or moved?)")]
    assert rig.status["alive"] is False
    assert str(rig.root) in (rig.status["error"] or "")
    rig.watcher.check()  # still missing: reported once, not on every check
    assert len(rig.failures) == 1
    rig.root.mkdir()
    rig.watcher.check()
    assert rig.failures[-1] == (rig.root, "root appeared")
    assert rig.status["alive"] and rig.status["error"] is None
    rig.sink.wait_change(up(rig.write("again.md")))


def test_overflow_is_seen_even_when_logging_is_set_to_error(tmp_path: Path):
    watchdog_log = logging.getLogger(watcher_mod._OVERFLOW_LOGGER)
    failures: list[tuple[Path, str]] = []
    w = Watcher([tmp_path], FILTER, lambda c: None, lambda r, why: failures.append((r, why)))
    watchdog_log.setLevel(logging.ERROR)
    try:
        w.start()
        watchdog_log.warning("Inotify queue overflowed; filesystem events were lost")
        w.check()
        w.stop()
        assert failures == [(tmp_path, "inotify queue overflow")]
        assert watchdog_log.level == logging.ERROR  # restored
    finally:
        w.stop()
        watchdog_log.setLevel(logging.NOTSET)


def test_missing_root_at_start_is_reported_and_picked_up_by_check(tmp_path: Path):
    root = tmp_path / "later"
    sink, failures = Sink(), []
    w = Watcher([root], FILTER, sink, lambda r, why: failures.append((r, why)))
    w.start()
    try:
        st = w.status()[str(root)]
        assert st["alive"] is False and st["error"] and str(root) in st["error"]
        root.mkdir()
        w.check()
        assert failures == [(root, "root appeared")]
        assert w.status()[str(root)]["alive"]
        p = root / "x.md"
        p.write_text("x")
        sink.wait_change(up(p))
    finally:
        w.stop()


def test_inotify_limit_falls_back_to_polling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    class Exhausted(InotifyObserver):
        def start(self) -> None:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(watcher_mod, "_native_observer", Exhausted)
    sink = Sink()
    w = Watcher([tmp_path], FILTER, sink, lambda r, why: None, poll_interval_s=0.05)
    w.start()
    try:
        st = w.status()[str(tmp_path)]
        assert st["backend"] == "polling" and st["alive"] and st["error"] is None
        p = tmp_path / "polled.md"
        p.write_text("x")
        sink.wait_change(up(p))
    finally:
        w.stop()


def test_a_symlinked_root_reports_paths_under_the_configured_root(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    sink = Sink()
    w = Watcher([link], FILTER, sink, lambda r, why: None)
    w.start()
    try:
        (real / "x.md").write_text("x")
        sink.wait_change(up(link / "x.md"))
    finally:
        w.stop()


def test_stop_is_idempotent_and_status_shows_not_alive(rig: Rig):
    rig.watcher.stop()
    rig.watcher.stop()
    assert rig.status["alive"] is False


# -- translate: the pure event → change rules ------------------------------------------------

R = Path("/w/root")


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (FileMovedEvent("/w/root/x.md.tmp", "/w/root/x.md"), [up(R / "x.md")]),
        (FileMovedEvent("/w/root/x.md", "/w/root/x.md~"), [Change("delete", R / "x.md")]),
        (FileMovedEvent("/w/root/a.md", "/w/root/b.md"), [Change("move", R / "a.md", R / "b.md")]),
        (FileMovedEvent("/w/root/a.txt", "/w/root/a.md"), [Change("delete", R / "a.txt"), up(R / "a.md")]),
        (FileMovedEvent("/w/root/a.md", "/w/root/.git/a.md"), [Change("delete", R / "a.md")]),
        (DirMovedEvent("/w/root/d", "/w/root/.git/d"), [Change("rescan", R / "d")]),
        (DirMovedEvent("/w/root/d/e", "/w/root/f/e", is_synthetic=True), []),
        (DirDeletedEvent("/w/root/node_modules"), []),
        (DirDeletedEvent("/w/root"), [Change("rescan", R)]),
        (FileOpenedEvent("/w/root/a.md"), []),
    ],
)
def test_translate(event, expected):
    assert translate(event, "/w/root", R, FILTER) == expected


@pytest.mark.parametrize(
    ("event", "settled", "metadata"),
    [
        (FileModifiedEvent("/w/root/a.md"), False, False),  # still writing: the full quiet window
        (FileClosedEvent("/w/root/a.md"), True, False),  # IN_CLOSE_WRITE: the writer is done
        (FileAttribEvent("/w/root/a.md"), False, True),  # IN_ATTRIB: keeps the window it finds
    ],
)
def test_translate_marks_what_an_upsert_says_about_the_writer(event, settled, metadata):
    (change,) = translate(event, "/w/root", R, FILTER)
    assert change == up(R / "a.md") and (change.settled, change.metadata) == (settled, metadata)


# -- PathFilter: globs on paths relative to the root -----------------------------------------

DEFAULT = PathFilter(("*.md", "*.markdown"), (".git/*", "node_modules/*", ".obsidian/*", ".trash/*"))


@pytest.mark.parametrize(
    ("rel", "indexed", "deletable"),
    [
        ("a.md", True, True),
        ("x/y/z/a.markdown", True, True),  # a name glob matches at any depth
        ("a.txt", False, True),  # deletes skip include (it may be indexed under an older config)
        ("a.MD", False, True),  # case-sensitive
        ("x/.git/a.md", False, False),  # ".git/*" excludes at any depth
        (".obsidian/workspace.md", False, False),
        ("q/node_modules/z/a.md", False, False),
        (".notes.md", False, False),  # hidden files: editors' temporaries look like this
        (".cursor/rules/a.md", False, False),  # hidden directories too, unless include names them
        ("x.md~", False, False),
        ("4913", False, False),
        (".x.md.swp", False, False),
        ("x.md.tmp", False, False),
        ("#x.md#", False, False),
        ("x.md___jb_old___", False, False),
    ],
)
def test_path_filter(rel: str, indexed: bool, deletable: bool):
    assert DEFAULT(rel) is indexed
    assert DEFAULT.accept_delete(rel) is deletable


def test_path_filter_anchors_dirs_and_globstar():
    f = PathFilter(("/memory/*.md", "bank/**/x.md"), ("drafts", "build/"))
    assert f("memory/2024-01-01.md") and not f("other/memory/a.md")  # "/" anchors at the root
    assert f("bank/x.md") and f("bank/a/b/x.md")  # "**/" may match nothing
    assert not f("memory/drafts/a.md") and not f.accept_dir("a/drafts")  # a name excludes a whole tree
    assert not f.accept_dir("build") and f.accept_dir("memory")
    assert PathFilter((), ())("anything/at/all.txt")  # empty include: every non-temp file


@pytest.mark.parametrize(
    "name", [".x.swp", ".x.swo", "x~", "4913", ".#x", "#x#", "a.tmp", "a___jb_tmp___", ".~lock"]
)
def test_is_editor_temp(name: str):
    assert is_editor_temp(name)
    assert not is_editor_temp("notes.md")


def test_bad_glob_names_the_key():
    with pytest.raises(ConfigError, match=r"watch\.exclude"):
        PathFilter(("*.md",), ("",))
