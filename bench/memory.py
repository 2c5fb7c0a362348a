#!/usr/bin/env python3
"""The daemon's memory over a long day: bulk index, line fill, a query burst, idle; against a fresh start.

    python bench/memory.py [--files 2000] [--queries 1000] [--idle-s 600] [--seed 0]
    python bench/memory.py --locomo [EVAL_DIR] ...   # the older LoCoMo run: first start, warm, bulk re-index

Issue #42's run (the default): ``--files`` generated notes (``bench/_common.generate_notes``:
daily files and topic notes, 3-8 lines each) in one temp root, the default model
(e5-small, the user's built model cache: the build itself is ``bench/model_build.py``'s),
and ``memoryd run`` as a subprocess, its ``/proc/PID/status`` sampled every 50 ms:

1. **after bulk index**: empty data dir; until ``status`` says every file is in and no
   vector is pending (RSS then, and the peak);
2. **after line fill**: until no chunk waits for its line vectors (filled when idle);
3. **after the query burst**: ``--queries`` hybrid searches over one connection;
4. **after idle**: ``--idle-s`` seconds later (issue #42 asks for 10 minutes);

then the daemon is stopped and a **fresh start** on the same files and data dir is
measured the same way once idle and ``--idle-s`` later. The verdicts: idle after the
work within 1.2x the fresh start's idle, and at most 250 MB.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import (
    EVAL_DIR_HELP,
    Daemon,
    bench_tmp,
    fmt,
    generate_notes,
    is_idle,
    loadavg,
    print_table,
    remove_tree,
    summary,
    wait_until,
)
from query_latency import copy_corpus, rewrite_everything

MB = 1024 * 1024


def proc_status(pid: int) -> dict[str, int]:
    """``VmRSS``, ``RssAnon``, ``VmHWM`` of ``pid`` in bytes ({} once it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "RssAnon", "VmHWM"):
                    out[key] = int(rest.split()[0]) * 1024
    except OSError:
        return {}
    return out


def children_rss(pid: int) -> int:
    """Summed VmRSS of ``pid``'s child processes (one level: a model build is a direct child)."""
    total = 0
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return 0
    for kid in kids:
        total += proc_status(kid).get("VmRSS", 0)
    return total


