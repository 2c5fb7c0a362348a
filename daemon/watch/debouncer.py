"""Coalesce file-system changes per path and hand them on in batches once they settle.

A path is *ready* when no event touched it for ``quiet_ms``, or when
``max_delay_ms`` passed since its first pending event (a file written
continuously is still indexed every few seconds). Ready changes are delivered
in batches through ``on_ready(list[Change])``, so a ``git checkout`` of 1,000
files is a handful of calls. One scheduler thread waits on a condition variable
over a heap of deadlines: no timer (thread) per path.

What a delivered :class:`Change` asks of the indexer (the contract):

- ``upsert(p)``: ``p`` was created or changed: make the index match the file on
  disk *when it is applied* (if it is gone by then, remove it).
- ``delete(p)``: ``p`` is gone: remove it from the index.
- ``move(src, dest)``: the file at ``src`` is now at ``dest``: move its chunks
  (no re-embedding), then sync ``dest`` with disk by content hash (the content
  may differ: a slow index queue may have re-read ``src`` after the rename).
  When ``src`` is not indexed, just sync ``dest``. Either way ``src`` leaves
  the index.
- ``rescan(dir)``: events below ``dir`` were lost (directory deleted or moved):
  reconcile that subtree with disk.

Coalescing: changes that share a path form a *group*, replayed on symbolic
contents (each path starts holding "what the index has for it") and reduced to
moves first (ordered so that no move reads a path an earlier one overwrote;
a rename cycle is broken by an upsert), then upserts and deletes. So
``move a→b`` then ``modify b`` stays ``move a→b, upsert b``; ``delete x`` then
``create x`` (Vim's save) is one ``upsert x``; ``a→b→c`` is ``move a→c,
delete b``; a path renamed away and back is still synced (the index may have
re-read it in between). A group is never split across batches, groups are
delivered in the order they became ready, and ``rescan`` changes come after
the file changes of a batch. Guarantee (tested on random histories): applying
every delivered change in order, under the contract above, leaves the index
equal to the disk once events stop, even when the index applies them late.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

log = structlog.get_logger(__name__)

ChangeKind = Literal["upsert", "delete", "move", "rescan"]
#: Why a group was delivered: its settle window (a finished write) or full quiet window passed,
#: ``max_delay_ms`` capped a path that kept changing, or :meth:`Debouncer.flush` emptied the queue.
ReadyReason = Literal["settled", "quiet", "max_delay", "flushed"]
READY_REASONS: tuple[ReadyReason, ...] = ("settled", "quiet", "max_delay", "flushed")


@dataclass(frozen=True)
class Change:
    """One change to apply to the index; ``dest`` is set for (and only for) ``move``."""

    kind: ChangeKind
    path: Path
    dest: Path | None = None
    #: The writer is done with the path (it closed the file after writing, or renamed a finished
    #: file into place): the path is ready after ``settle_ms`` instead of the full quiet window.
    settled: bool = field(default=False, compare=False)
    #: Only the file's metadata changed (inotify ``IN_ATTRIB``: chmod, chown, utimes, a new hard
    #: link). That says nothing about whether a writer is busy, so the event leaves the group's
    #: settled flag as it was: Vim's save ends with ``CLOSE_WRITE`` then ``ATTRIB``, and the
    #: ``ATTRIB`` must not turn a finished write back into one that waits the full quiet window.
    #: Alone (a ``chmod``) it starts an unsettled group: the re-read finds the content unchanged.
    metadata: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if (self.kind == "move") != (self.dest is not None):
            raise ValueError(f"Change {self.kind} {self.path}: dest must be given for 'move' and only for it")
        if self.metadata and (self.kind != "upsert" or self.settled):
            raise ValueError(f"Change {self.kind} {self.path}: only an unsettled 'upsert' can be metadata-only")


@dataclass(frozen=True)
class _Slot:
    """What a path holds after the group's events: ``origin``'s indexed content, maybe edited.

    ``origin`` None means content that only the disk has (the path must be synced).
    """

    origin: Path | None
    dirty: bool


@dataclass(eq=False)
class _Group:
    first: float  # clock time of the first pending event (max_delay counts from here)
    last: float  # clock time of the latest event (quiet_ms counts from here)
    state: dict[Path, _Slot | None] = field(default_factory=dict)  # None: nothing at that path
    rescan: Path | None = None
    alive: bool = True
    settled: bool = False  # the latest event said the writer is done

    def apply(self, ch: Change) -> None:
        if ch.kind == "upsert":
            cur = self.state.get(ch.path, _Slot(ch.path, False))
            self.state[ch.path] = _Slot(cur.origin if cur else None, True)
        elif ch.kind == "delete":
            self.state[ch.path] = None
        elif ch.kind == "move" and ch.dest is not None:
            moved = self.state.get(ch.path, _Slot(ch.path, False))
            self.state[ch.path] = None
            self.state[ch.dest] = moved

    def plan(self) -> list[Change]:
        """The group's changes reduced to: ordered moves, then upserts, then deletes."""
        if self.rescan is not None:
            return [Change("rescan", self.rescan)]
        pending = {p: s.origin for p, s in self.state.items() if s and s.origin not in (None, p)}
        carried = set(pending.values())
        deletes = [Change("delete", p) for p, s in self.state.items() if s is None and p not in carried]
        # A path back at its own origin (renamed there and back) is still synced: the index may
        # have re-read it mid-rename from an older batch still in its queue.
        upserts = {p: None for p, s in self.state.items() if s and (s.dirty or s.origin in (None, p))}
        moves: list[Change] = []
        ready = deque(d for d in pending if d not in carried)
        while pending:
            if not ready:  # only rename cycles left: give up one move, sync its dest instead
                dest = next(iter(pending))
                upserts[dest] = None
            else:
                dest = ready.popleft()
                moves.append(Change("move", pending[dest], dest))
            src = pending.pop(dest)
            carried.discard(src)
            if src in pending:  # the move that writes into src may go now that src was read
                ready.append(src)
        return [*moves, *(Change("upsert", p) for p in upserts), *deletes]


