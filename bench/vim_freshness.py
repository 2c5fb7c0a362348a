#!/usr/bin/env python3
"""Vim save → searchable: a real Vim in tmux, with and without the shipped on-save hook.

    python bench/vim_freshness.py [--files 200] [--saves 20] [--hook-saves 10] [--provider e5-small]

``bench/freshness.py`` writes files from Python; an editor's save is a different
sequence of events. Vim 9 and Neovim end a ``:w`` with ``CLOSE_WRITE`` and then
``ATTRIB`` (the file's mode is set again after the close), and the watcher must
still treat that as a finished write (``settle_ms``) rather than one that waits
the full ``debounce_ms``.

One daemon with the built-in watch settings (``debounce_ms`` 1500,
``settle_ms`` 100) serves ``--files`` generated notes, indexed once beforehand
with ``--provider`` (default: the real e5-small model). Two series follow, each
in its own Vim (``vim -u VIMRC -i NONE -n``) started from a shell in a detached
tmux session, each on its own note: "no hook" (a bare vimrc: only the watcher
sees the save) and "hook" (the vimrc sources ``editors/memoryd.vim``, whose
``BufWritePost`` runs ``memoryd reindex``). Each save appends a line holding a
unique token (``Go``, the line, ``Esc``, ``:w``) once the daemon is idle; the
clock starts when the token is first seen in the file on disk (the file is
polled every millisecond) and stops when a keyword ``search`` over the socket
returns a hit holding the token (polled every ``--poll-ms``). The daemon's
``status.debounced`` counters, read around every save, say which debounce
window released it ("settled", "quiet", "max_delay").

Prints a table, then one JSON line. Needs vim and tmux on PATH.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    Daemon,
    bench_tmp,
    daemon_env,
    fmt,
    generate_notes,
    loadavg,
    memoryd_argv,
    print_table,
    remove_tree,
    run_oneshot,
    summary,
    wait_until,
    write_config,
)

_TOKENS = itertools.count(1)
SERIES = ("no hook", "hook")


class Vim:
    """One Vim, started from ``bash`` in a detached tmux session on its own server socket."""

    def __init__(self, tmp: Path, name: str, vimrc: Path, note: Path) -> None:
        self.sock = tmp / f"tmux-{name.replace(' ', '-')}.sock"
        self.env = daemon_env(tmp)
        self.env.pop("TMUX", None)
        self._tmux("new-session", "-d", "-x", "120", "-y", "20", "-s", "bench", "bash --norc --noprofile -i")
        self.keys(f"vim -u {vimrc} -i NONE -n {note}", "Enter")
        wait_until(lambda: re.search(r"\d+L, \d+B", self.screen()) is not None, 15, "Vim's file message")

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", str(self.sock), *args], env=self.env, capture_output=True, text=True,
                             timeout=10, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"tmux {args}: {out.stderr.strip()}")
        return out.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "bench", *keys)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "bench")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.sock), "kill-server"], env=self.env, capture_output=True,
                       timeout=10, check=False)


@contextlib.contextmanager
def vim_session(tmp: Path, series: str, daemon: Daemon, note: Path) -> Iterator[Vim]:
    vimrc = tmp / f"vimrc-{series.replace(' ', '-')}"
    lines = ["set nocompatible"]
    if series == "hook":
        cmd = [sys.executable, "-m", "memoryd.daemon.cli", "reindex", "--socket", str(daemon.socket)]
        lines += [f"let g:memoryd_cmd = {json.dumps(cmd)}", f"source {REPO / 'editors' / 'memoryd.vim'}"]
    vimrc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vim = Vim(tmp, series, vimrc, note)
    try:
        yield vim
    finally:
        vim.close()


def save_once(daemon: Daemon, vim: Vim, note: Path, poll_s: float, timeout: float) -> tuple[float, str]:
    """Append a token line in Vim and ``:w``; (seconds from on-disk to searchable, window that released it)."""
    daemon.wait_idle(timeout=120)
    token = f"zebravim{next(_TOKENS):09d}"
    with daemon.client() as client:
        before = client.call("status").get("debounced", {})
        vim.keys("Go", f"- Saved from Vim: {token}.", "Escape", ":w", "Enter")
        deadline = time.perf_counter() + timeout
        while token not in note.read_text(encoding="utf-8", errors="replace"):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"Vim did not write {token} to {note} within {timeout:g} s:\n{vim.screen()}")
            time.sleep(0.001)
        t0 = time.perf_counter()
        while True:
            hits = client.call("search", {"query": token, "mode": "keyword", "k": 3})["hits"]
            if any(token in h["text"] for h in hits):
                elapsed = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{token} saved by Vim in {note} not found after {timeout:g} s")
            daemon.check_alive()
            time.sleep(poll_s)
        after = client.call("status").get("debounced", {})
    released = [k for k in after if after[k] > before.get(k, 0)]
    # Nothing released yet: the hook's reindex got there first (or the daemon has no counters).
    return elapsed, "+".join(released) or "none"


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = bench_tmp("mdb-vim-")
    try:
        root = tmp / "root"
        files = generate_notes(root, args.files, seed=args.seed)
        data = tmp / "data"
        cfg = write_config(tmp / "c.toml", {"embedding": {"provider": args.provider}})
        build_s, _ = run_oneshot(memoryd_argv("index", [root], data, cfg), tmp, timeout=args.index_timeout)
        results: dict[str, Any] = {}
        with Daemon(tmp, [root], data, cfg) as daemon:
            st = daemon.wait_idle(timeout=args.index_timeout)
            plan = {"no hook": args.saves, "hook": args.hook_saves}
            for i, series in enumerate(SERIES):
                if not plan[series]:
                    continue
                note = files[(i + 1) * len(files) // 3]
                times: list[float] = []
                windows: Counter[str] = Counter()
                with vim_session(tmp, series, daemon, note) as vim:
                    for _ in range(plan[series]):
                        elapsed, window = save_once(daemon, vim, note, args.poll_ms / 1000, 30)
                        times.append(elapsed)
                        windows[window] += 1
                s = summary(times)
                results[series] = {"p50_s": s["p50"], "p95_s": s["p95"], "max_s": s["max"], "saves": len(times),
                                   "windows": dict(windows), "samples_s": [round(x, 3) for x in times]}
        return {"files": st["files"], "chunks": st["chunks"], "model": st["model"]["id"],
                "provider": args.provider, "build_s": round(build_s, 1), "series": results}
    finally:
        remove_tree(tmp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=200, help="generated notes in the indexed folder")
    ap.add_argument("--saves", type=int, default=20, help="saves without the hook (0: skip)")
    ap.add_argument("--hook-saves", type=int, default=10, help="saves with editors/memoryd.vim (0: skip)")
    ap.add_argument("--provider", default="e5-small", help='embedding provider ("hash": the fast test embedder)')
    ap.add_argument("--poll-ms", type=float, default=10.0, help="search polling interval (the resolution)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--index-timeout", type=float, default=600.0, help="bound on the initial index, seconds")
    args = ap.parse_args()
    missing = [p for p in ("vim", "tmux") if not shutil.which(p)]
    if missing:
        sys.exit(f"vim_freshness: needs {' and '.join(missing)} on PATH")

    load_before = loadavg()
    out = run(args)
    header = ["model", "files", "chunks", "vim save", "saves", "p50 s", "p95 s", "max s", "released by"]
    rows = [[out["model"][:24], out["files"], out["chunks"], series, r["saves"], fmt(r["p50_s"]), fmt(r["p95_s"]),
             fmt(r["max_s"]), " ".join(f"{k}:{v}" for k, v in sorted(r["windows"].items()))]
            for series, r in out["series"].items()]
    print_table(header, rows)
    print(f"debounce_ms 1500, settle_ms 100 (built-in); polling resolution {args.poll_ms:g} ms; "
          f"load average before {load_before}, after {loadavg()}")
    print(json.dumps({**out, "poll_ms": args.poll_ms, "loadavg_before": load_before, "loadavg_after": loadavg()}))


if __name__ == "__main__":
    sys.exit(main())
