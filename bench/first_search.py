#!/usr/bin/env python3
"""A newcomer's first folder: from the socket answering to every file keyword-searchable.

    python bench/first_search.py [--sizes locomo,2000] [--runs 3] [--eval-dir EVAL_DIR]

For each size and run, a folder memoryd has never seen is built, every file (at most
``--probes`` of them) gets one extra line holding a word found nowhere else, and
``memoryd run`` (real default model, empty data dir) is spawned on it:

* ``locomo``: 31 files of one LoCoMo conversation (``--conversation``, one file per
  dated session, ~92 chunks): the size of a first real folder;
* a number: a generated folder of about that many chunks (``bench/gen_corpus.py``).

Timed from the first ``ping`` the socket answers (model load and socket start are
``bench/cold_start.py``'s and ``bench/startup.py``'s subject):

* **first file**: the first probe word a ``keyword`` search finds;
* **all files**: every probe word found (each missing one asked every ~0.1 s);
* **progress**: the first ``status`` whose ``reconcile_progress`` has a total (``n/m files``),
  and whether the very first status after ``ping`` already said ``reconciling``.

Then, while the vector backlog is still filling in, one file is saved with a new section
holding a new word (``--no-save`` skips this): **save keyword** is the time from the write
until a ``keyword`` search finds it, **save vector** until a ``vector`` search for the section's
sentence has it on top (its vector is in: a save does not wait for the backlog). The run stops
there (the rest of the backlog is ``bench/cold_start.py``'s subject). Prints a table, then one
JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

from _common import EVAL_DIR_HELP, Daemon, bench_tmp, fmt, loadavg, print_table, remove_tree
from cold_start import found, plant_probes
from gen_corpus import generate

from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.errors import DaemonError

LOCOMO_FILES = 31


def locomo_folder(root: Path, eval_dir: Path, conversation: str) -> int:
    """Copy the first ``LOCOMO_FILES`` session files of a LoCoMo conversation; returns the file count."""
    files = sorted((eval_dir / conversation / "memory").glob("*.md"))[:LOCOMO_FILES]
    if len(files) < LOCOMO_FILES:
        raise SystemExit(f"{eval_dir / conversation} has {len(files)} session files, need {LOCOMO_FILES}")
    (root / "memory").mkdir(parents=True)
    for f in files:
        (root / "memory" / f.name).write_bytes(f.read_bytes())
    return len(files)


def _ping(d: Daemon, c: Client, timeout: float) -> float:
    """Wait until the socket answers ``ping``; returns that moment (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while True:
        d.check_alive()
        try:
            c.call("ping")
            return time.perf_counter()
        except (DaemonError, OSError):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no ping answer after {timeout:g} s") from None
            time.sleep(0.02)


def _poll(pred: Any, timeout: float, what: str) -> float:
    """Seconds until ``pred()`` is true (polled every ~50 ms)."""
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{what}: not after {timeout:g} s")
        time.sleep(0.05)
    return time.perf_counter() - t0


def save_during_backlog(c: Client, root: Path, timeout: float) -> dict[str, Any]:
    """Save one file while vectors are pending; how long until its new section is found by each leg."""
    pending = (c.call("status").get("vectors") or {}).get("pending", 0)
    if not pending:
        return {"save_backlog": 0, "save_keyword_s": None, "save_vector_s": None}
    word = "savedword" + "".join(random.choice(string.ascii_lowercase) for _ in range(8))
    sentence = f"The team settled the {word} question on Friday after the long review."
    target = sorted(root.rglob("*.md"))[0]
    t0 = time.perf_counter()
    with target.open("a", encoding="utf-8") as f:
        f.write(f"\n## Saved\n\n{sentence}\n")
    keyword_s = _poll(lambda: found(c, word), timeout, "the save by keyword")

    def vector_top() -> bool:
        hits = c.call("search", {"query": sentence, "k": 1, "mode": "vector"})["hits"]
        return bool(hits) and word in hits[0]["text"]

    _poll(vector_top, timeout, "the save by vector")
    return {"save_backlog": pending, "save_keyword_s": round(keyword_s, 2),
            "save_vector_s": round(time.perf_counter() - t0, 2)}


def observe(d: Daemon, words: list[str], timeout: float, root: Path | None = None) -> dict[str, Any]:
    """Poll from the first ping until every probe word is keyword-searchable."""
    d.wait_socket(timeout)
    with d.client(timeout=60) as c:
        t0 = _ping(d, c, timeout)
        socket_s = t0 - d.started_at
        first = c.call("status")
        out: dict[str, Any] = {"socket_s": round(socket_s, 2),
                               "first_status": {"reconciling": first.get("reconciling"),
                                                "reconcile_progress": first.get("reconcile_progress"),
                                                "files": first.get("files")},
                               "progress_s": None, "progress_seen": None, "first_file_s": None}
        missing = set(words)
        while missing:
            d.check_alive()
            now = time.perf_counter() - t0
            if now > timeout:
                raise TimeoutError(f"{len(missing)} probes not found after {timeout:g} s")
            st = c.call("status")
            prog = st.get("reconcile_progress") or [0, 0]
            if out["progress_s"] is None and prog[1]:
                out["progress_s"], out["progress_seen"] = round(now, 2), f"{prog[0]}/{prog[1]}"
            for w in sorted(missing):
                if found(c, w):
                    missing.discard(w)
                    if out["first_file_s"] is None:
                        out["first_file_s"] = round(time.perf_counter() - t0, 2)
            if missing:
                time.sleep(0.1)
        out["all_files_s"] = round(time.perf_counter() - t0, 2)
        st = c.call("status")
        out.update(chunks=st.get("chunks"), files=st.get("files"),
                   vectors_pending=(st.get("vectors") or {}).get("pending"))
        if root is not None:
            out.update(save_during_backlog(c, root, timeout))
    return out


def run_once(size: str, run: int, args: argparse.Namespace) -> dict[str, Any]:
    tmp = bench_tmp("mdfirst-")
    try:
        root = tmp / "root"
        if size == "locomo":
            locomo_folder(root, Path(args.eval_dir), args.conversation)
        else:
            generate(root, int(size), args.seed + run)
        words = plant_probes(root, args.probes, args.seed + run, as_section=False)
        with Daemon(tmp, [root], tmp / "data", name="first") as d:
            out = observe(d, words, args.timeout, root if args.save else None)
        return {"size": size, "run": run + 1, "probes": len(words), **out, "loadavg": loadavg()}
    finally:
        remove_tree(tmp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="locomo,2000", help="comma-separated: 'locomo' and/or chunk counts")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--probes", type=int, default=31, help="files that get a probe word (all, if fewer)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-dir", help=EVAL_DIR_HELP + " (needed for the LoCoMo folder)")
    ap.add_argument("--conversation", default="locomo-conv-41")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--no-save", dest="save", action="store_false", help="skip the save during the backlog")
    args = ap.parse_args(argv)
    if "locomo" in args.sizes.split(",") and not args.eval_dir:
        ap.error("--sizes locomo needs --eval-dir EVAL_DIR")
    results = [run_once(size, run, args) for size in args.sizes.split(",") for run in range(args.runs)]
    print_table(
        ["size", "run", "files", "chunks", "socket s", "progress at s", "first file s", "all files s",
         "save: backlog", "keyword s", "vector s", "load"],
        [[r["size"], r["run"], r["files"], r["chunks"], fmt(r["socket_s"], 2),
          f"{fmt(r['progress_s'], 2)} ({r['progress_seen']})", fmt(r["first_file_s"], 2),
          fmt(r["all_files_s"], 2), r.get("save_backlog", "-"), fmt(r.get("save_keyword_s"), 2),
          fmt(r.get("save_vector_s"), 2), r["loadavg"]] for r in results],
    )
    sizes = {s: [r["all_files_s"] for r in results if r["size"] == s] for s in args.sizes.split(",")}
    summary = {s: {"median_all_files_s": statistics.median(v), "max_all_files_s": max(v)} for s, v in sizes.items()}
    print(json.dumps({"first_search": results, "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
