"""The ``status`` socket method's answer, typed: :class:`DaemonStatus` and its parts.

The daemon (:meth:`memoryd.daemon.app.Daemon.status`) gathers the parts; the
handler (:mod:`memoryd.daemon.api.admin`) sends :meth:`DaemonStatus.to_json`,
the one place the wire shape is written. That shape is a contract (the CLI,
the MCP server, the editor hooks and scripts read it): keys, values and their
order are those of the dict the daemon built before these types existed.

The index's own figures (``files``, ``chunks``, ``model``, ``cache``,
``index``, ``skipped``, ``vectors``, ``storage``) differ by backend and are
the library's to describe: :class:`memoryd.indexer.storage.index_status.IndexStatus`,
spread at the top level after ``uptime_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memoryd.daemon.api.jobs import JobState
from memoryd.daemon.watch.debouncer import ReadyReason
from memoryd.daemon.work.tasks import ReconcileState
from memoryd.indexer.storage.index_status import IndexStatus


@dataclass(frozen=True)
class WatchState:
    """A root's watcher: running or not, ``inotify`` or ``polling``, its last change (UTC ISO-8601), its error."""

    alive: bool
    backend: str | None
    last_event: str | None
    error: str | None

    @classmethod
    def from_watcher(cls, state: Mapping[str, Any]) -> WatchState:
        """From one root's entry of :meth:`memoryd.daemon.watch.watcher.Watcher.status`."""
        return cls(bool(state["alive"]), state.get("backend"), state.get("last_event"), state.get("error"))


@dataclass(frozen=True)
class RootStatus:
    """One configured root and its watcher (None: not watched, e.g. before the watcher started)."""

    path: str
    watch: WatchState | None = None

    @property
    def last_event(self) -> str | None:
        return self.watch.last_event if self.watch is not None else None

    def to_json(self) -> dict[str, Any]:
        w = self.watch
        if w is None:
            return {"path": self.path, "alive": False}
        return {"path": self.path, "alive": w.alive, "backend": w.backend, "last_event": w.last_event,
                "error": w.error}


@dataclass(frozen=True)
class RingSize:
    """One history ring (:mod:`memoryd.indexer.write.history`): its bytes, its bound and its record count."""

    bytes: int
    max_bytes: int
    records: int

    def to_json(self) -> dict[str, int]:
        return {"bytes": self.bytes, "max_bytes": self.max_bytes, "records": self.records}


def ring_sizes(sizes: Mapping[str, Mapping[str, int]]) -> dict[str, RingSize]:
    """:meth:`memoryd.indexer.write.history.History.sizes` as typed rings, in its order."""
    return {name: RingSize(s["bytes"], s["max_bytes"], s["records"]) for name, s in sizes.items()}


@dataclass(frozen=True)
class DaemonStatus:
    """The whole picture ``status`` answers (DESIGN: at least files, chunks, pending, reconciling, roots,
    model, cache, index; plus freshness). ``last_event`` and ``fresh`` are derived, never stored."""

    version: str
    pid: int
    uptime_s: float
    index: IndexStatus  # the index's figures, backend-specific (see the module docstring)
    pending: int  # files (or changes) queued or still in the debouncer
    reconciling: bool  # a sweep queued or running, or its chunks still waiting for vectors
    reconcile_progress: tuple[int, int]  # files done / to index in the running (or last) sweep
    roots: tuple[RootStatus, ...]
    reconcile: ReconcileState
    last_reconcile: str | None  # UTC ISO-8601
    last_error: str | None  # the worker's last failure
    last_watch_failure: str | None
    socket: str
    data_dir: str
    # Which window released each group of watched changes: a finished write's settle_ms ("settled"),
    # the full debounce_ms ("quiet"), max_delay_ms, or a shutdown flush.
    debounced: Mapping[ReadyReason, int]
    data_dir_bytes: int | None
    rss_bytes: int | None
    jobs: tuple[JobState, ...]  # long writes under way
    history: Mapping[str, RingSize]
    observe: Mapping[str, Any] | None = None  # daemon/api/observe.py: captures, extractions, the [llm] health
    model_build: Mapping[str, Any] | None = None  # a first start's model build, until ready (daemon/model_build.py)

    @property
    def last_event(self) -> str | None:
        """The latest change any root's watcher saw (ISO-8601 strings of one zone sort as times)."""
        events = [e for e in (r.last_event for r in self.roots) if e]
        return max(events) if events else None

    @property
    def missing_roots(self) -> tuple[RootStatus, ...]:
        """Roots the watcher cannot watch (deleted, not a folder, unreadable): their changes go unseen."""
        return tuple(r for r in self.roots if r.watch is not None and not r.watch.alive)

    @property
    def stale(self) -> tuple[str, ...]:
        """Why the index is not fresh, each state as it is: changes waiting, a sweep reading files, chunks
        still waiting for vectors (keyword search has them already), a root that is not watched."""
        why = [f"{self.pending} changes pending"] if self.pending else []
        phase = self.reconcile.state
        if phase == "indexing":
            why.append(f"reconciling: {self.reconcile.files_done}/{self.reconcile.files_total} files")
        elif phase != "idle":
            why.append(f"reconciling: {phase}")
        vectors = self.index.vectors.pending
        if vectors and phase != "indexing":
            why.append(f"vectors filling: {vectors} chunks (keyword search has them)")
        elif self.reconciling and phase == "idle" and not vectors:
            why.append("reconciling")  # a sweep flagged and not started yet
        why += [f"root {r.path} not watched: {r.watch.error if r.watch and r.watch.error else 'no watch'}"
                for r in self.missing_roots]
        if self.model_build is not None:
            why.append(f"{self.model_build['detail']}: vectors wait for it")
        return tuple(why)

    @property
    def fresh(self) -> bool:
        """Every change seen so far is searchable, and every root is watched (a missing root's changes
        are never seen, so an index that cannot see them is not fresh)."""
        return not self.stale

    @property
    def error(self) -> str | None:
        """The error to show now: a root that cannot be watched (it lasts until it is back), else the
        worker's last failure."""
        missing = self.missing_roots
        if missing and missing[0].watch is not None:
            return missing[0].watch.error or f"root {missing[0].path} is not watched"
        if self.model_build is not None and self.model_build.get("state") == "failed":
            return str(self.model_build["detail"])  # until a restart builds it: search ranks from keywords only
        return self.last_error

    def to_json(self) -> dict[str, Any]:
        """The wire form, key for key in the order the contract's clients have always seen."""
        return {
            "version": self.version, "pid": self.pid, "uptime_s": self.uptime_s,
            **self.index.to_json(), "pending": self.pending, "reconciling": self.reconciling,
            "reconcile_progress": list(self.reconcile_progress), "roots": [r.to_json() for r in self.roots],
            "reconcile": self.reconcile.to_json(),
            "last_event": self.last_event, "last_reconcile": self.last_reconcile,
            "last_error": self.error, "last_watch_failure": self.last_watch_failure,
            "socket": self.socket, "data_dir": self.data_dir,
            "debounced": dict(self.debounced), "fresh": self.fresh, "stale": list(self.stale),
            "data_dir_bytes": self.data_dir_bytes, "rss_bytes": self.rss_bytes,
            "jobs": [j.to_json() for j in self.jobs],
            "history": {name: ring.to_json() for name, ring in self.history.items()},
            **({"observe": dict(self.observe)} if self.observe is not None else {}),
            **({"model_build": dict(self.model_build)} if self.model_build is not None else {}),
        }
