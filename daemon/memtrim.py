"""Handing freed heap memory back to the kernel (glibc), so the daemon's RSS follows its real use.

Why: glibc keeps memory that was freed in the middle of its heaps, and in one
arena per thread that ever allocated (up to 8 x cores of them). A bulk
re-index frees a ~20 MB model session and the activations of 16 x 512-token
batches, but without help the daemon's RSS stays at its peak for the rest of
its life. Two calls fix that:

* :func:`limit_arenas` (``mallopt(M_ARENA_MAX, 2)``), once at start, before
  threads exist: the socket, query, worker and onnxruntime pool threads then
  share two arenas instead of each dirtying its own;
* :func:`trim` (``malloc_trim(0)``) after work that freed a lot: the model
  load, a bulk session's release. It costs a few ms and blocks no other thread
  for long (glibc trims one arena at a time).

Both are no-ops where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from functools import cache
from typing import Any

import structlog

log = structlog.get_logger(__name__)

M_ARENA_MAX = -8  # <malloc.h>
ARENAS = 2


@cache
def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim  # noqa: B018  (glibc only: raises AttributeError elsewhere)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for the process; True if glibc accepted it."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1)


def rss_bytes() -> int:
    """The process's resident set size (``VmRSS``), 0 where /proc is not there."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def trim(why: str) -> None:
    """Give the heap's free memory back to the kernel, and log how much that was."""
    libc = _libc()
    if libc is None:
        return
    before, t0 = rss_bytes(), time.monotonic()
    libc.malloc_trim(0)
    after = rss_bytes()
    log.info("memory.trimmed", why=why, rss_mb=round(after / 2**20), freed_mb=round((before - after) / 2**20),
             ms=round((time.monotonic() - t0) * 1000, 1))
