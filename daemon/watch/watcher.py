"""Watch the memory roots with watchdog and turn OS events into :class:`Change` objects.

One observer per root (inotify on Linux, ``recursive=True``), so that each root
has its own backend, health and status. Translation (:func:`translate`):

- file created / modified / closed-after-write / attrib → ``upsert`` when the
  path filter accepts it (directory "modified" events are noise: ignored);
  closed-after-write is *settled* (the writer is done: the debouncer's short
  ``settle_ms`` window applies) and attrib is *metadata-only* (chmod, chown,
  utimes, link count: it neither finishes nor resumes a write, so Vim's
  ``CLOSE_WRITE`` then ``ATTRIB`` stays settled; a ``MODIFY`` after the close
  brings back the full ``debounce_ms``);
- file deleted → ``delete`` for any path that *could* be indexed
  (:meth:`PathFilter.accept_delete`: the include globs are skipped, the
  exclude and temp rules are not);
- file moved → ``move`` when both ends are accepted; only the destination →
  ``upsert dest`` (an editor's atomic save: ``x.md.tmp`` renamed over ``x.md``),
  plus ``delete src`` if the source could be indexed; only the source →
  ``delete src``;
- directory deleted, or moved (the real move, not watchdog's synthetic
  per-entry copies) → ``rescan`` of the old and new directory: a directory
  moved out of the root is a single event that names none of its files.
  watchdog also emits per-file moves/creates/deletes for these cases on
  inotify; they are translated as well (cheap moves, and the rescan repairs
  whatever they miss).

Failures (:meth:`Watcher.check`, called periodically by the daemon): a dead
observer thread, a watch that ended (root deleted or replaced) or an inotify
queue overflow restart that root's observer and call ``on_failure(root,
reason)``, because events were lost and only a reconcile is safe. Inotify
limits (``ENOSPC`` watches, ``EMFILE`` instances) fall back to polling for that
root. A missing root is reported in :meth:`Watcher.status` and retried by
``check``. Overflow is seen through watchdog's own log record (watchdog ≥ 7
rebuilds its watches and logs it but offers no callback; older versions drop
it silently); ``check`` also notices watchdog's inotify reader thread dying.
Known inotify limits, harmless here because every change is re-read from disk:
a rename into a directory created a moment before may arrive as delete +
upsert instead of a move, and a directory moved out of the root stays watched
under its old path (its later events name files that no longer exist).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from memoryd.daemon.watch.debouncer import Change
from memoryd.daemon.watch.pathfilter import PathFilter

log = structlog.get_logger(__name__)

_native_observer: Callable[[], BaseObserver] = Observer  # replaced in tests to simulate inotify limits
_NATIVE = "inotify" if sys.platform.startswith("linux") else "native"
_FALLBACK_ERRNOS = (errno.ENOSPC, errno.EMFILE)  # inotify watch / instance limits
_UPSERT_EVENTS = ("created", "modified", "closed", "attrib")
_OVERFLOW_LOGGER = "watchdog.observers.inotify_c"


def _rel(path: bytes | str, real_root: str) -> str | None:
    """POSIX path of ``path`` relative to the root ("" for the root itself); None outside it."""
    p = os.fsdecode(path)
    if not p:
        return None
    rel = os.path.relpath(p, real_root)
    if rel == ".":
        return ""
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return rel.replace(os.sep, "/")


def translate(event: FileSystemEvent, real_root: str, root: Path, accept: PathFilter) -> list[Change]:
    """The changes one watchdog event means, for a root watched at its resolved path ``real_root``.

    Changes name paths under ``root`` (the root as configured, maybe a symlink).
    """
    src = _rel(event.src_path, real_root)
    dest = _rel(event.dest_path, real_root) if event.event_type == "moved" else None
    if event.is_directory:
        if event.event_type not in ("deleted", "moved") or event.is_synthetic:
            return []
        return [Change("rescan", root / d) for d in (src, dest) if d is not None and _dir_ok(d, accept)]
    if src is None or not src:
        return []
    if event.event_type in _UPSERT_EVENTS:
        # "closed" is IN_CLOSE_WRITE: the writer finished, no need to wait out the quiet window.
        # "attrib" (IN_ATTRIB) changed metadata only: it keeps whatever window the path was in.
        if not accept(src):
            return []
        kind = event.event_type
        return [Change("upsert", root / src, settled=kind == "closed", metadata=kind == "attrib")]
    if event.event_type == "deleted":
        return [Change("delete", root / src)] if accept.accept_delete(src) else []
    if event.event_type != "moved":
        return []  # opened, closed without writing
    kept = dest if dest and accept(dest) else None  # the destination is a memory file
    if kept is not None and accept(src):
        return [Change("move", root / src, root / kept, settled=True)]
    out = [Change("delete", root / src)] if accept.accept_delete(src) else []
    # A finished file renamed into place (an editor's atomic save) is settled at once.
    return [*out, Change("upsert", root / kept, settled=True)] if kept is not None else out


def _dir_ok(rel: str, accept: PathFilter) -> bool:
    return rel == "" or accept.accept_dir(rel)


class _RootWatch(FileSystemEventHandler):
    """One root: its observer, its health, and the handler its observer thread calls."""

    def __init__(self, root: Path, accept: PathFilter, sink: Callable[[Change], None]) -> None:
        self.root = root
        self.real = os.path.realpath(root)
        self._accept = accept
        self._sink = sink
        self.observer: BaseObserver | None = None
        self.backend = _NATIVE
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the watched directory
        self.last_event: str | None = None
        self.error: str | None = None
        self.lost: str | None = None  # set from watchdog's threads when events were dropped

    def dispatch(self, event: FileSystemEvent) -> None:
        # Runs on the observer thread: an exception here would kill it, so none escapes.
        try:
            changes = translate(event, self.real, self.root, self._accept)
            for change in changes:
                self._sink(change)
        except Exception:
            log.exception("watcher.event_failed", root=str(self.root), event=repr(event))
            return
        if changes:
            self.last_event = datetime.now(UTC).isoformat(timespec="milliseconds")

    def health(self) -> str | None:
        """Why this root's watch must be restarted, or None when it is fine."""
        obs = self.observer
        if obs is None:
            return "root appeared" if os.path.isdir(self.root) else None
        if self.lost:
            return self.lost
        if not obs.is_alive():
            return "observer thread died"
        reader = _reader(obs)
        if reader is not None and not reader.is_alive():
            return "inotify reader thread died"
        if not obs.emitters or not all(e.is_alive() for e in obs.emitters):
            return "watch ended (root deleted or moved?)"
        try:
            st = os.stat(self.root)
        except OSError:
            return "root disappeared"
        return None if (st.st_dev, st.st_ino) == self.identity else "root was replaced"

    def alive(self) -> bool:
        obs = self.observer
        if obs is None or not obs.is_alive() or not obs.emitters:
            return False
        reader = _reader(obs)
        return all(e.is_alive() for e in obs.emitters) and (reader is None or reader.is_alive())


