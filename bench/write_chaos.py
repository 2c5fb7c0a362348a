"""Write-path crash run: SIGKILL the daemon during ``clear``, the undo of a clear and ``import``, again and again.

Why: these are memoryd's longest edits of a person's files — thousands of
entries removed or put back, hundreds of lines imported one by one. Each is
written ahead (``journal/`` in the data dir, then the file, then the history),
and the next start settles whatever a kill interrupted. This script proves it
with the real daemon (``python -m memoryd.daemon.cli run``, hash embedder):
each round sends one of the three requests, SIGKILLs the daemon after a random
delay (0 to ~1.5 s: before, during or after the edit), starts it again and
checks, straight from the files and the history on disk:

* **lost**: every entry that was in a memory file before the round is still
  in one or kept by the history (a forget/clear record not undone, or what an
  undo took out); ``aged_out`` counts, at the end, entries whose records the
  history's bound (4 MiB per ring) has since dropped — not a crash loss;
* **duplicated**: no entry appears twice in the files, no history id twice;
* **journal**: nothing is left in ``journal/`` once the daemon answers.

Prints a table and, last, one JSON line; exit status 0 when every check held.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, wait_ping, write_config

from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.errors import DaemonError
from memoryd.indexer.markdown.mdlines import MdLines

OPS = ("clear", "undo-clear", "import")
WORDS = ("copper", "thistle", "ember", "violet", "lantern", "orchard", "quartz", "juniper", "saffron", "walnut",
         "cobalt", "heron", "maple", "pewter", "sorrel", "tundra", "umber", "willow", "zephyr", "basalt")


def seed(root: Path, per_file: int, files: int) -> set[str]:
    """Peer bob's notes (``files`` files of ``per_file`` entries) and a MEMORY.md; every entry's text."""
    bob = root / "peers" / "bob"
    bob.mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon.\n", encoding="utf-8")
    texts = {"The office is in Lisbon."}
    for f in range(files):
        lines = [f"Bob's note {f}-{i}: the {('harbour', 'granite', 'meadow', 'falcon')[i % 4]} plan, step {i * 7}."
                 for i in range(per_file)]
        front = "---\nupdated: 2024-01-01\n---\r\n" if f % 2 else ""  # CRLF under LF front matter in half of them
        nl = "\r\n" if f % 2 else "\n"
        (bob / f"notes{f}.md").write_text(front + f"# Bob {f}{nl}{nl}" + "".join(f"- {t}{nl}" for t in lines),
                                          encoding="utf-8", newline="")
        texts.update(lines)
    return texts


def entries(root: Path) -> list[str]:
    out = []
    for f in sorted(root.rglob("*.md")):
        out += [e.text for e in MdLines(f.read_bytes().decode("utf-8")).entries]
    return out


def history(data: Path) -> list[dict[str, Any]]:
    recs = []
    for name in ("history.jsonl", "history-agents.jsonl"):
        p = data / name
        if p.exists():
            for raw in p.read_bytes().splitlines():
                with contextlib.suppress(ValueError):  # a torn last line
                    recs.append(json.loads(raw))
    return recs


def kept(recs: list[dict[str, Any]]) -> set[str]:
    """Entry texts the history can bring back."""
    undone = {str(r.get("undoes")) for r in recs if r.get("action") == "undo"}
    undone |= {str(c) for r in recs if r.get("action") == "undo" for c in r.get("covers") or ()}
    out = set()
    for r in recs:
        if r.get("old") is None:
            continue
        if r.get("action") == "undo" or (r.get("action") in ("forget", "replace") and r["id"] not in undone):
            out.add(str(r["old"]))
    return out


def last_clear(recs: list[dict[str, Any]]) -> str | None:
    """The group id of the newest clear with a file not yet undone (what ``undo`` takes)."""
    undone = {str(r.get("undoes")) for r in recs if r.get("action") == "undo"}
    for r in reversed(recs):
        if r.get("action") == "clear" and r.get("group") and r["id"] not in undone:
            return str(r["group"])
    return None


def request(d: Daemon, op: str, data: Path, n: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The socket call for one round: (method, params)."""
    if op == "clear":
        return "clear", {"namespace": "peer:bob"}
    if op == "undo-clear":
        gid = last_clear(history(data))
        return ("undo", {"id": gid}) if gid else ("clear", {"namespace": "peer:bob"})
    lines = [json.dumps({"text": f"Bob imported {' '.join(rng.choice(WORDS) for _ in range(6))} as fact {n}-{i}.",
                         "namespace": "peer:bob"}) for i in range(40)]
    return "import", {"data": "\n".join(lines) + "\n"}


