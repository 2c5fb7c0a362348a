"""Faults around the daemon: full or read-only data directory, damaged index files, roots that go away,
inotify limits and bad model files. Each test runs a real daemon (in-process, hash embedder, or a
subprocess for exit codes) and checks that it keeps serving or fails with a clear message.

The disk-full and read-only cases need a filesystem of their own: they mount a small tmpfs (root in a
container is allowed to; elsewhere they skip, saying why).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import structlog

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.watch import watcher as watcher_mod
from memoryd.indexer.config import Config
from memoryd.indexer.errors import MemorydError
from tests.helpers import make_config, wait_for

REPO = Path(__file__).resolve().parents[2]


def _cfg(root: Path, data: Path, sock_dir: Path) -> Config:
    cfg = make_config(root, data, debounce_ms=50, settle_ms=20, max_delay_ms=300)
    return replace(cfg, server=replace(cfg.server, socket=sock_dir / "s.sock"))


@contextlib.contextmanager
def daemon(cfg: Config) -> Iterator[tuple[Daemon, Client]]:
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=20)
    try:
        wait_for(lambda: _idle(client), what="daemon idle")
        yield d, client
    finally:
        client.close()
        d.shutdown()


def _idle(client: Client) -> bool:
    st = client.call("status")
    return st["pending"] == 0 and not st["reconciling"]


def _hits(client: Client, word: str) -> list[dict[str, Any]]:
    hits = client.call("search", {"query": word, "k": 3, "mode": "keyword"})["hits"]
    return [h for h in hits if word in h["text"]]


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n\n- The deploy uses wombatkeyword tooling.\n")
    return root


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of its own (for ENOSPC and EROFS); skips where mounting is not permitted."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.decode().strip()}): needs root/CAP_SYS_ADMIN")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path) -> Path:
    """Fill the filesystem until ENOSPC; returns the filler file."""
    filler = mnt / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def test_disk_full_keeps_serving_logs_once_and_recovers(tmp_path: Path, tmpfs: Path, short_dir: Path) -> None:
    root = _root(tmp_path)
    with structlog.testing.capture_logs() as logs, daemon(_cfg(root, tmpfs / "data", short_dir)) as (_d, client):
        assert _hits(client, "wombatkeyword")
        filler = _fill(tmpfs)
        for i in range(3):  # three batches: the error must be logged once, not per batch
            body = "".join(f"- Line {j} about koalaword{i} and other matters number {j * 7}.\n" for j in range(3000))
            (root / f"big{i}.md").write_text(f"# Big {i}\n\n{body}")
            with pytest.raises(RpcClientError, match="disk full"):  # the caller is told, by name
                client.call("reindex", {"paths": [str(root / f"big{i}.md")], "wait": True})
        assert _hits(client, "wombatkeyword"), "reads must keep working while the disk is full"
        assert client.call("ping")["pid"] == os.getpid()
        assert [e["event"] for e in logs].count("disk.full") == 1, [e for e in logs if "disk" in e["event"]]
        filler.unlink()
        client.call("reindex", {"wait": True})
        assert any(e["event"] == "disk.recovered" for e in logs)
        assert all(_hits(client, f"koalaword{i}") for i in range(3)), "files must be indexed once space returns"
        # A full reindex is keyword first: the vectors follow in the background.
        st = wait_for(lambda: (s := client.call("status"))["vectors"]["pending"] == 0 and s, what="vectors")
        assert st["index"]["vectors"] == st["chunks"]


def test_read_only_data_dir_fails_clearly_at_start(tmp_path: Path, tmpfs: Path, short_dir: Path) -> None:
    root = _root(tmp_path)
    cfg = _cfg(root, tmpfs / "data", short_dir)
    with daemon(cfg) as (_d, client):
        assert _hits(client, "wombatkeyword")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    d = Daemon(cfg, env={})
    with pytest.raises(MemorydError) as err:
        d.startup()
    assert str(tmpfs / "data") in str(err.value) or "read-only" in str(err.value).lower(), str(err.value)


def test_truncated_faiss_snapshot_is_rebuilt_without_embedding(tmp_path: Path, short_dir: Path) -> None:
    root = _root(tmp_path)
    cfg = _cfg(root, tmp_path / "data", short_dir)
    with daemon(cfg) as (_d, client):
        chunks = client.call("status")["chunks"]
    snap = cfg.data_dir / "vectors.faiss"
    snap.write_bytes(snap.read_bytes()[: snap.stat().st_size // 2])
    with structlog.testing.capture_logs() as logs, daemon(cfg) as (_d, client):
        st = client.call("status")
        assert st["chunks"] == chunks and st["index"]["vectors"] == chunks
        assert client.call("search", {"query": "deploy tooling", "mode": "vector"})["hits"]
    done = [e for e in logs if e["event"] == "reconcile.done"]
    assert done and all(e["embedded"] == 0 for e in done)


def test_corrupt_database_is_kept_aside_and_rebuilt(tmp_path: Path, short_dir: Path) -> None:
    root = _root(tmp_path)
    cfg = _cfg(root, tmp_path / "data", short_dir)
    with daemon(cfg):
        pass
    db = cfg.data_dir / "index.sqlite3"
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 500)
    with structlog.testing.capture_logs() as logs, daemon(cfg) as (_d, client):
        assert _hits(client, "wombatkeyword")
    assert any(e["event"] == "index.corrupt" and e["log_level"] == "error" for e in logs)
    assert list(cfg.data_dir.glob("index.sqlite3.corrupt-*")), "the broken file must be kept for inspection"


def test_root_deleted_then_recreated(tmp_path: Path, short_dir: Path) -> None:
    root = _root(tmp_path)
    with daemon(_cfg(root, tmp_path / "data", short_dir)) as (d, client):
        watcher = d.watcher
        assert watcher is not None
        shutil.rmtree(root)

        def root_dead() -> bool:
            watcher.check()  # what the scheduler's 5 s health job does
            return not client.call("status")["roots"][0]["alive"]

        wait_for(root_dead, what="status to show the root gone")
        assert client.call("ping")["pid"] == os.getpid()
        root.mkdir()
        (root / "back.md").write_text("# Back\n\n- The root returned with platypusword.\n")

        def reindexed() -> bool:
            watcher.check()
            return bool(_hits(client, "platypusword")) and client.call("status")["roots"][0]["alive"]

        wait_for(reindexed, timeout=15, what="the re-created root to be watched and indexed")
        wait_for(lambda: _idle(client) and not _hits(client, "wombatkeyword"), what="the deleted file dropped")


def test_inotify_watch_limit_falls_back_to_polling(tmp_path: Path, short_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    class Exhausted(watcher_mod.Observer):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(watcher_mod, "_native_observer", Exhausted)
    root = _root(tmp_path)
    cfg = _cfg(root, tmp_path / "data", short_dir)
    cfg = replace(cfg, watch=replace(cfg.watch, poll_fallback_s=1))
    with structlog.testing.capture_logs() as logs, daemon(cfg) as (_d, client):
        assert client.call("status")["roots"][0]["backend"] == "polling"
        (root / "polled.md").write_text("# P\n\n- Seen by polling: echidnaword.\n")
        wait_for(lambda: _hits(client, "echidnaword"), timeout=10, what="the polled change")
    assert any(e["event"] == "watcher.polling_fallback" and e["log_level"] == "warning" for e in logs)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["missing", "garbage"])
def test_bad_model_file_is_a_clear_start_up_error(tmp_path: Path, short_dir: Path, model: str) -> None:
    root = _root(tmp_path)
    onnx, tok = tmp_path / "model.onnx", tmp_path / "tokenizer.json"
    if model == "garbage":
        onnx.write_bytes(os.urandom(4096))
        tok.write_text("{not json")
    cfg = tmp_path / "m.toml"
    cfg.write_text(f'[embedding]\nprovider = "onnx"\nmodel_path = "{onnx}"\ntokenizer_path = "{tok}"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    res = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(cfg), "--root", str(root),
                          "--data-dir", str(tmp_path / "data"), "--socket", str(short_dir / "s.sock")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert str(onnx) in res.stderr or str(tok) in res.stderr, res.stderr[-2000:]
