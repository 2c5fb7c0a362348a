#!/usr/bin/env python3
"""Freshness: seconds from a saved edit to a search that finds it, through the running daemon.

    python bench/freshness.py [--files 2000] [--real-files 200] [--edits 20] [--open-edits 3]

For each corpus — ``--files`` generated notes with the fast fake embedder
(provider "hash": the model does not matter for *when* an edit shows up, only
for how long its one chunk takes to embed) and ``--real-files`` notes with the
real e5-small model (the row that matters) — the corpus is indexed once
(``memoryd index``), then two ``memoryd run`` subprocesses run side by side,
each on its own copy: one with the default watch settings (``debounce_ms``
1500, ``settle_ms`` 100), one with ``debounce_ms = settle_ms = 100``. Edits
alternate between them (A B B A ...: both see the same background load); each
starts once its daemon is idle. ``--edits`` files are edited one after
another: a line holding a unique, fixed-width token (``zebracorn000000123``)
is appended and the file closed;
the clock runs from the moment the write returned until a keyword ``search``
over the socket returns a hit whose text holds the token (polled every
``--poll-ms``). A closed file is "settled": the daemon indexes it after
``settle_ms`` of quiet (plus the debouncer's 50 ms batch window). ``--open-edits``
more edits use a writer that keeps the file open (write, flush, no close) to
show the full ``debounce_ms`` then applies; ``--hook-edits`` close the file and
call ``reindex`` with ``wait`` (an editor's on-save hook), which skips the
debounce: that row is the reference cost of indexing one edit plus a search.

Prints a table, then one JSON line (top-level keys: the real-model corpus).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    Daemon,
    bench_tmp,
    fmt,
    generate_notes,
    loadavg,
    memoryd_argv,
    print_table,
    remove_tree,
    run_oneshot,
    summary,
    write_config,
)

_TOKENS = itertools.count(1)
SETTINGS: tuple[int | None, ...] = (None, 100)  # debounce_ms = settle_ms; None: the built-in 1500/100
WRITERS = ("close", "open", "hook")


def edit_once(daemon: Daemon, path: Path, writer: str, poll_s: float, timeout: float) -> float:
    """Append a unique token to ``path``; seconds until a keyword search returns it.

    ``writer``: "close" (write and close), "open" (write, flush, keep open until found) or "hook"
    (write, close, then ``reindex`` with wait=true as an editor's on-save hook does).
    """
    daemon.wait_idle(timeout=120)
    token = f"zebracorn{next(_TOKENS):09d}"
    line = f"- Follow-up {token}: checked again, still true.\n"
    with daemon.client() as client:
        f = open(path, "a", encoding="utf-8")  # noqa: SIM115  (the "open" writer keeps it open)
        try:
            f.write(line)
            f.flush()
            if writer != "open":
                f.close()
            t0 = time.perf_counter()
            if writer == "hook":
                client.call("reindex", {"paths": [str(path)], "wait": True})
            while True:
                hits = client.call("search", {"query": token, "mode": "keyword", "k": 3})["hits"]
                if any(token in h["text"] for h in hits):
                    return time.perf_counter() - t0
                if time.perf_counter() - t0 > timeout:
                    raise TimeoutError(f"{token} appended to {path} not found after {timeout:g} s")
                daemon.check_alive()
                time.sleep(poll_s)
        finally:
            f.close()


def start_daemons(tmp: Path, provider: str, src_root: Path, files: list[Path], stack: contextlib.ExitStack,
                  args: argparse.Namespace) -> tuple[list[tuple[Daemon, list[Path], dict[str, Any]]], float]:
    """Index ``src_root`` once; one daemon per setting on its own copy of the root and of the index.

    The copied index names ``src_root``; each daemon drops those files and indexes its own copy
    from the embedding cache (same texts), so the model embeds the corpus only once.
    """
    data0 = tmp / "data0"
    base = write_config(tmp / "base.toml", {"embedding": {"provider": provider}})
    build_s, _ = run_oneshot(memoryd_argv("index", [src_root], data0, base), tmp, timeout=args.index_timeout)
    out = []
    for j, deb in enumerate(SETTINGS):
        root, data = tmp / f"root{j + 1}", tmp / f"data{j + 1}"
        shutil.copytree(src_root, root)
        shutil.copytree(data0, data)
        watch: dict[str, Any] = {} if deb is None else {"debounce_ms": deb, "settle_ms": deb}
        cfg = write_config(tmp / f"s{j}.toml", {"embedding": {"provider": provider}, "watch": watch})
        d = stack.enter_context(Daemon(tmp, [root], data, cfg, name=f"s{j}"))
        out.append((d, [root / p.relative_to(src_root) for p in files], {"debounce_ms": deb or 1500,
                                                                          "settle_ms": deb or 100}))
    for d, _, info in out:
        info["status"] = d.wait_idle(timeout=args.index_timeout)
    return out, build_s


def run_corpus(provider: str, n_files: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Both settings on one corpus, edits interleaved (A, B, B, A, ...) so both see the same machine load."""
    tmp = bench_tmp("mdb-fr-")
    try:
        src_root = tmp / "root0"
        files = generate_notes(src_root, n_files, seed=args.seed)
        plan = ["close"] * args.edits + ["open"] * args.open_edits + ["hook"] * args.hook_edits
        step = max(1, len(files) // max(1, len(plan)))
        with contextlib.ExitStack() as stack:
            daemons, build_s = start_daemons(tmp, provider, src_root, files, stack, args)
            samples: list[dict[str, list[float]]] = [{w: [] for w in WRITERS} for _ in daemons]
            for i, writer in enumerate(plan):
                order = list(enumerate(daemons))
                for j, (d, copies, _) in order if i % 2 == 0 else order[::-1]:
                    samples[j][writer].append(edit_once(d, copies[i * step], writer, args.poll_ms / 1000, 60))
        return [_result(provider, info, s, build_s) for (_, _, info), s in zip(daemons, samples, strict=True)]
    finally:
        remove_tree(tmp)


def _result(provider: str, info: dict[str, Any], s: dict[str, list[float]], build_s: float) -> dict[str, Any]:
    st = info["status"]
    return {
        "files": st["files"], "chunks": st["chunks"], "model": st["model"]["id"], "provider": provider,
        "debounce_ms": info["debounce_ms"], "settle_ms": info["settle_ms"], "build_s": round(build_s, 1),
        **{f"{k}_s": v for k, v in summary(s["close"]).items() if k != "n"},
        "edits": len(s["close"]), "samples_s": [round(x, 3) for x in s["close"]],
        "open_writer": _brief(s["open"]), "reindex_hook": _brief(s["hook"]),
    }


def _brief(xs: list[float]) -> dict[str, Any]:
    s = summary(xs)
    return {"p50_s": s["p50"], "max_s": s["max"], "edits": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000, help="notes in the fake-embedder corpus (0: skip it)")
    ap.add_argument("--real-files", type=int, default=200, help="notes in the e5-small corpus (0: skip it)")
    ap.add_argument("--edits", type=int, default=20, help="closing writes per setting")
    ap.add_argument("--open-edits", type=int, default=3, help="writes kept open per setting (0: skip)")
    ap.add_argument("--hook-edits", type=int, default=3,
                    help="writes followed by `reindex --wait` (an editor hook: no debounce) per setting")
    ap.add_argument("--poll-ms", type=float, default=10.0, help="search polling interval (the resolution)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--index-timeout", type=float, default=600.0, help="bound on the initial index, seconds")
    args = ap.parse_args()

    load_before = loadavg()
    runs: list[dict[str, Any]] = []
    if args.real_files:
        runs += run_corpus("e5-small", args.real_files, args)
    if args.files:
        runs += run_corpus("hash", args.files, args)

    header = ["model", "files", "chunks", "debounce/settle ms", "writer", "edits", "p50 s", "p95 s", "max s"]
    rows = []
    for r in runs:
        deb = f"{r['debounce_ms']}/{r['settle_ms']}"
        rows.append([r["model"][:24], r["files"], r["chunks"], deb, "close", r["edits"],
                     fmt(r["p50_s"]), fmt(r["p95_s"]), fmt(r["max_s"])])
        for key, label in (("open_writer", "open (no close)"), ("reindex_hook", "close + reindex hook")):
            o = r[key]
            if o["edits"]:
                rows.append(["", "", "", deb, label, o["edits"], fmt(o["p50_s"]), "", fmt(o["max_s"])])
    print_table(header, rows)
    print(f"polling resolution {args.poll_ms:g} ms; load average before {load_before}, after {loadavg()}")

    def pick(r: dict[str, Any]) -> dict[str, Any]:
        return {k: r[k] for k in ("p50_s", "p95_s", "mean_s", "max_s", "edits", "open_writer", "reindex_hook")}

    main_runs = [r for r in runs if r["provider"] == "e5-small"] or runs
    out: dict[str, Any] = {
        "files": main_runs[0]["files"], "chunks": main_runs[0]["chunks"], "edits": args.edits,
        "model": main_runs[0]["model"], "default": pick(main_runs[0]), "debounce_100": pick(main_runs[1]),
        "runs": [{k: v for k, v in r.items() if k != "samples_s"} for r in runs],
        "poll_ms": args.poll_ms, "loadavg_before": load_before, "loadavg_after": loadavg(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
