#!/usr/bin/env python3
"""Warm start: from spawning ``memoryd run`` to READY=1 and to idle, on an index that is already built.

    python bench/startup.py [EVAL_DIR] [--files 2500] [--convs 26,30,41,42,43] [--repeat 3]

Two warm indexes are built once with ``memoryd index`` (not timed here):

  * ~10k chunks of generated notes with the fake embedder (provider "hash":
    a warm start must embed nothing, so the model only matters through its
    load time — which the e5 row shows);
  * the LoCoMo dev folders (``*.md`` only) with the real e5-small model.

Then, ``--repeat`` times each, ``memoryd run`` is spawned with
``NOTIFY_SOCKET`` naming a datagram socket of ours (the sd_notify protocol
systemd uses): *ready* is when ``READY=1`` arrives (the socket answers; the
start-up reconcile may still run), *idle* is when ``status`` (polled every
10 ms from READY on) says pending=0 and reconciling=false. Chunks embedded
during the start are read from the daemon's ``reconcile.done`` log line
(``embedded=``) and, as a cross-check, from the ``status`` cache-miss counter;
both must be 0. The model load time is the ``model.loaded`` log line's
``seconds``. Each run ends with SIGTERM; the time to exit is reported too.
Prints a table (medians), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import sys
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
    memoryd_argv,
    print_table,
    remove_tree,
    run_oneshot,
    write_config,
)


def wait_ready(sock: socket.socket, d: Daemon, timeout: float) -> float:
    """Seconds from spawn until a datagram holding ``READY=1`` arrives."""
    deadline = time.perf_counter() + timeout
    while True:
        sock.settimeout(max(0.01, min(0.5, deadline - time.perf_counter())))
        try:
            msg = sock.recv(4096)
        except TimeoutError:
            d.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no READY=1 within {timeout:g} s") from None
            continue
        if b"READY=1" in msg.split(b"\n"):
            return time.perf_counter() - d.started_at


def one_start(tmp: Path, root: Path, data: Path, cfg: Path | None, name: str) -> dict[str, Any]:
    notify_path = tmp / f"{name}.notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as ns:
        ns.bind(str(notify_path))
        with Daemon(tmp, [root], data, cfg, name=name, notify_socket=notify_path) as d:
            ready_s = wait_ready(ns, d, timeout=300)
            with d.client() as c:
                first = c.call("status")
                st = first
                while not is_idle(st):
                    if time.perf_counter() - d.started_at > 600:
                        raise TimeoutError(f"not idle 600 s after spawn: {st}")
                    time.sleep(0.01)
                    st = c.call("status")
                idle_s = time.perf_counter() - d.started_at
            t0 = time.perf_counter()
            code = d.stop()
            stop_s = time.perf_counter() - t0
        loaded = d.events("model.loaded")
        done = d.events("reconcile.done")
        daemon_ready = d.events("daemon.ready")
    return {
        "ready_s": ready_s, "idle_s": idle_s, "stop_s": stop_s, "exit_code": code,
        "model_load_s": loaded[0]["seconds"] if loaded else None,
        "daemon_startup_s": daemon_ready[0].get("startup_s") if daemon_ready else None,
        "embedded_on_start": sum(int(e.get("embedded", 0)) for e in done),
        "cache_misses_delta": st["cache"]["misses"] - first["cache"]["misses"],
        "reconciles": len(done), "repaired": len(d.events("vectors.repaired")),
        "files": st["files"], "chunks": st["chunks"], "model": st["model"]["id"],
    }


def measure(label: str, tmp: Path, root: Path, cfg: Path | None, repeat: int) -> dict[str, Any]:
    """Build the index once (``memoryd index``), then ``repeat`` warm starts; medians."""
    data = tmp / "data"
    build_s, summary_line = run_oneshot(memoryd_argv("index", [root], data, cfg), tmp, timeout=900)
    runs = [one_start(tmp, root, data, cfg, f"{label}{i}") for i in range(repeat)]

    def med(key: str) -> float | None:
        xs = [r[key] for r in runs if r[key] is not None]
        return round(statistics.median(xs), 3) if xs else None

    return {
        "label": label, "model": runs[0]["model"], "files": runs[0]["files"], "chunks": runs[0]["chunks"],
        "build_s": round(build_s, 1), "build": summary_line.strip(), "repeat": repeat,
        "ready_s": med("ready_s"), "idle_s": med("idle_s"), "model_load_s": med("model_load_s"),
        "stop_s": med("stop_s"), "embedded_on_start": max(r["embedded_on_start"] for r in runs),
        "cache_misses_delta": max(r["cache_misses_delta"] for r in runs),
        "exit_codes": [r["exit_code"] for r in runs], "vectors_repaired": sum(r["repaired"] for r in runs),
        "runs": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                  if k in ("ready_s", "idle_s", "model_load_s", "stop_s", "embedded_on_start")} for r in runs],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--files", type=int, default=2500, help="generated notes (~4 chunks each; 0: skip)")
    ap.add_argument("--convs", default="26,30,41,42,43", help="LoCoMo conversations for the e5 row ('': skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    load_before = loadavg()
    results: list[dict[str, Any]] = []
    if args.files:
        tmp = bench_tmp("mdb-st-")
        try:
            generate_notes(tmp / "root", args.files, seed=args.seed, lines=(50, 90))
            cfg = write_config(tmp / "hash.toml", {"embedding": {"provider": "hash"}})
            results.append(measure("hash", tmp, tmp / "root", cfg, args.repeat))
        finally:
            remove_tree(tmp)
    if args.convs:
        tmp = bench_tmp("mdb-st-")
        try:
            for conv in args.convs.split(","):
                src = args.eval_dir / f"locomo-conv-{conv}"
                for f in sorted(src.rglob("*.md")):
                    dst = tmp / "root" / f"conv-{conv}" / f.relative_to(src)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dst)
            results.append(measure("e5", tmp, tmp / "root", None, args.repeat))
        finally:
            remove_tree(tmp)
    report(results, [load_before, loadavg()])


def report(results: list[dict[str, Any]], loads: list[Any]) -> None:
    header = ["model", "files", "chunks", "ready s", "idle s", "model load s", "embedded", "stop s", "build s"]
    rows = [[r["model"][:24], r["files"], r["chunks"], fmt(r["ready_s"]), fmt(r["idle_s"]), fmt(r["model_load_s"]),
             r["embedded_on_start"], fmt(r["stop_s"]), r["build_s"]] for r in results]
    print_table(header, rows)
    print(f"medians of {results[0]['repeat'] if results else 0} warm starts each; ready = READY=1 received, "
          f"idle = status pending=0 and not reconciling; load average before {loads[0]}, after {loads[1]}")
    main_r = next((r for r in results if r["label"] == "hash"), results[0] if results else {})
    out: dict[str, Any] = {k: main_r.get(k) for k in ("chunks", "ready_s", "idle_s", "embedded_on_start", "model")}
    e5 = next((r for r in results if r["label"] == "e5"), None)
    if e5 is not None:
        out["e5"] = {k: e5[k] for k in ("files", "chunks", "ready_s", "idle_s", "model_load_s", "embedded_on_start")}
    out["runs"] = results
    out["loadavg"] = loads
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
