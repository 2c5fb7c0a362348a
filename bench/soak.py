"""Soak run: tens of thousands of edits against one daemon while clients search, tracking leaks and latency.

Why: memoryd runs for months. A leak of one file descriptor per rename, one
thread per reconnect or a few kB per batch never shows in a test that lasts
seconds, but ends in EMFILE or an OOM kill after weeks. This script runs the
real daemon (``python -m memoryd.daemon.cli run``, hash embedder, short debounce) on a
copied corpus (LoCoMo conv-41 + generated notes) while a driver makes
``--edits`` edits (appends, rewrites, editor-style atomic saves, creates,
renames, deletes) paced over ``--minutes``, and ``--clients`` threads call
``search`` over the socket the whole time. Every ``--sample-s`` seconds it
samples the daemon's RSS (``VmRSS``), open fds, threads and the query p50/p99
of that window.

Reported: the RSS slope in MB per 1,000 edits (least squares over the second
half of the run, after warm-up), fds/threads/p99 first vs last, errors (client
errors + driver errors + daemon ``error`` log records; must be 0), and a final
check that the index matches the files: the latest marker of a sample of files
is found by a keyword search in that file, ``index.vectors == chunks``, and the
chunk set equals a clean rebuild. Prints a table, then one JSON line; exit 0
when every check passes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    Daemon,
    bench_tmp,
    fmt,
    generate_notes,
    memoryd_argv,
    note_line,
    percentile,
    print_table,
    run_oneshot,
    write_config,
)
from chaos import chunk_set

from memoryd.daemon.client.rpc_client import Client

OPS = ("append", "rewrite", "atomic_save", "create", "rename", "delete")
WEIGHTS = (55, 15, 10, 8, 7, 5)


@dataclass
class Driver:
    """Edits Markdown files under ``root``; ``markers`` maps each file it wrote to the last marker in it."""

    root: Path
    rng: random.Random
    target_files: int
    markers: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    counter: int = 0  # markers written
    serial: int = 0  # operations made: new names come from it (a marker count could repeat a name)
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))

    def _marker(self) -> str:
        self.counter += 1
        return f"soakmark{self.counter:08d}z"  # fixed width: no marker is a prefix of another

    def _write(self, rel: str, body: str, atomic: bool = False) -> None:
        marker = self._marker()
        text = body.rstrip("\n") + f"\n- Soak marker {marker} noted.\n"
        path = self.root / rel
        if atomic:  # an editor's save: write a sibling, rename it over the file
            tmp = path.with_name(path.name + ".swp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        else:
            path.write_text(text, encoding="utf-8")
        self.markers[rel] = marker

    def step(self) -> str:
        """One operation; returns its name. Appends dominate, as in a real memory folder."""
        op = self.rng.choices(OPS, WEIGHTS)[0]
        if op == "delete" and len(self.files) <= self.target_files // 2:
            op = "create"
        if op == "create" and len(self.files) >= self.target_files * 3 // 2:
            op = "append"
        self.ops[op] += 1
        self.serial += 1
        if op == "create":
            rel = f"soak/n{self.serial:08d}.md"
            self._write(rel, "\n".join(["# Soak note", ""] + [note_line(self.rng) for _ in range(6)]))
            self.files.append(rel)
            return op
        i = self.rng.randrange(len(self.files))
        rel = self.files[i]
        path = self.root / rel
        if op == "delete":
            path.unlink()
            self.files[i] = self.files[-1]
            self.files.pop()
            self.markers.pop(rel, None)
        elif op == "rename":
            dest = f"soak/r{self.serial:08d}.md"
            path.rename(self.root / dest)
            self.files[i] = dest
            if rel in self.markers:
                self.markers[dest] = self.markers.pop(rel)
        else:
            body = path.read_text(encoding="utf-8")
            if op == "append" and len(body) < 12_000:
                body += note_line(self.rng) + "\n"
            else:  # rewrite the second half (also keeps files from growing without end)
                body = body[: len(body) // 2] + "\n" + "\n".join(note_line(self.rng) for _ in range(4))
            self._write(rel, body, atomic=op == "atomic_save")
        return op


def seed_root(root: Path, corpus: Path | None, n_generated: int, seed: int) -> list[str]:
    """Copy the corpus to ``root/locomo`` and generate notes under ``root/gen``; returns the relative paths."""
    (root / "soak").mkdir(parents=True)
    if corpus is not None and corpus.is_dir():
        shutil.copytree(corpus, root / "locomo", ignore=shutil.ignore_patterns("*.jsonl"))
    generate_notes(root / "gen", n_generated, seed)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))


def load_queries(corpus: Path | None, rng: random.Random) -> list[str]:
    out = [note_line(rng).lstrip("- ") for _ in range(100)]
    qfile = corpus / "queries.jsonl" if corpus is not None else None
    if qfile is not None and qfile.is_file():
        out += [json.loads(line)["question"] for line in qfile.read_text(encoding="utf-8").splitlines() if line]
    return out


class Searchers:
    """``n`` threads calling ``search`` in a loop; latencies (s) collected per sampling window."""

    def __init__(self, socket: Path, n: int, queries: list[str], think_s: float) -> None:
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._window: list[float] = []
        self.answered = 0
        self.errors: list[str] = []
        self._threads = [threading.Thread(target=self._run, args=(socket, queries, think_s, i), name=f"soak-q{i}")
                         for i in range(n)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(60)

    def take_window(self) -> list[float]:
        with self._lock:
            out, self._window = self._window, []
        return out

    def _run(self, socket: Path, queries: list[str], think_s: float, seed: int) -> None:
        rng = random.Random(seed)
        with Client(socket, timeout=30) as c:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    res = c.call("search", {"query": rng.choice(queries), "k": 8})
                    if not isinstance(res, dict) or "hits" not in res:
                        raise ValueError(f"malformed search result {str(res)[:200]}")
                except Exception as exc:  # every failure is a finding: count it, keep going
                    with self._lock:
                        self.errors.append(repr(exc)[:300])
                    continue
                with self._lock:
                    self._window.append(time.perf_counter() - t0)
                    self.answered += 1
                self.stop.wait(think_s)


def proc_sample(pid: int) -> dict[str, float]:
    """RSS (MB), open fds and threads of ``pid`` from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024, "threads": int(fields["Threads"]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def rss_slope(samples: list[dict[str, Any]]) -> float | None:
    """MB of RSS per 1,000 edits: least-squares slope over the samples of the second half of the run."""
    half = [s for s in samples if s["t"] >= samples[-1]["t"] / 2] if samples else []
    if len(half) < 3:
        return None
    xs, ys = [s["edits"] / 1000 for s in half], [s["rss_mb"] for s in half]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def daemon_errors(log_path: Path) -> list[str]:
    """The daemon's log records at level error or above (each is a failure of the run)."""
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line[:300] for line in lines
            if line.startswith("{") and json.loads(line).get("level") in ("error", "critical")]


