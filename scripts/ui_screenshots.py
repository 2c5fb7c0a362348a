#!/usr/bin/env python3
"""Take the screenshots of docs/ui.md: every page of ``memoryd ui`` in headless Chromium.

    .venv/bin/python scripts/ui_screenshots.py [--out docs/ui] [--files 5000] [--chromium /usr/bin/chromium]

A throw-away daemon (the real default model, in this process) serves a sample memory at the size
the pages are measured at (``bench/ui_pages.py``): the owner's facts, a peer's and a group's notes,
an agent's folder, a Memory Bank focus section with an entry's ``<!-- memoryd: … -->`` marker, a
note holding a ``<script>``, ``--files`` generated notes (~6 entries each) and a 20,000-line log —
and a few writes fill the history and the audit log (a forget and its undo, a section update, a
promote, a peer's write and a refused one). The shots are taken once every file is searchable by
keyword, while the vectors may still be filling (the dashboard shows that backlog). The real
``memoryd ui`` server then runs in a thread, and Playwright drives Debian's Chromium through it.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memoryd.daemon.app import Daemon  # noqa: E402
from memoryd.daemon.client.rpc_client import Client, RpcClientError  # noqa: E402
from memoryd.daemon.ui.server import build  # noqa: E402
from memoryd.indexer.config import Config, with_overrides  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FILES = {
    "MEMORY.md": "# Memory\n\n## Facts\n\n- The office is in Lisbon, near the river.\n"
                 "- Production deploys go through `make ship` after the smoke tests pass.\n"
                 "- The on-call rotation changes every Monday at 10:00.\n"
                 "- Notes pasted from a chat: <script>alert('hi')</script> (shown, never run).\n",
    "memory/2026-01-05.md": "# 2026-01-05\n\n- Decided to move the nightly backup job to 02:00 so it stops "
                            "overlapping the report.\n- Met Ana and Bo to review the billing export.\n",
    "peers/alice/MEMORY.md": "# Alice\n\n## Preferences\n\n- Alice prefers green tea over coffee.\n"
                             "- Alice wants weekly summaries on Fridays.\n",
    "groups/dev/MEMORY.md": "# Dev group\n\n## Decisions\n\n- The dev group ships on Thursdays.\n",
    "agents/coder/MEMORY.md": "# Coder agent\n\n- Run the linters before proposing a patch.\n",
    "memory-bank/activeContext.md": "# Active Context\n\n## Current Focus\n\n- Ship the export command.\n"
                                    "- Keep the page light. <!-- memoryd: importance=4 reinforced=2 -->\n",
}
LONG_PAGES = {"entries"}  # 100 entries a page: the viewport, not a 10,000-pixel image
PAGES = [("dashboard", "/", None), ("entries", "/entries", None), ("history", "/history", None),
         ("audit", "/audit", None), ("access", "/access", None),
         ("section", "/section?path=memory-bank/activeContext.md&section=Current+Focus", None)]


def sample(root: Path) -> None:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def grow(root: Path, files: int, work: Path) -> int:
    """Add bench/ui_pages.py's folder (notes, peers, groups, the 20k-line log) beside the sample, leaving the
    sample's files as the writes left them; returns how many memory files the root then holds."""
    sys.path.insert(0, str(REPO / "bench"))
    from ui_pages import build_folder

    build_folder(work, files, 6)
    for src in sorted(work.rglob("*.md")):
        dest = root / src.relative_to(work)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            src.replace(dest)
    return sum(1 for _ in root.rglob("*.md"))


def writes(client: Client) -> None:
    """History and audit records: a forget and its undo, a section update, a promote, a peer's writes."""
    out = client.call("forget", {"path": "MEMORY.md", "line": 7})
    client.call("undo", {"id": out["history_id"]})
    client.call("forget", {"path": "memory/2026-01-05.md", "line": 4})
    client.call("update_section", {"path": "memory-bank/activeContext.md", "section": "Current Focus",
                                   "content": "- Ship `memoryd ui`: dashboard, search, history with undo."})
    client.call("promote", {"path": "peers/alice/MEMORY.md", "line": 5, "to": "default"})
    alice = {"kind": "direct", "peer": "alice"}
    client.call("remember", {"content": "Alice is travelling to Porto in March for the offsite.", "session": alice})
    with contextlib.suppress(RpcClientError):  # refused, and audited as denied: what the audit page shows
        client.call("remember", {"content": "Bob's salary is confidential.", "namespace": "peer:bob",
                                 "session": alice})


def wait_idle(client: Client) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        st = client.call("status")
        if not st["pending"] and not st["reconciling"] and not st["vectors"]["pending"]:
            return
        time.sleep(0.1)
    raise SystemExit("the daemon did not settle in 300 s")


def wait_searchable(client: Client, files: int, timeout: float = 1800) -> None:
    """Until all ``files`` are indexed for keyword search (vectors may still be filling, as in a first hour)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = client.call("status")
        if st["files"] >= files and not st["pending"]:
            return
        time.sleep(0.5)
    raise SystemExit(f"the daemon did not index {files} files in {timeout:g} s")


def shoot(url: str, base: str, out: Path, chromium: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    taken = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 760})
        page.goto(url)
        for name, path, _ in PAGES:
            page.goto(base + path)
            taken.append(out / f"{name}.png")
            page.screenshot(path=str(taken[-1]), full_page=name not in LONG_PAGES)
        page.goto(base + "/search")
        page.locator("#q").press_sequentially("when do we deploy", delay=30)
        page.locator(".hit").first.wait_for()
        taken.append(out / "search.png")
        page.screenshot(path=str(taken[-1]), full_page=True)
        page.goto(base + "/search?q=when+do+we+deploy&explain=1")
        page.locator(".hit details.explain summary").first.click()
        taken.append(out / "search-explain.png")
        page.screenshot(path=str(taken[-1]), full_page=True)
        page.goto(base + "/search?q=when+do+we+deploy")
        page.locator(".hit a.where").first.click()
        page.wait_for_load_state("load")
        taken.append(out / "file.png")
        page.screenshot(path=str(taken[-1]))  # the viewport: a page of a file is up to 500 lines
        page.goto(base + "/file?path=notes/long-log.md&hl=15000#L15000")  # page 30 of 40
        taken.append(out / "file-pages.png")
        page.screenshot(path=str(taken[-1]))  # the viewport: the whole page is 500 lines
        browser.close()
    return taken


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "ui")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--files", type=int, default=5000, help="generated notes beside the sample (0: the sample only)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ui-shots-", dir="/tmp"))
    root = tmp / "notes"
    sample(root)
    cfg = with_overrides(Config(), roots=[root], data_dir=tmp / "data", socket=tmp / "m.sock")
    d = Daemon(cfg, env={})
    d.startup()
    server = None
    try:
        with Client(cfg.socket_path, timeout=60) as client:
            wait_idle(client)
            writes(client)  # first: a write waits for the worker, which the bulk embedding keeps busy
            wait_idle(client)
            if args.files:
                wait_searchable(client, grow(root, args.files, tmp / "generated"))
        server, sock, url = build(cfg.socket_path, 0)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        for png in shoot(url, url.split("/?")[0], args.out, args.chromium):
            print(png.relative_to(REPO) if png.is_relative_to(REPO) else png)
        server.should_exit = True
        thread.join(timeout=20)
    finally:
        if server is not None:
            server.config.app.state.ui.close()
        d.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
