"""Debouncer: per-path coalescing, deadlines, batching and move semantics, on a fake clock."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.watch.debouncer import Change, Debouncer

A, B, C, T = Path("/r/a.md"), Path("/r/b.md"), Path("/r/c.md"), Path("/r/t.md")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> float:
        self.now += ms / 1000
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[Change]] = []

    def __call__(self, batch: list[Change]) -> None:
        self.batches.append(list(batch))

    @property
    def changes(self) -> list[Change]:
        return [c for b in self.batches for c in b]


def make(**kw):
    clock, rec = FakeClock(), Recorder()
    return Debouncer(rec, clock=clock, **kw), clock, rec


def up(p: Path) -> Change:
    return Change("upsert", p)


def rm(p: Path) -> Change:
    return Change("delete", p)


def mv(s: Path, d: Path) -> Change:
    return Change("move", s, d)


def test_events_on_one_path_coalesce_into_one_change():
    deb, clock, rec = make(quiet_ms=1500)
    for _ in range(5):
        deb.submit(up(A))
        clock.advance(100)
    assert deb.pending_count == 1
    assert deb.poll() == 0 and rec.batches == []
    clock.advance(1500)
    assert deb.poll() == 1
    assert rec.batches == [[up(A)]]
    assert deb.pending_count == 0


def test_each_event_resets_the_quiet_window():
    deb, clock, rec = make(quiet_ms=1500, max_delay_ms=10_000)
    deb.submit(up(A))
    clock.advance(1000)
    deb.submit(up(A))
    clock.advance(1499)
    assert deb.poll() == 0
    clock.advance(1)
    assert deb.poll() == 1 and rec.changes == [up(A)]


def test_max_delay_delivers_a_file_written_continuously():
    deb, clock, rec = make(quiet_ms=1500, max_delay_ms=5000)
    delivered_at = []
    for step in range(1, 25):  # a write every 500 ms for 12 s: never quiet
        deb.submit(up(A))
        clock.advance(500)
        if deb.poll():
            delivered_at.append(step * 500)
    # The first delivery is 5 s after the first write; the next group starts with the next write.
    assert delivered_at[:2] == [5000, 10000]
    assert all(b == [up(A)] for b in rec.batches)


def test_paths_ready_together_are_batched_and_capped():
    deb, clock, rec = make(quiet_ms=100, max_batch=256)
    paths = [Path(f"/r/f{i}.md") for i in range(1000)]
    for p in paths:
        deb.submit(up(p))
    clock.advance(100)
    assert deb.poll() == 1000
    assert [len(b) for b in rec.batches] == [256, 256, 256, 232]
    assert {c.path for c in rec.changes} == set(paths)


def test_only_due_paths_are_delivered():
    deb, clock, rec = make(quiet_ms=1000)
    deb.submit(up(A))
    clock.advance(600)
    deb.submit(up(B))
    clock.advance(400)
    assert deb.poll() == 1 and rec.changes == [up(A)]
    assert deb.pending_count == 1


def test_stop_cancels_pending_and_later_submits():
    deb, clock, rec = make()
    deb.submit(up(A))
    deb.submit(up(B))
    assert deb.stop() is True
    assert deb.pending_count == 0
    deb.submit(up(C))
    clock.advance(60_000)
    assert deb.poll() == 0 and deb.flush() == 0 and rec.batches == []


def test_flush_delivers_everything_now():
    deb, _, rec = make(quiet_ms=1500)
    deb.submit(up(A))
    deb.submit(Change("rescan", Path("/r/dir")))
    deb.submit(rm(B))
    assert deb.flush() == 3
    assert rec.batches == [[up(A), rm(B), Change("rescan", Path("/r/dir"))]]  # rescans last
    assert deb.pending_count == 0


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([mv(A, B), up(B)], [mv(A, B), up(B)]),  # move then edit dest: keep the cheap move
        ([up(A), mv(A, B)], [mv(A, B), up(B)]),  # edited then moved before indexing
        ([mv(A, B)], [mv(A, B)]),
        ([rm(A), up(A)], [up(A)]),  # Vim-style save: delete + create is one upsert
        ([up(A), rm(A)], [rm(A)]),
        ([mv(A, B), mv(B, C)], [mv(A, C), rm(B)]),  # b's old content was overwritten, then left
        ([mv(A, B), mv(B, A)], [up(A), rm(B)]),  # there and back: b's overwritten content goes
        ([mv(A, B), up(A)], [mv(A, B), up(A)]),  # a new file where the old one was
        ([mv(A, B), rm(B)], [rm(A), rm(B)]),
        ([mv(A, T), mv(B, A), mv(T, B)], [mv(A, B), up(A), rm(T)]),  # a swap: cycle broken by an upsert
    ],
)
def test_coalescing_rules(events, expected):
    deb, _, rec = make()
    for ev in events:
        deb.submit(ev)
    deb.flush()
    assert rec.changes == expected


def test_moves_are_ordered_so_no_move_reads_an_overwritten_path():
    deb, _, rec = make()
    deb.submit(mv(B, C))  # b → c, then a → b: b must be read before it is overwritten
    deb.submit(mv(A, B))
    deb.flush()
    assert rec.changes == [mv(B, C), mv(A, B)]


def test_a_move_joins_the_groups_of_both_paths_and_keeps_the_earliest_deadline():
    deb, clock, rec = make(quiet_ms=1000, max_delay_ms=3000)
    deb.submit(up(A))
    for _ in range(5):  # keep both paths busy past a's max delay
        clock.advance(500)
        deb.submit(up(B))
    deb.submit(mv(A, B))
    assert deb.pending_count == 2
    clock.advance(500)  # 3 s after a's first event: the merged group is due
    assert deb.poll() == 2
    assert rec.changes == [mv(A, B), up(B)]


def test_repeated_rescans_of_a_directory_coalesce():
    deb, clock, rec = make(quiet_ms=100)
    for _ in range(3):
        deb.submit(Change("rescan", Path("/r/d")))
    clock.advance(100)
    assert deb.poll() == 1 and rec.changes == [Change("rescan", Path("/r/d"))]


def test_change_validates_dest():
    with pytest.raises(ValueError, match="dest"):
        Change("move", A)
    with pytest.raises(ValueError, match="dest"):
        Change("upsert", A, B)


def test_bad_timings_are_refused():
    with pytest.raises(ValueError, match="max_delay_ms"):
        Debouncer(lambda b: None, quiet_ms=2000, max_delay_ms=1000)


def test_a_failing_callback_is_logged_and_later_batches_still_flow() -> None:
    calls: list[list[Change]] = []

    def on_ready(batch: list[Change]) -> None:
        calls.append(batch)
        if len(calls) == 1:
            raise RuntimeError("indexer exploded")

    clock = FakeClock()
    deb = Debouncer(on_ready, quiet_ms=10, clock=clock)
    deb.submit(up(A))
    clock.advance(10)
    with capture_logs() as logs:
        assert deb.poll() == 1
    assert [e["event"] for e in logs] == ["debouncer.callback_failed"]
    deb.submit(up(B))
    clock.advance(10)
    assert deb.poll() == 1
    assert calls == [[up(A)], [up(B)]]


def test_scheduler_thread_delivers_and_stops() -> None:
    got = threading.Event()
    batches: list[list[Change]] = []

    def on_ready(batch: list[Change]) -> None:
        batches.append(batch)
        got.set()

    deb = Debouncer(on_ready, quiet_ms=20, max_delay_ms=1000, batch_window_ms=10)
    deb.start()
    try:
        with pytest.raises(RuntimeError):
            deb.start()
        for i in range(50):
            deb.submit(up(Path(f"/r/{i}.md")))
        assert got.wait(5.0)
        assert deb.stop(timeout=5.0) is True
    finally:
        deb.stop()
    assert sum(len(b) for b in batches) == 50
    assert len(batches) <= 5  # one burst: a few calls, not 50


# -- the contract: applying delivered changes in order leaves index == disk -----------------


class Model:
    """A disk (path → content id) and an index fed by the debouncer under the worker's contract."""

    def __init__(self, strict_moves: bool) -> None:
        self.disk: dict[Path, int] = {}
        self.index: dict[Path, int] = {}
        self.queue: list[Change] = []
        self.strict = strict_moves  # True: a move trusts the symbolic plan (no re-read of dest)

    def sync(self, p: Path) -> None:
        if p in self.disk:
            self.index[p] = self.disk[p]
        else:
            self.index.pop(p, None)

    def apply(self, ch: Change) -> None:
        if ch.kind == "upsert":
            self.sync(ch.path)
        elif ch.kind == "delete":
            self.index.pop(ch.path, None)
        elif ch.kind == "move" and ch.dest is not None:
            if ch.path in self.index:
                self.index[ch.dest] = self.index.pop(ch.path)
                if not self.strict:
                    self.sync(ch.dest)
            else:
                self.sync(ch.dest)

    def drain(self, n: int | None = None) -> None:
        n = len(self.queue) if n is None else n
        for ch in self.queue[:n]:
            self.apply(ch)
        del self.queue[:n]


