"""A socket call that may take minutes (``import``): no fixed wall, a progress bar, a stall check.

The daemon runs a long write in slices and reports how far it has got in
``status.jobs`` (:mod:`memoryd.daemon.api.jobs`). This client makes the call on
one connection with no short timeout and, meanwhile, reads ``status`` on a
second one: it shows the count (a tqdm bar on a terminal) and gives up only
when the count has not moved for :data:`STALL_S` seconds — a slow machine
doing real work is waited for; a daemon that stopped making progress is not.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from memoryd.indexer.errors import DaemonError

STALL_S = 60.0
POLL_S = 0.5
_NO_WALL_S = 7 * 24 * 3600.0  # the call's own socket timeout: the stall check decides instead


def call_with_progress(socket_path: str | os.PathLike[str], method: str, params: dict[str, Any], kind: str,
                       stall_s: float = STALL_S, progress: Callable[[int, int], object] | None = None) -> Any:
    """``method(params)`` on the daemon, waiting as long as its job of ``kind`` makes progress;
    ``progress(done, total)`` gets the job's counts instead of a bar of its own (a caller drawing one bar
    over several calls)."""
    from memoryd.daemon.client.rpc_client import Client

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            with Client(socket_path, timeout=_NO_WALL_S) as client:
                box["result"] = client.call(method, params)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"memoryd-{method}", daemon=True)
    worker.start()
    _watch(worker, socket_path, kind, stall_s, progress)
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _watch(worker: threading.Thread, socket_path: str | os.PathLike[str], kind: str, stall_s: float,
           progress: Callable[[int, int], object] | None = None) -> None:
    from tqdm import tqdm

    from memoryd.daemon.client.rpc_client import Client

    tqdm.monitor_interval = 0  # no monitor thread: the bar is updated from this loop only
    last, moved = -1, time.monotonic()
    bar: Any = None
    with Client(socket_path, timeout=10.0) as status:
        while worker.is_alive():
            worker.join(POLL_S)
            if not worker.is_alive():
                break
            job = _job(status, kind)
            if job is not None:
                if progress is not None:
                    progress(int(job["done"]), int(job["total"]))
                else:
                    if bar is None:
                        bar = tqdm(total=job["total"], unit="entry", desc=kind, file=_terminal(), leave=False,
                                   disable=not sys.stderr.isatty())
                    bar.update(job["done"] - bar.n)
                if job["done"] != last:
                    last, moved = job["done"], time.monotonic()
            if time.monotonic() - moved > stall_s:
                raise DaemonError(f"memoryd made no progress on {kind} for {stall_s:g} s; see `memoryd status` "
                                  "and the daemon's log")
    if bar is not None:
        bar.close()


def _terminal() -> Any:
    """The real stderr for the bar: the CLI wraps stderr so that untrusted text cannot send escapes
    (:mod:`memoryd.daemon.client.termsafe`), which would print the bar's own carriage returns as ``\\x0d``;
    the bar writes only its label and counts."""
    return getattr(sys.stderr, "inner", sys.stderr)


def _job(status: Any, kind: str) -> dict[str, Any] | None:
    """The first running job of ``kind`` in ``status`` (None if none yet, or status is not answering)."""
    try:
        jobs = status.call("status").get("jobs") or []
    except DaemonError:
        return None
    return next((j for j in jobs if j.get("kind") == kind), None)