def drive(d: Daemon, drv: Driver, q: Searchers, edits: int, seconds: float, sample_s: float,
          echo: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Make ``edits`` edits paced over ``seconds``, sampling the daemon every ``sample_s``; (samples, errors)."""
    assert d.proc is not None
    samples: list[dict[str, Any]] = []
    errors: list[str] = []
    t0 = time.monotonic()
    next_sample = t0 + sample_s
    for i in range(edits):
        now = time.monotonic()
        if now >= next_sample:
            samples.append(_sample(d.proc.pid, now - t0, i, q.take_window()))
            next_sample += sample_s
            if echo:
                s = samples[-1]
                print(f"  {s['t']:6.0f} s  {i:6d} edits  rss {s['rss_mb']:.1f} MB  fds {s['fds']}  "
                      f"threads {s['threads']}  p99 {fmt(s['p99_ms'], 1)} ms  load {s['load1']}",
                      file=sys.stderr, flush=True)
        d.check_alive()
        try:
            drv.step()
        except OSError as exc:
            errors.append(f"edit {i}: {exc}")
        delay = t0 + (i + 1) * seconds / edits - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the driver, not synchronisation
    samples.append(_sample(d.proc.pid, time.monotonic() - t0, edits, q.take_window()))
    return samples, errors


def _sample(pid: int, t: float, edits: int, lat: list[float]) -> dict[str, Any]:
    def ms(p: float) -> float | None:
        return round(percentile(lat, p) * 1000, 2) if lat else None

    return {"t": round(t, 1), "edits": edits, **proc_sample(pid), "queries": len(lat),
            "p50_ms": ms(50), "p99_ms": ms(99), "load1": round(os.getloadavg()[0], 2)}


def final_checks(d: Daemon, drv: Driver, rng: random.Random, sample_files: int) -> dict[str, Any]:
    """Index vs files, on the drained daemon: the latest marker of sampled files, vectors == chunks."""
    st = d.wait_idle(600)
    rels = rng.sample(sorted(drv.markers), min(sample_files, len(drv.markers)))
    with d.client() as c:
        missing = [rel for rel in rels if not any(
            h["path"] == rel and drv.markers[rel] in h["text"]
            for h in c.call("search", {"query": drv.markers[rel], "k": 3, "mode": "keyword"})["hits"])]
    return {"files": st["files"], "chunks": st["chunks"], "vectors_minus_chunks": st["index"]["vectors"] - st["chunks"],
            "markers_checked": len(rels), "markers_missing": missing}


def run_soak(edits: int = 20_000, minutes: float = 10.0, clients: int = 3, sample_s: float = 10.0,
             seed: int = 1, corpus: Path | None = None, n_generated: int = 120, think_ms: float = 20.0,
             sample_files: int = 300, rebuild: bool = True, echo: bool = True, keep: bool = False) -> dict[str, Any]:
    """The whole run; returns the numbers (``ok`` True when every check passed)."""
    tmp = bench_tmp("soak-")
    rng = random.Random(seed)
    root, data = tmp / "root", tmp / "data"
    cfg = write_config(tmp / "memoryd.toml", {
        "embedding": {"provider": "hash"}, "log": {"format": "json"},
        "watch": {"debounce_ms": 200, "settle_ms": 50, "max_delay_ms": 1000},
        "schedule": {"snapshot_interval_s": 5},
    })
    drv = Driver(root, rng, target_files=0)
    try:
        drv.files = seed_root(root, corpus, n_generated, seed)
        drv.target_files = len(drv.files)
        with Daemon(tmp, [root], data, cfg, name="soak") as d:
            d.wait_idle(600)
            q = Searchers(d.socket, clients, load_queries(corpus, rng), think_ms / 1000)
            q.start()
            try:
                samples, drive_errors = drive(d, drv, q, edits, minutes * 60, sample_s, echo)
            finally:
                q.join()
            res = final_checks(d, drv, rng, sample_files)
            res["after_drain"] = _sample(d.proc.pid if d.proc else 0, samples[-1]["t"], edits, [])
            res["clean_exit"] = d.stop(60)
        if rebuild:
            run_oneshot(memoryd_argv("index", [root], tmp / "rebuild", cfg), tmp, 600)
            res["chunk_mismatch"] = len(chunk_set(data) ^ chunk_set(tmp / "rebuild"))
        res["daemon_errors"] = daemon_errors(d.log_path)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return _summarise(res, samples, drive_errors, q, drv)


def _summarise(res: dict[str, Any], samples: list[dict[str, Any]], drive_errors: list[str], q: Searchers,
               drv: Driver) -> dict[str, Any]:
    first, last = samples[0], samples[-1]
    slope = rss_slope(samples)
    errors = drive_errors + q.errors + res["daemon_errors"]
    res.update(
        edits=sum(drv.ops.values()), ops=dict(drv.ops), seconds=last["t"], queries=q.answered,
        rss_first_mb=round(first["rss_mb"], 1), rss_last_mb=round(last["rss_mb"], 1),
        rss_slope_mb_per_1k_edits=None if slope is None else round(slope, 3),
        fds_first=first["fds"], fds_last=last["fds"], threads_first=first["threads"], threads_last=last["threads"],
        p99_first_ms=first["p99_ms"], p99_last_ms=last["p99_ms"], errors=len(errors), error_samples=errors[:5],
        samples=samples,
    )
    res["ok"] = (res["errors"] == 0 and not res["markers_missing"] and res["vectors_minus_chunks"] == 0
                 and res.get("chunk_mismatch", 0) == 0 and res["clean_exit"] == 0)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--edits", type=int, default=20_000)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=3, help="search threads (2-4)")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds per sampling window")
    p.add_argument("--think-ms", type=float, default=20.0, help="pause of each search thread between queries")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--corpus", type=Path, default=None,
                   help="a folder of Markdown files to start from, e.g. an eval folder (default: generated notes)")
    p.add_argument("--generated", type=int, default=120, help="generated notes added to the corpus")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = p.parse_args(argv)
    res = run_soak(a.edits, a.minutes, a.clients, a.sample_s, a.seed, a.corpus, a.generated, a.think_ms,
                   keep=a.keep)
    print_table(["t s", "edits", "RSS MB", "fds", "threads", "queries", "p50 ms", "p99 ms", "load"],
                [[s["t"], s["edits"], f"{s['rss_mb']:.1f}", s["fds"], s["threads"], s["queries"],
                  fmt(s["p50_ms"], 2), fmt(s["p99_ms"], 2), s["load1"]] for s in res["samples"]])
    print()
    for key in ("edits", "ops", "queries", "seconds", "rss_first_mb", "rss_last_mb", "rss_slope_mb_per_1k_edits",
                "fds_first", "fds_last", "threads_first", "threads_last", "p99_first_ms", "p99_last_ms", "errors",
                "files", "chunks", "vectors_minus_chunks", "markers_checked", "markers_missing", "chunk_mismatch",
                "after_drain", "ok"):
        print(f"{key:28} {res.get(key)}")
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
