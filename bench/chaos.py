"""Crash-safety run: SIGKILL the daemon again and again while files change, then prove nothing was lost.

Why: memoryd runs unattended on people's own notes; a power cut or an OOM
kill can land at any instruction. The index is only trustworthy if every such
kill is repaired by the next start. This script runs the real daemon
(``python -m memoryd.daemon.cli run``) on a copied corpus while a driver edits,
creates, renames and deletes files (recording the exact bytes each file must
hold), and SIGKILLs the daemon ``--kills`` times at varied moments: right
after a burst of edits (embedding and SQLite commits in flight), in a steady
edit stream (FAISS snapshots run every second), during a ``remember`` write,
and during the start-up reconcile. After the last kill it checks:

* the index equals a clean rebuild: the same set of (path, start_line,
  end_line, sha256(text)) chunks, read straight from both SQLite files;
* every FAISS id has a chunk row and vice versa (``vectors.faiss`` after a
  clean stop);
* a keyword search finds the latest marker of every file;
* every user file holds exactly the bytes the driver wrote (no truncation);
* a further restart embeds nothing (``reconcile.done embedded=0``).

Prints a table and, last, one JSON line; exit status 0 when all checks pass.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, memoryd_argv, run_oneshot, wait_ping, write_config

from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.errors import DaemonError

MODES = ("burst", "steady", "remember", "startup")


@dataclass
class Driver:
    """Edits files under ``root/notes`` and records the bytes each must hold (``truth``, by relative path)."""

    root: Path
    rng: random.Random
    truth: dict[str, str] = field(default_factory=dict)
    markers: dict[str, str] = field(default_factory=dict)
    counter: int = 0
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("edit", "create", "rename", "delete"), 0))

    def _marker(self) -> str:
        self.counter += 1
        return f"chaosmark{self.counter:07d}z"  # fixed width: no marker is a prefix of another

    def _write(self, rel: str, text: str) -> None:
        marker = self._marker()
        text += f"\n- Chaos marker {marker} recorded.\n"
        (self.root / rel).write_text(text, encoding="utf-8")
        self.truth[rel], self.markers[rel] = text, marker

    def seed(self, corpus: Path | None, n_generated: int) -> None:
        (self.root / "notes").mkdir(parents=True, exist_ok=True)
        sources = sorted(corpus.rglob("*.md")) if corpus and corpus.is_dir() else []
        for i, src in enumerate(sources):
            self._write(f"notes/c{i:03d}.md", src.read_text(encoding="utf-8"))
        for i in range(n_generated - len(sources)):
            self._write(f"notes/g{i:03d}.md", _generated_note(self.rng, i))

    def step(self) -> None:
        """One random operation; edits dominate, as in real use."""
        op = self.rng.choices(("edit", "create", "rename", "delete"), (80, 8, 7, 5))[0]
        if op != "create" and len(self.truth) < 5:
            op = "create"
        self.ops[op] += 1
        if op == "create":
            self._write(f"notes/n{self.counter:07d}.md", _generated_note(self.rng, self.counter))
            return
        rel = self.rng.choice(sorted(self.truth))
        if op == "edit":
            body = self.truth[rel]
            if self.rng.random() < 0.3:  # rewrite a middle part too, not only appends
                cut = self.rng.randrange(len(body) // 2 + 1)
                body = body[:cut] + f"\nRewritten paragraph {self.counter} about topic {self.rng.randrange(99)}.\n"
            self._write(rel, body)
        elif op == "rename":
            dest = f"notes/r{self.counter:07d}.md"
            (self.root / rel).rename(self.root / dest)
            self.truth[dest], self.markers[dest] = self.truth.pop(rel), self.markers.pop(rel)
        else:
            (self.root / rel).unlink()
            del self.truth[rel], self.markers[rel]

    def verify_files(self) -> list[str]:
        """Every recorded file byte-exact, no stray file under notes/."""
        bad = [rel for rel, text in self.truth.items()
               if not (self.root / rel).is_file() or (self.root / rel).read_text(encoding="utf-8") != text]
        on_disk = {p.relative_to(self.root).as_posix() for p in (self.root / "notes").rglob("*") if p.is_file()}
        return bad + sorted(on_disk - set(self.truth))


def _generated_note(rng: random.Random, i: int) -> str:
    topics = ("deploy", "budget", "cache", "hiring", "database", "travel", "editor", "release")
    lines = [f"# Note {i}", ""]
    for _ in range(rng.randrange(3, 25)):
        t = rng.choice(topics)
        item, owner = rng.randrange(10**6), rng.choice("ABCDE")
        lines.append(f"- Decided to revisit the {t} plan with item {item}; owner {owner}.")
        if rng.random() < 0.2:
            lines += ["", f"## {t.title()} section {rng.randrange(100)}", ""]
    return "\n".join(lines) + "\n"


def chunk_set(data_dir: Path) -> set[tuple[str, int, int, str]]:
    """(path, start_line, end_line, sha256(text)) of every chunk, read from SQLite directly."""
    con = sqlite3.connect(f"file:{data_dir / 'index.sqlite3'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT f.path, c.start_line, c.end_line, c.text FROM chunks c "
                           "JOIN files f ON f.id = c.file_id").fetchall()
    finally:
        con.close()
    return {(p, s, e, hashlib.sha256(t.encode()).hexdigest()) for p, s, e, t in rows}


def faiss_mismatch(data_dir: Path) -> int:
    """Ids in ``vectors.faiss`` without a chunk row plus chunk rows without a vector."""
    import faiss

    con = sqlite3.connect(f"file:{data_dir / 'index.sqlite3'}?mode=ro", uri=True)
    try:
        chunk_ids = {r[0] for r in con.execute("SELECT id FROM chunks")}
    finally:
        con.close()
    index = faiss.read_index(str(data_dir / "vectors.faiss"))
    id_map = faiss.downcast_index(index).id_map  # type: ignore[attr-defined]  # an IndexIDMap2
    ids = set(faiss.vector_to_array(id_map).tolist())
    return len(ids ^ chunk_ids)


def _remember(sock: Path, n: int, acked: list[dict[str, Any]]) -> None:
    """One ``remember`` call; a kill mid-call is expected (the error is the point)."""
    content = f"The user decided that chaos project {n} ships on day {n % 28 + 1} with codename rem{n:07d}q."
    try:
        with Client(sock, timeout=10) as c:
            res = c.call("remember", {"content": content, "type": "decision"})
        acked.append({**res, "content": content})
    except (DaemonError, OSError):
        pass


def chaos_round(i: int, mode: str, d: Daemon, drv: Driver, rng: random.Random, acked: list[dict[str, Any]]) -> None:
    """Start, disturb and SIGKILL the daemon once."""
    d.start()
    try:
        if mode == "startup":
            time.sleep(rng.uniform(0.2, 1.5))  # lands during imports, model load or the start-up reconcile
            return
        wait_ping(d)
        if mode == "burst":
            for _ in range(rng.randrange(20, 80)):
                drv.step()
            time.sleep(rng.uniform(0.0, 1.5))  # the debounced batch is being embedded/committed now
        elif mode == "steady":
            t_end = time.monotonic() + rng.uniform(0.5, 2.5)
            while time.monotonic() < t_end:
                drv.step()
                time.sleep(rng.uniform(0.01, 0.15))
        else:
            t = threading.Thread(target=_remember, args=(d.socket, i, acked))
            t.start()
            time.sleep(rng.uniform(0.0, 0.08))
            _kill(d)
            t.join(15)
    finally:
        _kill(d)


def _kill(d: Daemon) -> None:
    if d.proc is not None and d.proc.poll() is None:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)


def final_checks(tmp: Path, root: Path, data: Path, cfg: Path, drv: Driver,
                 acked: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Daemon(tmp, [root], data, cfg, name="final") as d:
        st = d.wait_idle(600)
        out["recovery_embedded"] = sum(e.get("embedded", 0) for e in d.events("reconcile.done"))
        with d.client() as c:
            out["markers_missing"] = sum(
                not any(h["path"] == rel and m in h["text"]
                        for h in c.call("search", {"query": m, "k": 3, "mode": "keyword"})["hits"])
                for rel, m in drv.markers.items())
        out["status_vectors_vs_chunks"] = st["index"]["vectors"] - st["chunks"]
        out["clean_exit"] = d.stop(30)
    out["faiss_mismatch"] = faiss_mismatch(data)
    rebuilt = tmp / "rebuild"
    run_oneshot(memoryd_argv("index", [root], rebuilt, cfg), tmp, 600)
    out["chunks"] = len(chunk_set(data))
    out["chunk_mismatch"] = len(chunk_set(data) ^ chunk_set(rebuilt))
    with Daemon(tmp, [root], data, cfg, name="again") as d:
        d.wait_idle(600)
        done = d.events("reconcile.done")
        out["reembedded_on_restart"] = sum(e.get("embedded", 0) for e in done) if done else -1
    out["files_bad"] = drv.verify_files()
    out["remember_lost"] = sum(
        r.get("decision") == "appended" and r["content"] not in (root / r["path"]).read_text(encoding="utf-8")
        for r in acked if r.get("path"))
    return out


def run_chaos(kills: int, seed: int, provider: str = "hash", corpus: Path | None = None,
              n_files: int = 100, keep: bool = False, echo: bool = True, prime: bool = True) -> dict[str, Any]:
    """The whole run; returns the numbers (``ok`` is True when every check passed).

    ``prime`` indexes the corpus once before the first kill (``memoryd index``), as on a machine that already
    has an index; without it a slow model may never finish the first 256-chunk group between kills.
    """
    tmp = bench_tmp("chaos-")
    rng = random.Random(seed)
    root, data = tmp / "root", tmp / "data"
    cfg = write_config(tmp / "memoryd.toml", {
        "embedding": {"provider": provider}, "log": {"format": "json"},
        "watch": {"debounce_ms": 150, "settle_ms": 50, "max_delay_ms": 800},
        "schedule": {"snapshot_interval_s": 1},
        "write": {"max_per_turn": 1000, "max_per_minute": 1000},
    })
    drv = Driver(root, rng)
    drv.seed(corpus, n_files)
    acked: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        if prime:
            run_oneshot(memoryd_argv("index", [root], data, cfg), tmp, 600)
        d = Daemon(tmp, [root], data, cfg, name="chaos")
        for i in range(kills):
            chaos_round(i, MODES[i % len(MODES)], d, drv, rng, acked)
            for _ in range(rng.randrange(0, 4)):  # edits while no daemon runs: only a reconcile sees them
                drv.step()
            if echo and (i + 1) % 10 == 0:
                print(f"  {i + 1}/{kills} kills, {sum(drv.ops.values())} operations", file=sys.stderr, flush=True)
        res = final_checks(tmp, root, data, cfg, drv, acked)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    res.update(kills=kills, seed=seed, provider=provider, primed=prime, files=len(drv.truth), ops=dict(drv.ops),
               remember_acked=len(acked), seconds=round(time.perf_counter() - t0, 1))
    res["ok"] = (res["chunk_mismatch"] == 0 and res["faiss_mismatch"] == 0 and res["markers_missing"] == 0
                 and not res["files_bad"] and res["reembedded_on_restart"] == 0 and res["remember_lost"] == 0
                 and res["status_vectors_vs_chunks"] == 0)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--provider", default="hash", help="hash (default, fast) or e5-small")
    p.add_argument("--corpus", type=Path, default=None,
                   help="a folder of Markdown files to start from, e.g. an eval folder (default: generated notes)")
    p.add_argument("--files", type=int, default=100, help="generate notes up to this many files")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--cold", action="store_true", help="no initial index: the first kills land in the first build")
    a = p.parse_args(argv)
    res = run_chaos(a.kills, a.seed, a.provider, a.corpus, a.files, a.keep, prime=not a.cold)
    for key in ("kills", "ops", "files", "chunks", "remember_acked", "recovery_embedded", "chunk_mismatch",
                "faiss_mismatch", "status_vectors_vs_chunks", "markers_missing", "files_bad", "remember_lost",
                "reembedded_on_restart", "seconds", "ok"):
        print(f"{key:26} {res[key]}")
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