def run(kills: int, seed_: int, per_file: int = 500, files: int = 3, keep: bool = False) -> dict[str, Any]:
    tmp = bench_tmp("wchaos-")
    rng = random.Random(seed_)
    root, data = tmp / "root", tmp / "data"
    cfg = write_config(tmp / "memoryd.toml", {
        "embedding": {"provider": "hash"}, "log": {"format": "json"},
        "write": {"max_per_turn": 100000, "max_per_minute": 100000, "wait_s": 30},
    })
    ever = seed(root, per_file, files)
    res: dict[str, Any] = {"kills": 0, "ops": Counter(), "lost": 0, "duplicated": 0, "dup_ids": 0,
                           "journal_left": 0, "answered": 0, "aged_out": 0}
    last = set(entries(root))
    t0 = time.perf_counter()
    d = Daemon(tmp, [root], data, cfg, name="w")
    try:
        d.start()
        wait_ping(d)
        for i in range(kills):
            op = OPS[i] if i < len(OPS) else rng.choice(OPS)
            method, params = request(d, op, data, i, rng)
            res["ops"][method if method != "undo" else "undo-clear"] += 1
            box: dict[str, Any] = {}

            def call(method: str = method, params: dict[str, Any] = params, box: dict[str, Any] = box) -> None:
                try:
                    with Client(d.socket, timeout=120) as c:
                        box["r"] = c.call(method, params)
                except (DaemonError, OSError) as exc:
                    box["e"] = exc

            t = threading.Thread(target=call, daemon=True)
            t.start()
            time.sleep(rng.uniform(0.0, 1.5))
            if "r" in box:
                res["answered"] += 1
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGKILL)
                d.proc.wait(10)
            res["kills"] += 1
            t.join(10)
            d.start()
            wait_ping(d)
            now, recs = entries(root), history(data)
            counts = Counter(now)
            res["duplicated"] += sum(c - 1 for c in counts.values() if c > 1)
            ids = Counter(str(r.get("id")) for r in recs)
            res["dup_ids"] += sum(c - 1 for c in ids.values() if c > 1)
            missing = last - set(now) - kept(recs)  # in a file before this round: where is it now?
            res["lost"] += len(missing)
            jdir = data / "journal"
            res["journal_left"] += len(list(jdir.glob("j-*.json"))) if jdir.exists() else 0
            if missing:
                print(f"  round {i} ({op}): lost {sorted(missing)[:3]}", file=sys.stderr)
            ever |= set(now)
            last = set(now)
        d.stop()
        # Entries that were in a file once and are kept nowhere now: cleared or replaced long ago, and
        # their records pushed out by the history's bound (not a crash loss: that is ``lost``).
        res["aged_out"] = len(ever - set(entries(root)) - kept(history(data)))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    res.update(ops=dict(res["ops"]), entries_tracked=len(ever), seconds=round(time.perf_counter() - t0, 1))
    res["ok"] = res["lost"] == 0 and res["duplicated"] == 0 and res["dup_ids"] == 0 and res["journal_left"] == 0
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--entries", type=int, default=500, help="entries per file of peer bob (3 files)")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv)
    res = run(a.kills, a.seed, a.entries, keep=a.keep)
    for key in ("kills", "ops", "answered", "entries_tracked", "lost", "aged_out", "duplicated", "dup_ids",
                "journal_left", "seconds", "ok"):
        print(f"{key:18} {res[key]}")
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