def _touched(ch: Change) -> tuple[Path, ...]:
    return (ch.path,) if ch.dest is None else (ch.path, ch.dest)


class Debouncer:
    """Per-path debouncing with batched delivery; see the module docstring for the contract.

    Times are milliseconds; ``clock`` returns seconds (monotonic). ``submit`` is
    thread-safe and never blocks on ``on_ready``. ``on_ready`` is never called
    concurrently with itself (scheduler thread, :meth:`poll` and :meth:`flush`
    take turns); an exception from it is logged and the batch dropped (the
    daemon's periodic reconcile repairs the index). Tests drive it with a fake
    ``clock`` and :meth:`poll` instead of starting the thread.
    """

    def __init__(
        self,
        on_ready: Callable[[list[Change]], None],
        quiet_ms: int = 1500,
        max_delay_ms: int = 5000,
        clock: Callable[[], float] = time.monotonic,
        batch_window_ms: int = 50,
        max_batch: int = 256,
        settle_ms: int | None = None,
    ) -> None:
        settle_ms = quiet_ms if settle_ms is None else min(settle_ms, quiet_ms)
        if not 0 <= quiet_ms <= max_delay_ms or batch_window_ms < 0 or max_batch < 1 or settle_ms < 0:
            raise ValueError(
                f"Debouncer: need 0 <= quiet_ms ({quiet_ms}) <= max_delay_ms ({max_delay_ms}), "
                f"batch_window_ms ({batch_window_ms}) >= 0, settle_ms ({settle_ms}) >= 0 "
                f"and max_batch ({max_batch}) >= 1"
            )
        self._on_ready = on_ready
        self._quiet = quiet_ms / 1000
        self._settle = settle_ms / 1000
        self._max_delay = max_delay_ms / 1000
        self._window = batch_window_ms / 1000
        self._max_batch = max_batch
        self._clock = clock
        self._cond = threading.Condition()
        self._deliver_lock = threading.Lock()  # held across pop + on_ready: batches stay in order
        self._heap: list[tuple[float, int, _Group]] = []
        self._seq = itertools.count()
        self._by_path: dict[Path, _Group] = {}
        self._rescans: dict[Path, _Group] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._ready_by: dict[ReadyReason, int] = dict.fromkeys(READY_REASONS, 0)

    @property
    def pending_count(self) -> int:
        """Paths (and rescan directories) waiting to be delivered."""
        with self._cond:
            return len(self._by_path) + len(self._rescans)

    @property
    def ready_counts(self) -> dict[ReadyReason, int]:
        """Groups delivered so far, by the window that released them (see :data:`ReadyReason`).

        Daemon status shows it, so that a save that took the full quiet window instead of the
        settle window is visible without timing anything.
        """
        with self._cond:
            return dict(self._ready_by)

    def submit(self, change: Change) -> None:
        """Record one change now; ignored after :meth:`stop`."""
        now = self._clock()
        with self._cond:
            if self._stopping:
                return
            group = self._rescan_group(change.path, now) if change.kind == "rescan" else self._merge(change, now)
            group.last = now
            if change.metadata:
                return  # neither finishes nor resumes a write: the group keeps its window
            if change.settled and not group.settled:
                group.settled = True
                self._push(group)  # its deadline moved earlier than the one already in the heap
            group.settled = change.settled

    def _merge(self, change: Change, now: float) -> _Group:
        touched = _touched(change)
        groups = list({id(g): g for p in touched if (g := self._by_path.get(p))}.values())
        if len(groups) == 1:
            group = groups[0]
        else:
            group = _Group(first=min((g.first for g in groups), default=now), last=now)
            for old in groups:  # disjoint groups commute: concatenating their states is exact
                old.alive = False
                group.state.update(old.state)
            self._by_path.update(dict.fromkeys(group.state, group))
            self._push(group)
        group.apply(change)
        self._by_path.update(dict.fromkeys(touched, group))
        return group

    def _rescan_group(self, directory: Path, now: float) -> _Group:
        group = self._rescans.get(directory)
        if group is None:
            group = self._rescans[directory] = _Group(first=now, last=now, rescan=directory)
            self._push(group)
        return group

    def _deadline(self, g: _Group) -> float:
        quiet = self._settle if g.settled else self._quiet
        return min(g.last + quiet, g.first + self._max_delay)

    def _reason(self, g: _Group, now: float) -> ReadyReason:
        """Which window released ``g`` at ``now`` (it is due, or else being flushed early)."""
        window_end = g.last + (self._settle if g.settled else self._quiet)
        if now < window_end and now < g.first + self._max_delay:
            return "flushed"
        if g.first + self._max_delay < window_end:
            return "max_delay"
        return "settled" if g.settled else "quiet"

    def _push(self, g: _Group) -> None:
        heapq.heappush(self._heap, (self._deadline(g), next(self._seq), g))
        self._cond.notify()  # the scheduler may be sleeping until a later deadline

    def _pop_ready(self, now: float) -> list[_Group]:
        """Remove and return, in deadline order, the groups due at ``now``."""
        ready: list[_Group] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, g = heapq.heappop(self._heap)
            if not g.alive:
                continue
            if self._deadline(g) > now:  # events came since it was pushed: wait longer
                self._push(g)
                continue
            g.alive = False
            self._ready_by[self._reason(g, self._clock() if math.isinf(now) else now)] += 1
            if g.rescan is not None:
                del self._rescans[g.rescan]
            for p in g.state:
                del self._by_path[p]
            ready.append(g)
        return ready

    def poll(self, now: float | None = None) -> int:
        """Deliver, in this thread, every group due at ``now`` (default: the clock); returns #changes."""
        with self._deliver_lock:
            with self._cond:
                groups = self._pop_ready(self._clock() if now is None else now)
            return self._deliver(groups)

    def flush(self) -> int:
        """Deliver everything pending now, due or not (shutdown: finish the batch in hand)."""
        return self.poll(math.inf)

    def _deliver(self, groups: Sequence[_Group]) -> int:
        plans = [g.plan() for g in groups if g.rescan is None] + [g.plan() for g in groups if g.rescan]
        batch: list[Change] = []
        total = 0
        for changes in plans:
            if batch and len(batch) + len(changes) > self._max_batch:
                total += self._call(batch)
                batch = []
            batch.extend(changes)
        return total + (self._call(batch) if batch else 0)

    def _call(self, batch: list[Change]) -> int:
        try:
            self._on_ready(batch)
        except Exception:
            log.exception("debouncer.callback_failed", changes=len(batch))
        return len(batch)

    def start(self) -> None:
        """Start the scheduler thread (real clock only). Raises RuntimeError if started twice."""
        with self._cond:
            if self._thread is not None:
                raise RuntimeError("Debouncer already started")
            self._thread = threading.Thread(target=self._run, name="memoryd-debouncer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Cancel everything pending and join the thread; False if it is still busy in ``on_ready``."""
        with self._cond:
            self._stopping = True
            cancelled = len(self._by_path) + len(self._rescans)
            self._heap.clear()
            self._by_path.clear()
            self._rescans.clear()
            self._cond.notify_all()
        if cancelled:
            log.info("debouncer.cancelled", paths=cancelled)
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    # Wait a batch window past the first deadline: paths of one burst go out together.
                    wake = self._heap[0][0] + self._window if self._heap else None
                    delay = None if wake is None else wake - self._clock()
                    if delay is not None and delay <= 0:
                        break
                    self._cond.wait(delay)
                if self._stopping:
                    return
            self.poll()