def _random_op(rng: random.Random, model: Model, paths: list[Path], counter: list[int]) -> Change | None:
    p, q = rng.sample(paths, 2)
    op = rng.choice(["write", "write", "delete", "move", "move", "chmod"])
    if op == "write":  # a write, or the close that ends one (settled: the short window)
        counter[0] += 1
        model.disk[p] = counter[0]
        return Change("upsert", p, settled=rng.random() < 0.3)
    if p not in model.disk:
        return None
    if op == "chmod":  # metadata only: the content is the same
        return Change("upsert", p, metadata=True)
    if op == "delete":
        del model.disk[p]
        return rm(p)
    model.disk[q] = model.disk.pop(p)
    return mv(p, q)


@pytest.mark.parametrize("strict", [True, False])
def test_random_histories_leave_the_index_equal_to_the_disk(strict):
    paths = [Path(f"/r/{n}.md") for n in "abcde"]
    for seed in range(1000):
        rng = random.Random(seed)
        model = Model(strict_moves=strict)
        clock = FakeClock()
        deb = Debouncer(model.queue.extend, quiet_ms=100, max_delay_ms=300, clock=clock, max_batch=3,
                        settle_ms=20)
        counter = [0]
        for _ in range(rng.randint(1, 40)):
            ch = _random_op(rng, model, paths, counter)
            if ch is not None:
                deb.submit(ch)
            clock.advance(rng.choice([0, 0, 30, 120]))
            deb.poll()
            # strict: the index applies at once; lax: a slow queue applies later, after more events.
            model.drain(None if strict else rng.randint(0, len(model.queue)))
        deb.flush()
        model.drain()
        assert model.index == model.disk, f"seed {seed}"


