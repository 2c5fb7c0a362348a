"""A short soak in CI: ~1,000 edits in 15 s against a subprocess daemon while two clients search.

The full run (20,000 edits over 10 minutes, RSS slope) is ``python bench/soak.py``;
this one keeps the harness from rotting and catches a fast leak: a file
descriptor or a thread per rename, per batch or per connection shows as growth
even in 1,000 edits.

One growth is legitimate: APScheduler's worker pool starts a thread only when a
job fires while every pool thread is busy, so it grows during the first minute
up to the number of jobs that overlap, and never beyond the scheduler's
:data:`SCHEDULER_JOBS` jobs (each has ``max_instances=1``). The 10-minute run
shows the plateau (17 threads from the first sample to the last).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCHEDULER_JOBS = 4  # daemon/work/scheduler.py: reconcile, snapshot, maintenance, health


def _soak() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # soak.py imports its siblings _common and chaos as a script does
    return importlib.import_module("soak")


def _halves(samples: list[dict[str, Any]], key: str) -> tuple[int, int]:
    """(max over the first half of the samples, min over the second half): a leaked descriptor never goes
    away, so it raises every later sample; one open for a moment (a client's socket, the embedding cache's
    short-lived connection) shows in one sample only and is not a leak."""
    mid = len(samples) // 2
    return max(s[key] for s in samples[:mid]), min(s[key] for s in samples[mid:])


@pytest.mark.slow
def test_short_soak_leaks_nothing_and_answers_every_search() -> None:
    res = _soak().run_soak(edits=1000, minutes=0.25, clients=2, sample_s=2.5, corpus=None, n_generated=40,
                           think_ms=10, sample_files=100, rebuild=False, echo=False)
    samples = res["samples"]
    assert res["edits"] == 1000 and len(samples) >= 5
    assert res["errors"] == 0, f"failures during the soak: {res['error_samples']}"
    assert all(s["queries"] > 0 for s in samples), "a window went without a single answered search"
    assert res["queries"] > 200
    fd_warm, fd_late = _halves(samples, "fds")
    assert fd_late <= fd_warm + 1 and res["fds_last"] <= res["fds_first"] + 2, f"fd growth: {samples}"
    threads = [s["threads"] for s in samples]
    assert max(threads) <= threads[0] + SCHEDULER_JOBS, f"thread growth beyond the scheduler's pool: {threads}"
    assert res["markers_missing"] == [] and res["markers_checked"] > 20
    assert res["vectors_minus_chunks"] == 0
    assert res["clean_exit"] == 0