class Sampler:
    """Samples a process every ``interval`` s on a thread: peak own RSS, peak own+children RSS."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_tree = 0
        self.peak_children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            own = proc_status(self.pid).get("VmRSS", 0)
            kids = children_rss(self.pid)
            self.peak_children = max(self.peak_children, kids)
            self.peak_tree = max(self.peak_tree, own + kids)


def mb(x: int | float) -> float:
    return round(x / MB, 1)


def snapshot(d: Daemon) -> dict[str, float]:
    assert d.proc is not None
    st = proc_status(d.proc.pid)
    return {"rss_mb": mb(st.get("VmRSS", 0)), "anon_mb": mb(st.get("RssAnon", 0)), "hwm_mb": mb(st.get("VmHWM", 0))}


def first_start(tmp: Path, root: Path, data: Path, env: dict[str, str], settle_s: float) -> dict[str, Any]:
    with Daemon(tmp, [root], data, name="first", extra_env=env) as d:
        assert d.proc is not None
        with Sampler(d.proc.pid) as s:
            st = d.wait_idle(timeout=1800)
            idle_s = time.perf_counter() - d.started_at
            at_idle = snapshot(d)
            time.sleep(settle_s)
            end = snapshot(d)
        return {"idle_s": round(idle_s, 1), "chunks": st["chunks"], "files": st["files"], "model": st["model"]["id"],
                "peak_mb": end["hwm_mb"], "peak_tree_mb": mb(s.peak_tree), "peak_child_mb": mb(s.peak_children),
                "at_idle_mb": at_idle["rss_mb"], "after_settle_mb": end["rss_mb"], "settle_s": settle_s}


def warm_start(tmp: Path, root: Path, data: Path, env: dict[str, str], files: list[Path], questions: list[str],
               settle_s: float, release_timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Daemon(tmp, [root], data, name="warm", extra_env=env) as d:
        assert d.proc is not None
        with Sampler(d.proc.pid) as s:
            d.wait_idle(timeout=600)
            out["ready_s"] = round(time.perf_counter() - d.started_at, 1)
            time.sleep(settle_s / 6)
            out["idle"] = snapshot(d)
            with d.client() as c:
                for q in questions[:20]:
                    c.call("search", {"query": q, "k": 8})
                lat = []
                for q in questions:
                    t0 = time.perf_counter()
                    c.call("search", {"query": q, "k": 8})
                    lat.append(time.perf_counter() - t0)
            out["query"] = summary(lat, 1000, 2)
            out["after_queries"] = snapshot(d)
            out["bulk"] = bulk_reindex(d, files, release_timeout)
            out["peak_tree_mb"] = mb(s.peak_tree)
    return out


AFTER_BULK_S = 60.0  # issue #30: this long after bulk embedding ends, RSS is back within 1.2x the warm idle


def bulk_reindex(d: Daemon, files: list[Path], release_timeout: float) -> dict[str, Any]:
    released_before = len(d.events("model.bulk_session_released"))
    t0 = time.perf_counter()
    with d.client() as c:
        rewrite_everything(files)
        wait_until(lambda: not is_idle(c.call("status")), 60, "the daemon to start re-indexing", 0.1)
        st = d.wait_idle(timeout=1800)
    idle_at = time.perf_counter()
    busy_s = idle_at - t0
    at_idle = snapshot(d)
    wait_until(lambda: len(d.events("model.bulk_session_released")) > released_before, release_timeout,
               "model.bulk_session_released", 0.5)
    released_s = time.perf_counter() - idle_at
    time.sleep(2)  # the release (and any trim) has happened by the time the line is written; let it settle
    after_release = snapshot(d)
    time.sleep(max(0.0, AFTER_BULK_S - (time.perf_counter() - idle_at)))
    return {"busy_s": round(busy_s, 1), "chunks": st["chunks"], "at_idle": at_idle, "after_release": after_release,
            "released_after_s": round(released_s, 1), "after_60s": snapshot(d)}


QUERIES = ["what did we decide about the billing service", "who owns the onboarding checklist", "deploy",
           "follow-up on friday", "migration before merge", "TODO backups", "learned about the cache",
           "met to review the release", "why did we choose postgres", "the dashboard latency"]


def long_day(tmp: Path, n_files: int, n_queries: int, idle_s: float, seed: int, env: dict[str, str]) -> dict[str, Any]:
    """Phases 1-4 on an empty data dir, then a fresh start on the same files (module docstring)."""
    root, data = tmp / "root", tmp / "data"
    generate_notes(root, n_files, seed)
    out: dict[str, Any] = {"files": n_files}
    with Daemon(tmp, [root], data, name="day", extra_env=env) as d:
        assert d.proc is not None
        with Sampler(d.proc.pid) as s:
            st = d.wait_idle(timeout=7200)
            out["bulk_s"] = round(time.perf_counter() - d.started_at, 1)
            out["chunks"], out["model"] = st["chunks"], st["model"]["id"]
            out["after_bulk"] = snapshot(d)
            t0 = time.perf_counter()
            st = d.wait_idle(timeout=7200, interval=0.5, lines=True)
            out["line_fill_s"] = round(time.perf_counter() - t0, 1)
            out["after_lines"] = snapshot(d)
            lat = []
            with d.client() as c:
                for i in range(n_queries):
                    q = f"{QUERIES[i % len(QUERIES)]} {i}"  # distinct texts: the query cache does not answer
                    t1 = time.perf_counter()
                    c.call("search", {"query": q, "k": 8})
                    lat.append(time.perf_counter() - t1)
            out["query"] = summary(lat, 1000, 2)
            out["after_queries"] = snapshot(d)
            time.sleep(idle_s)
            out["after_idle"] = snapshot(d)
            out["peak_tree_mb"] = mb(s.peak_tree)
    with Daemon(tmp, [root], data, name="fresh", extra_env=env) as d:
        d.wait_idle(timeout=1800, lines=True)
        out["fresh_at_idle"] = snapshot(d)
        time.sleep(idle_s)
        out["fresh_after_idle"] = snapshot(d)
    return out


def report_day(args: argparse.Namespace, r: dict[str, Any]) -> None:
    idle, fresh = r["after_idle"]["rss_mb"], r["fresh_after_idle"]["rss_mb"]
    rows = [
        [f"after bulk index ({r['bulk_s']} s)", fmt(r["after_bulk"]["rss_mb"], 1), fmt(r["after_bulk"]["hwm_mb"], 1)],
        [f"after line fill ({r['line_fill_s']} s)", fmt(r["after_lines"]["rss_mb"], 1),
         fmt(r["after_lines"]["hwm_mb"], 1)],
        [f"after {r['query']['n']} queries", fmt(r["after_queries"]["rss_mb"], 1),
         fmt(r["after_queries"]["hwm_mb"], 1)],
        [f"after {args.idle_s:g} s idle", fmt(idle, 1), fmt(r["after_idle"]["hwm_mb"], 1)],
        ["fresh start on the same files, idle", fmt(r["fresh_at_idle"]["rss_mb"], 1),
         fmt(r["fresh_at_idle"]["hwm_mb"], 1)],
        [f"fresh start, {args.idle_s:g} s later", fmt(fresh, 1), fmt(r["fresh_after_idle"]["hwm_mb"], 1)],
    ]
    print(f"{r['files']} files, {r['chunks']} chunks; model {r['model']}; load {loadavg()}")
    print_table(["daemon RSS", "MB", "peak MB"], rows)
    print(f"idle after the work / fresh idle: {idle / fresh:.2f} (target <= 1.2); idle {idle:.0f} MB (target <= 250)")
    print(f"query round trip: p50 {fmt(r['query']['p50'], 2)} ms, p99 {fmt(r['query']['p99'], 2)} ms")
    print(json.dumps({**r, "idle_over_fresh": round(idle / fresh, 3), "idle_s": args.idle_s, "env": args.env,
                      "loadavg": loadavg()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", action="store_true", help="the older run: LoCoMo dev, first start, bulk re-index")
    ap.add_argument("--files", type=int, default=2000, help="generated notes (the default run)")
    ap.add_argument("--idle-s", type=float, default=600.0, help="seconds idle before the last sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("eval_dir", nargs="?", type=Path, help=EVAL_DIR_HELP + " (only with --locomo)")
    ap.add_argument("--convs", default="26,30,41,42,43", help="LoCoMo conversations to use")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--settle-s", type=float, default=60.0, help="first start: seconds to watch after idle")
    ap.add_argument("--release-timeout", type=float, default=180.0)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra daemon environment")
    args = ap.parse_args()
    if args.locomo and args.eval_dir is None:
        ap.error("--locomo needs EVAL_DIR")

    tmp = bench_tmp("mdb-mem-")
    if not args.locomo:
        try:
            env = dict(kv.split("=", 1) for kv in args.env)
            report_day(args, long_day(tmp, args.files, args.queries, args.idle_s, args.seed, env))
        finally:
            remove_tree(tmp)
        return
    try:
        root, data = tmp / "root", tmp / "data"
        files, questions = copy_corpus(args.eval_dir, args.convs.split(","), root)
        questions = questions[: args.queries]
        env = {"XDG_CACHE_HOME": str(tmp / "cache"), **dict(kv.split("=", 1) for kv in args.env)}
        first = first_start(tmp, root, data, env, args.settle_s)
        warm = warm_start(tmp, root, data, env, files, questions, args.settle_s, args.release_timeout)
        report(args, len(files), first, warm, tmp)
    finally:
        remove_tree(tmp)


def report(args: argparse.Namespace, n_files: int, first: dict[str, Any], warm: dict[str, Any], tmp: Path) -> None:
    q, bulk = warm["query"], warm["bulk"]
    rows = [
        ["first start: peak RSS (VmHWM)", fmt(first["peak_mb"], 1)],
        ["first start: peak RSS, daemon + children", fmt(first["peak_tree_mb"], 1)],
        ["first start: peak RSS of the build child", fmt(first["peak_child_mb"], 1)],
        ["first start: RSS when idle", fmt(first["at_idle_mb"], 1)],
        [f"first start: RSS {args.settle_s:g} s after idle", fmt(first["after_settle_mb"], 1)],
        ["warm start: idle RSS", fmt(warm["idle"]["rss_mb"], 1)],
        ["warm start: idle RssAnon", fmt(warm["idle"]["anon_mb"], 1)],
        [f"after {q['n']} queries: RSS", fmt(warm["after_queries"]["rss_mb"], 1)],
        ["bulk re-index: RSS when idle", fmt(bulk["at_idle"]["rss_mb"], 1)],
        ["bulk re-index: peak RSS (VmHWM)", fmt(bulk["at_idle"]["hwm_mb"], 1)],
        ["bulk re-index: RSS after the bulk session closed", fmt(bulk["after_release"]["rss_mb"], 1)],
        [f"bulk re-index: RSS {AFTER_BULK_S:g} s after it ended", fmt(bulk["after_60s"]["rss_mb"], 1)],
        ["  ... / warm idle (target <= 1.2)", fmt(bulk["after_60s"]["rss_mb"] / warm["idle"]["rss_mb"], 2)],
    ]
    print(f"corpus: {n_files} files, {first['chunks']} chunks ({args.convs}); model {first['model']}; "
          f"first start idle after {first['idle_s']} s; warm start idle after {warm['ready_s']} s; "
          f"re-index {bulk['busy_s']} s")
    print_table(["measure", "MB"], rows)
    print(f"query round trip: p50 {fmt(q['p50'], 2)} ms, p99 {fmt(q['p99'], 2)} ms (n={q['n']})")
    print(json.dumps({
        "files": n_files, "chunks": first["chunks"], "model": first["model"],
        "first_start": first, "warm_idle": warm["idle"], "after_queries": warm["after_queries"],
        "query_p50_ms": q["p50"], "query_p99_ms": q["p99"], "bulk": bulk,
        "bulk_return_mb": round(bulk["after_release"]["rss_mb"] - warm["idle"]["rss_mb"], 1),
        "after_bulk_60s_over_idle": round(bulk["after_60s"]["rss_mb"] / warm["idle"]["rss_mb"], 3),
        "env": args.env, "loadavg": loadavg(),
    }))


if __name__ == "__main__":
    sys.exit(main())
