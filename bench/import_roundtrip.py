"""Export → clear → import of ~26,000 entries through the real daemon and CLI (issue #37 item 4).

Why: ``memoryd export`` then ``memoryd import`` is how a memory is backed up and
restored, and an export is bigger than one request (the daemon takes 1 MiB / 1,000
lines a request). This script builds a first root of ``--files`` (260) files holding
``--entries`` (26,000) entries in every shape the files take (sections, prose,
journals, a peer's ``MEMORY.md``, markers, continuation lines), starts the real daemon
(``memoryd run``, ``--provider`` hash unless told), waits until it is idle, and measures:

* the **reference**: reading and writing every file once (what any restore must do at least);
* ``memoryd export -o FILE`` (the CLI, through the socket);
* ``clear`` of every namespace;
* ``memoryd import FILE`` (the CLI: split into requests, a progress bar, one write per file per request);
* whether every file came back byte for byte;
* ``memoryd import FILE`` again (everything ``unchanged``: nothing written).

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO, Daemon, bench_tmp, daemon_env, loadavg, print_report, remove_tree, write_config

WORDS = ("harbour", "violet", "granite", "lantern", "meadow", "copper", "thistle", "orchard", "falcon", "ember",
         "juniper", "quartz", "saffron", "walnut", "heron", "maple", "pewter", "sorrel", "willow", "basalt")


def _fact(i: int) -> str:
    w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
    return f"Fact {i}: the {w[0]} {w[1]} plan uses {w[2]} and {w[3]} with budget {i * 37 % 997} units."


def _entry(i: int) -> str:
    if i % 9 == 0:
        return f"- {_fact(i)} <!-- memoryd: importance=3 -->\n"
    if i % 13 == 0:
        return f"* {_fact(i)}\n  continued: {WORDS[i % len(WORDS)]} details.\n"
    return f"- {_fact(i)}\n"


def seed(root: Path, files: int, entries: int) -> dict[str, int]:
    """``files`` files of about ``entries / files`` entries each; returns entries per file."""
    per = max(1, entries // files)
    counts: dict[str, int] = {}
    n = 0
    for f in range(files):
        rel = (f"memory/2026-{1 + f // 28 % 12:02d}-{1 + f % 28:02d}.md" if f % 4 == 0 else
               f"peers/p{f % 7}/MEMORY.md" if f % 4 == 1 and f < 28 else f"notes/topic{f:03d}.md")
        if rel in counts:
            rel = f"notes/topic{f:03d}.md"
        body = [f"# File {f}\n\n## Facts\n\n"]
        for k in range(per):
            if k == per // 2:
                body.append("\nSome prose between the sections.\n\n## More\n\n")
            body.append(_entry(n))
            n += 1
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body), encoding="utf-8")
        counts[rel] = per
    return counts


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))}


def reference(root: Path, scratch: Path) -> float:
    """Seconds to read every file and write it elsewhere (the floor of any restore)."""
    t0 = time.perf_counter()
    for p in sorted(root.rglob("*.md")):
        out = scratch / p.relative_to(root)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(p.read_bytes())
    return time.perf_counter() - t0


def cli(tmp: Path, d: Daemon, *args: str) -> tuple[float, str]:
    argv = [sys.executable, "-m", "memoryd.daemon.cli", *args, "--socket", str(d.socket)]
    env = {**daemon_env(tmp), "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"memoryd {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return took, done.stdout


def run(provider: str, files: int, entries: int, keep: bool) -> dict[str, Any]:
    tmp = bench_tmp("import-rt-")
    root, data = tmp / "root", tmp / "data"
    counts = seed(root, files, entries)
    cfg = write_config(tmp / "memoryd.toml", {"embedding": {"provider": provider}, "log": {"format": "json"},
                                              "write": {"wait_s": 120}})
    res: dict[str, Any] = {"provider": provider, "files": len(counts), "entries": sum(counts.values()),
                           "cpus": os.cpu_count(), "load_before": loadavg()}
    try:
        res["reference_read_write_s"] = reference(root, tmp / "copy")
        before = snapshot(root)
        with Daemon(tmp, [root], data, cfg, name="rt") as d:
            t0 = time.perf_counter()
            d.wait_idle(3600)
            res["initial_index_s"] = time.perf_counter() - t0
            dump = tmp / "all.jsonl"
            res["export_s"], _ = cli(tmp, d, "export", "-o", str(dump))
            res["export_bytes"] = dump.stat().st_size
            res["export_lines"] = sum(1 for _ in dump.open("rb"))
            t0 = time.perf_counter()
            with d.client(3600) as c:
                for ns in ("default", *sorted({f"peer:{r.split('/')[1]}" for r in counts if r.startswith("peers/")})):
                    c.call("clear", {"namespace": ns})
            res["clear_s"] = time.perf_counter() - t0
            res["import_s"], out = cli(tmp, d, "import", str(dump))
            res["import_summary"] = out.rstrip().rsplit("\n", 1)[-1]
            after = snapshot(root)
            res["files_byte_identical"] = sum(after.get(k) == v for k, v in before.items())
            res["reimport_s"], out = cli(tmp, d, "import", str(dump))
            res["reimport_summary"] = out.rstrip().rsplit("\n", 1)[-1]
            res["reimport_changed_files"] = sum(snapshot(root).get(k) != v for k, v in after.items())
        res["load_after"] = loadavg()
    finally:
        if not keep:
            remove_tree(tmp)
    ref = res["reference_read_write_s"]
    res["import_vs_reference"] = round(res["import_s"] / ref, 1) if ref else None
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="hash", help="hash (default: no model download) or e5-small")
    p.add_argument("--files", type=int, default=260)
    p.add_argument("--entries", type=int, default=26_000)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv)
    res = run(a.provider, a.files, a.entries, a.keep)
    print_report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
