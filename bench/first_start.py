#!/usr/bin/env python3
"""First start vs warm start of ``memoryd run``: when the socket answers, when keyword search finds a
file, when the model is there, when every vector is in.

    python bench/first_start.py [--files 30] [--repeat 1]

Each run spawns ``memoryd run`` (the real default model) on a generated folder of ``--files`` small
notes, one of which holds a word found nowhere else:

* **first**: an empty model cache (``XDG_CACHE_HOME`` of its own) and an empty data dir: the model
  is built (``bench/model_build.py`` times the build alone);
* **warm**: the same model cache and data dir again: the model is loaded, nothing is built or embedded.

Times from spawn: **socket** (``ping`` answers), **keyword** (a ``keyword`` search for the probe word
finds its file), **model** (``status`` has no ``model_build`` any more and shows the model: at once
on a warm start, and on a daemon that builds before serving), **idle** (nothing queued, no vector
pending). The daemon's own ``model.built`` / ``model.ready`` / ``model.loaded`` log lines give the
build's wall seconds. Prints a table (medians over ``--repeat``), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, is_idle, remove_tree

from memoryd.indexer.errors import DaemonError

PROBE = "zanzibarite"


def make_folder(root: Path, files: int) -> None:
    for i in range(files):
        path = root / "notes" / f"note-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        extra = f"\n- The {PROBE} sample is in drawer {i}.\n" if i == files // 2 else ""
        path.write_text(f"# Note {i}\n\n- Meeting {i} moved the release of service {i} to week {i % 52}.\n"
                        f"- Alice and Bob agreed on item {i}; the budget is {i * 10} euros.\n{extra}", encoding="utf-8")


def one_start(tmp: Path, root: Path, data: Path, cache: Path, name: str, timeout: float = 300.0) -> dict[str, Any]:
    d = Daemon(tmp, [root], data, name=name, extra_env={"XDG_CACHE_HOME": str(cache)})
    marks: dict[str, float] = {}
    with d:
        deadline = time.perf_counter() + timeout
        while "idle" not in marks:
            d.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{name}: not idle after {timeout:g} s ({marks})")
            now = time.perf_counter() - d.started_at
            try:
                with d.client(timeout=30) as c:
                    c.call("ping")
                    marks.setdefault("socket", now)
                    if "keyword" not in marks:
                        hits = c.call("search", {"query": PROBE, "mode": "keyword", "k": 1})["hits"]
                        if hits:
                            marks["keyword"] = time.perf_counter() - d.started_at
                    st = c.call("status")
                    if "model" not in marks and "model_build" not in st and st.get("model", {}).get("id"):
                        marks["model"] = time.perf_counter() - d.started_at
                    if "keyword" in marks and "model" in marks and is_idle(st):
                        marks["idle"] = time.perf_counter() - d.started_at
            except (DaemonError, OSError):
                pass
            time.sleep(0.01)
        built = [e.get("seconds") for e in d.events("model.built")]
        ready = [e.get("seconds") for e in d.events("model.ready")]
        loaded = [e.get("seconds") for e in d.events("model.loaded")]
    return {**{k: round(v, 2) for k, v in marks.items()}, "model_built_s": built[0] if built else None,
            "model_ready_s": ready[0] if ready else None, "model_loaded_s": loaded[0] if loaded else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {"first": [], "warm": []}
    for i in range(args.repeat):
        tmp = bench_tmp("mdb-first-")
        try:
            root, data, cache = tmp / "root", tmp / "data", tmp / "cache"
            make_folder(root, args.files)
            runs["first"].append(one_start(tmp, root, data, cache, f"first{i}"))
            runs["warm"].append(one_start(tmp, root, data, cache, f"warm{i}"))
        finally:
            remove_tree(tmp)
    print(f"load average at start: {load:.1f} ({os.cpu_count()} CPUs), {args.files} files, {args.repeat} run(s)")
    keys = ("socket", "keyword", "model", "idle", "model_built_s", "model_ready_s", "model_loaded_s")
    print(f"{'start':<6}" + "".join(f"{k:>16}" for k in keys))
    for kind, rs in runs.items():
        cells = []
        for k in keys:
            vals = [r[k] for r in rs if r.get(k) is not None]
            cells.append(f"{statistics.median(vals):>16.2f}" if vals else f"{'-':>16}")
        print(f"{kind:<6}" + "".join(cells))
    print(json.dumps({"load": round(load, 1), "files": args.files, "runs": runs}))


if __name__ == "__main__":
    main()