class _OverflowTap(logging.Handler):
    """Catches watchdog's "queue overflowed" record and flags the root whose thread logged it."""

    def __init__(self, flag: Callable[[int | None], None]) -> None:
        super().__init__(logging.WARNING)
        self._flag = flag

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self._flag(record.thread)


class Watcher:
    """Watches every root and feeds ``sink`` with changes (see the module docstring).

    ``sink`` runs on watchdog's threads and must not block (``Debouncer.submit``).
    ``on_failure(root, reason)`` runs on the thread that calls :meth:`check` when a watch lost
    events; ``on_appeared(root)`` when a root that was missing is there again and now watched
    (nothing was lost: there was nothing to watch; its files still need a sweep). Without
    ``on_appeared`` an appearance is reported as a failure "root appeared".
    ``poll_interval_s`` is the polling fallback's period. ``start``/``stop``/``check``
    must be called from one thread at a time; ``status`` from any.
    """

    def __init__(
        self,
        roots: Sequence[Path],
        path_filter: PathFilter,
        sink: Callable[[Change], None],
        on_failure: Callable[[Path, str], None],
        *,
        poll_interval_s: float = 30.0,
        follow_symlinks: bool = False,
        on_appeared: Callable[[Path], None] | None = None,
    ) -> None:
        self._roots = [
            _RootWatch(Path(os.path.abspath(r)), path_filter, sink) for r in dict.fromkeys(roots)
        ]
        self._on_failure = on_failure
        self._on_appeared = on_appeared
        self._poll_interval = poll_interval_s
        self._follow = follow_symlinks
        self._tap = _OverflowTap(self._flag_overflow)
        self._saved_level = logging.NOTSET
        self._started = False

    def start(self) -> None:
        """Watch every root; a missing root is only reported (``status``) and retried by ``check``."""
        if self._started:
            return
        self._started = True
        tap_logger = logging.getLogger(_OVERFLOW_LOGGER)
        # The tap must see WARNING even when the daemon logs at ERROR; memoryd's own
        # handler still filters what is printed by its level.
        self._saved_level = tap_logger.level
        if tap_logger.getEffectiveLevel() > logging.WARNING:
            tap_logger.setLevel(logging.WARNING)
        tap_logger.addHandler(self._tap)
        for rw in self._roots:
            self._start_root(rw)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every observer and join their threads (each within ``timeout`` seconds)."""
        if self._started:
            tap_logger = logging.getLogger(_OVERFLOW_LOGGER)
            tap_logger.removeHandler(self._tap)
            tap_logger.setLevel(self._saved_level)
        self._started = False
        observers = [rw.observer for rw in self._roots if rw.observer is not None]
        for rw in self._roots:
            rw.observer = None
        for obs in observers:
            obs.stop()
        for obs in observers:
            _join(obs, timeout)

    def check(self) -> None:
        """Restart dead or overflowed watches, start late roots, and report each via ``on_failure``."""
        if not self._started:
            return
        for rw in self._roots:
            reason = rw.health()
            if reason is None:
                continue
            old, rw.observer = rw.observer, None
            if old is not None:
                old.stop()
                _join(old, 5.0)
            self._start_root(rw)
            if old is None and rw.observer is None:
                continue  # still unavailable: already reported by status(), nothing was lost since
            if old is None and self._on_appeared is not None:
                log.info("watcher.root_appeared", root=str(rw.root), backend=rw.backend)
                self._on_appeared(rw.root)
                continue
            log.error("watcher.restarted", root=str(rw.root), reason=reason, backend=rw.backend,
                      alive=rw.alive(), error=rw.error)
            self._on_failure(rw.root, reason)

    def status(self) -> dict[str, dict[str, Any]]:
        """Per root as configured: ``alive``, ``backend`` (inotify|polling), ``last_event``, ``error``.

        ``last_event`` is the UTC ISO-8601 time of the last event that produced a change.
        """
        return {
            str(rw.root): {
                "alive": rw.alive(), "backend": rw.backend, "last_event": rw.last_event, "error": rw.error,
            }
            for rw in self._roots
        }

    def _start_root(self, rw: _RootWatch) -> None:
        rw.lost = None
        rw.real = os.path.realpath(rw.root)
        try:
            st = os.stat(rw.real)
            if not os.path.isdir(rw.real):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(rw.root))
            try:
                rw.observer, rw.backend = self._observe(rw, _native_observer()), _NATIVE
            except OSError as exc:
                if exc.errno not in _FALLBACK_ERRNOS:
                    raise
                log.warning("watcher.polling_fallback", root=str(rw.root), error=str(exc),
                            interval_s=self._poll_interval)
                polling = PollingObserver(timeout=self._poll_interval)
                rw.observer, rw.backend = self._observe(rw, polling), "polling"
        except OSError as exc:
            error = f"cannot watch {rw.root}: {exc.strerror or exc}"
            if error != rw.error:  # check() retries every few seconds: log each new problem once
                log.warning("watcher.root_unavailable", root=str(rw.root), error=error)
            rw.observer, rw.error = None, error
            return
        rw.identity, rw.error = (st.st_dev, st.st_ino), None
        log.info("watcher.started", root=str(rw.root), backend=rw.backend)

    def _observe(self, rw: _RootWatch, obs: BaseObserver) -> BaseObserver:
        """Schedule and start ``obs`` on the root; on failure stop its threads and re-raise."""
        try:
            obs.schedule(rw, rw.real, recursive=True, follow_symlink=self._follow)
            obs.start()
        except BaseException:
            obs.stop()
            _join(obs, 5.0)
            raise
        return obs

    def _flag_overflow(self, thread_id: int | None) -> None:
        """Called on watchdog's inotify thread: mark the root it serves (all inotify roots if unknown)."""
        native = [rw for rw in self._roots if rw.backend == _NATIVE and rw.observer is not None]
        mine = [rw for rw in native if _reader_id(rw.observer) == thread_id]
        for rw in mine or native:
            rw.lost = "inotify queue overflow"


def _reader(obs: BaseObserver | None) -> threading.Thread | None:
    """watchdog ≥ 7 gives each InotifyObserver its own reader thread (a private attribute).

    It can die on its own (a watchdog warning turned into an error by ``-W error``)
    while the observer thread lives on, silently delivering nothing.
    """
    reader = getattr(obs, "_inotify_fd", None)
    return reader if isinstance(reader, threading.Thread) else None


def _reader_id(obs: BaseObserver | None) -> int | None:
    reader = _reader(obs)
    return reader.ident if reader is not None else None


def _join(obs: BaseObserver, timeout: float) -> None:
    if obs.ident is not None:  # never started: stop() already joined its helper threads
        obs.join(timeout)
        if obs.is_alive():
            log.warning("watcher.stop_timeout", timeout_s=timeout)
