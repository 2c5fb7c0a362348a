"""Long writes beside saves, with the default model: import (dry run and real), clear and its undo.

Why: a person imports an export, an agent clears a peer's namespace, the owner
undoes it — while an editor keeps saving. memoryd runs those writes in slices
(``daemon/api/manage.py``), reads a dry run off the index worker, and clears
and restores a file in one linear pass (``indexer/write/editor.py``). This
script runs the real daemon (``memoryd run``, default provider unless
``--provider``) on a generated root:

* ``MEMORY.md`` and ``memory/*.md``: ``--entries`` (700) entries of the owner;
* ``peers/bob/notes.md``: ``--clear-entries`` (2,000) entries of one peer;

waits until it is idle, exports the owner's entries (JSONL) and measures:

* the **reference**: save → keyword-searchable on the idle daemon (median of 5);
* ``import --dry-run`` of the export: wall time (nothing is written);
* the real ``import`` of the export (each line is already in its file: ``unchanged``), while a
  note is saved every second: each save's save → searchable time;
* ``clear peer:bob`` and the ``undo`` of it: wall time, and whether the file
  came back byte for byte.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, print_report, remove_tree, wait_until, write_config

WORDS = ("harbour", "violet", "granite", "lantern", "meadow", "copper", "thistle", "orchard", "falcon", "ember",
         "juniper", "quartz", "saffron", "walnut", "heron", "maple", "pewter", "sorrel", "willow", "basalt")


def _fact(i: int, who: str) -> str:
    w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
    return f"{who} decided the {w[0]} {w[1]} plan uses {w[2]} and {w[3]} with budget {i * 37 % 997} units."


def seed(root: Path, entries: int, clear_entries: int) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "peers" / "bob").mkdir(parents=True)
    per = 100
    (root / "MEMORY.md").write_text("# Memory\n\n## Notes\n\n" + "".join(f"- {_fact(i, 'The user')}\n"
                                                                        for i in range(per)), encoding="utf-8")
    for f in range(1, (entries + per - 1) // per):
        body = "".join(f"- {_fact(i, 'The user')}\n" for i in range(f * per, min(entries, (f + 1) * per)))
        (root / "memory" / f"2026-11-{f:02d}.md").write_text(f"# Day {f}\n\n{body}", encoding="utf-8")
    (root / "peers" / "bob" / "notes.md").write_text(
        "---\nupdated: 2024-01-01\n---\n# Bob\n\n" + "".join(f"- {_fact(i, 'Bob')}\n" for i in range(clear_entries)),
        encoding="utf-8")


def save_latency(d: Daemon, root: Path, tag: str) -> float:
    """Write a note with a fresh token; seconds until a keyword search finds it."""
    token = "zq" + hashlib.sha256(tag.encode()).hexdigest()[:10]
    t0 = time.perf_counter()
    (root / "memory" / f"save-{tag}.md").write_text(f"# Save\n\n- saved {token} from the editor\n", encoding="utf-8")
    with d.client(30) as c:
        wait_until(lambda: bool(c.call("search", {"query": token, "mode": "keyword"})["hits"]), 60, f"save {tag}",
                   interval=0.01)
    return time.perf_counter() - t0


def timed(d: Daemon, method: str, params: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    with d.client(3600) as c:
        out = c.call(method, params)
    return time.perf_counter() - t0, out


def run(provider: str, entries: int, clear_entries: int, keep: bool) -> dict[str, Any]:
    tmp = bench_tmp("lwrites-")
    root, data = tmp / "root", tmp / "data"
    seed(root, entries, clear_entries)
    cfg = write_config(tmp / "memoryd.toml", {"embedding": {"provider": provider}, "log": {"format": "json"},
                                              "write": {"wait_s": 30}})
    res: dict[str, Any] = {"provider": provider, "entries": entries, "clear_entries": clear_entries}
    try:
        with Daemon(tmp, [root], data, cfg, name="lw") as d:
            d.wait_idle(1800)
            res["reference_save_s"] = statistics.median(save_latency(d, root, f"ref{i}") for i in range(5))
            _, exported = timed(d, "export", {"format": "jsonl", "namespace": "default"})
            res["exported"] = exported["count"]
            res["dry_run_s"], dry = timed(d, "import", {"data": exported["text"], "dry_run": True})
            res["dry_run_summary"] = dry["summary"]
            saves: list[float] = []
            done = threading.Event()

            def saver() -> None:
                i = 0
                while not done.is_set():
                    saves.append(save_latency(d, root, f"imp{i}"))
                    i += 1
                    done.wait(1.0)

            t = threading.Thread(target=saver, daemon=True)
            t.start()
            res["import_s"], imp = timed(d, "import", {"data": exported["text"]})
            done.set()
            t.join(120)
            res["import_summary"] = imp["summary"]
            res["saves_during_import"] = len(saves)
            res["save_during_import_p50_s"] = statistics.median(saves) if saves else None
            res["save_during_import_max_s"] = max(saves) if saves else None
            bob = root / "peers" / "bob" / "notes.md"
            before = bob.read_bytes()
            res["clear_s"], cleared = timed(d, "clear", {"namespace": "peer:bob"})
            res["cleared"] = cleared["removed"]
            res["undo_s"], _ = timed(d, "undo", {"id": cleared["history_id"]})
            res["undo_byte_identical"] = bob.read_bytes() == before
    finally:
        if not keep:
            remove_tree(tmp)
    ref = res["reference_save_s"]
    res["save_during_import_vs_idle"] = round(res["save_during_import_p50_s"] / ref, 2) \
        if res.get("save_during_import_p50_s") and ref else None
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="e5-small", help="e5-small (default) or hash")
    p.add_argument("--entries", type=int, default=700)
    p.add_argument("--clear-entries", type=int, default=2000)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv)
    res = run(a.provider, a.entries, a.clear_entries, a.keep)
    print_report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