def test_a_settled_write_is_ready_after_settle_ms_not_the_quiet_window():
    deb, clock, rec = make(quiet_ms=1500, settle_ms=200)
    deb.submit(up(A))
    deb.submit(Change("upsert", A, settled=True))  # the writer closed the file
    clock.advance(199)
    assert deb.poll() == 0
    clock.advance(2)
    assert deb.poll() == 1 and rec.changes == [up(A)]


def test_a_write_after_the_close_brings_back_the_full_quiet_window():
    deb, clock, _rec = make(quiet_ms=1500, settle_ms=200)
    deb.submit(Change("upsert", A, settled=True))
    clock.advance(100)
    deb.submit(up(A))  # written again, not closed yet
    clock.advance(300)
    assert deb.poll() == 0
    clock.advance(1300)
    assert deb.poll() == 1


# -- metadata-only events (IN_ATTRIB) after a finished write --------------------------------


def closed(p: Path) -> Change:
    return Change("upsert", p, settled=True)


def attrib(p: Path) -> Change:
    return Change("upsert", p, metadata=True)


def test_vim_save_close_write_then_attrib_keeps_the_settle_window():
    """Vim 9 / Neovim ``:w``: MODIFY, ATTRIB, CLOSE_WRITE, ATTRIB (the mode set again after the close)."""
    deb, clock, rec = make(quiet_ms=1500, settle_ms=200)
    for ch in (up(A), attrib(A), closed(A), attrib(A)):
        deb.submit(ch)
    clock.advance(199)
    assert deb.poll() == 0
    clock.advance(2)
    assert deb.poll() == 1 and rec.changes == [up(A)]
    assert deb.ready_counts == {"settled": 1, "quiet": 0, "max_delay": 0, "flushed": 0}


