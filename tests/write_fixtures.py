"""Shared fixtures of the write-path tests: an in-process daemon serving the write methods on its socket."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.config import Config
from tests.helpers import start_daemon

# The hash embedder's cosines are token overlaps, not e5's: thresholds fitting it.
HASH_WRITE: dict[str, float] = {"reinforce_threshold": 0.9, "replace_threshold": 0.6, "cjk_reinforce_threshold": 0.9,
              "cjk_replace_threshold": 0.6, "cross_reinforce_threshold": 0.9, "cross_replace_threshold": 0.6}


@dataclass
class WriteDaemon:
    d: Daemon
    client: Client
    root: Path

    @property
    def socket(self) -> Path:
        return self.d.cfg.socket_path

    def close(self) -> None:
        self.client.close()
        self.d.shutdown()


def start_write_daemon(tmp_path: Path, short_dir: Path, **write: float) -> WriteDaemon:
    """A daemon whose first root holds ``MEMORY.md`` and an empty ``memory/``, with ``write`` settings."""
    (tmp_path / "root" / "memory").mkdir(parents=True)

    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **{**HASH_WRITE, **write}))  # type: ignore[arg-type]

    d, client, root = start_daemon(tmp_path, short_dir / "m.sock",
                                   {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n"},
                                   timeout=20, tweak=tweak)
    return WriteDaemon(d, client, root)
