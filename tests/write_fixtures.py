"""Shared fixtures of the write-path tests: an in-process daemon serving the write methods on a socket."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memoryd.daemon.api.read import build_handlers
from memoryd.daemon.api.write import build_write_handlers
from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.daemon.rpc.server import SocketServer
from tests.helpers import make_config, ready, wait_for

# The hash embedder's cosines are token overlaps, not e5's: thresholds fitting it.
HASH_WRITE: dict[str, float] = {"reinforce_threshold": 0.9, "replace_threshold": 0.6, "cjk_reinforce_threshold": 0.9,
              "cjk_replace_threshold": 0.6, "cross_reinforce_threshold": 0.9, "cross_replace_threshold": 0.6}


@dataclass
class WriteDaemon:
    d: Daemon
    client: Client
    root: Path
    server: SocketServer


def start_write_daemon(tmp_path: Path, short_dir: Path, **write: float) -> WriteDaemon:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon, near the river.\n")
    cfg = make_config(root, tmp_path / "data", debounce_ms=100, max_delay_ms=1000)
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=short_dir / "m.sock"),
                              write=dataclasses.replace(cfg.write, **{**HASH_WRITE, **write}))  # type: ignore[arg-type]
    d = Daemon(cfg, env={})
    d.startup()
    server = SocketServer(short_dir / "w.sock", build_handlers(d) | build_write_handlers(d))
    try:
        server.start()
        client = Client(server.address, timeout=20)
        wait_for(lambda: ready(client), what="start-up reconcile")
    except BaseException:
        server.stop()
        d.shutdown()
        raise
    return WriteDaemon(d, client, root, server)


@pytest.fixture
def wd(tmp_path: Path, short_dir: Path) -> Iterator[WriteDaemon]:
    w = start_write_daemon(tmp_path, short_dir)
    try:
        yield w
    finally:
        w.client.close()
        w.server.stop()
        w.d.shutdown()