def test_an_attrib_after_the_close_counts_as_activity_within_the_settle_window():
    deb, clock, _rec = make(quiet_ms=1500, settle_ms=200)
    deb.submit(closed(A))
    clock.advance(150)
    deb.submit(attrib(A))  # settle_ms counts again from here, but not the quiet window
    clock.advance(150)
    assert deb.poll() == 0
    clock.advance(51)
    assert deb.poll() == 1 and deb.ready_counts["settled"] == 1


def test_a_modify_after_close_and_attrib_brings_back_the_full_quiet_window():
    """Someone writes again after the save: the edit must not be read half-written."""
    deb, clock, rec = make(quiet_ms=1500, settle_ms=200)
    for ch in (closed(A), attrib(A), up(A)):
        deb.submit(ch)
    clock.advance(1499)
    assert deb.poll() == 0
    clock.advance(2)
    assert deb.poll() == 1 and rec.changes == [up(A)]
    assert deb.ready_counts["quiet"] == 1 and deb.ready_counts["settled"] == 0


def test_an_attrib_before_the_close_does_not_settle_a_write_in_progress():
    deb, clock, _rec = make(quiet_ms=1500, settle_ms=200)
    deb.submit(up(A))
    deb.submit(attrib(A))
    clock.advance(300)
    assert deb.poll() == 0  # still writing as far as the events say: the quiet window applies
    clock.advance(1201)
    assert deb.poll() == 1 and deb.ready_counts["quiet"] == 1


def test_an_attrib_alone_is_one_upsert_after_the_quiet_window():
    """A chmod/chown/touch on an untouched file: re-read once (the index finds the content unchanged
    and embeds nothing; a chmod that made the file unreadable must still be noticed)."""
    deb, clock, rec = make(quiet_ms=1500, settle_ms=200)
    deb.submit(attrib(A))
    clock.advance(1499)
    assert deb.poll() == 0
    clock.advance(2)
    assert deb.poll() == 1 and rec.changes == [up(A)]
    assert deb.ready_counts["quiet"] == 1


def test_an_attrib_keeps_the_delete_and_create_of_a_rename_save_as_one_upsert():
    """Vim with backupcopy=no: x.md renamed to the backup (delete x.md), a new x.md written, closed, chmod."""
    deb, clock, rec = make(quiet_ms=1500, settle_ms=200)
    for ch in (rm(A), up(A), closed(A), attrib(A)):
        deb.submit(ch)
    clock.advance(201)
    assert deb.poll() == 1 and rec.changes == [up(A)]


def test_only_an_unsettled_upsert_can_be_metadata_only():
    with pytest.raises(ValueError, match="metadata-only"):
        Change("upsert", A, settled=True, metadata=True)
    with pytest.raises(ValueError, match="delete"):
        Change("delete", A, metadata=True)


def test_ready_counts_name_max_delay_and_flush():
    deb, clock, _rec = make(quiet_ms=100, max_delay_ms=300)
    for _ in range(4):
        deb.submit(up(A))
        clock.advance(90)
    assert deb.poll() == 1  # written every 90 ms: only max_delay_ms releases it
    deb.submit(up(B))
    assert deb.flush() == 1
    assert deb.ready_counts == {"settled": 0, "quiet": 0, "max_delay": 1, "flushed": 1}
