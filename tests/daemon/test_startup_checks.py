"""Cheap checks come first: a busy socket or index stops ``memoryd run`` / ``memoryd index`` with
exit status 3 (the README's "start-up failed") before the model is loaded or built.

The subprocesses get an empty ``XDG_CACHE_HOME``: had they loaded the default model they would
have built it there, so "the cache folder was never created" proves the order without timing it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from memoryd.daemon.datalock import DataDirLock

ROOT = Path(__file__).resolve().parents[2]


def _memoryd(args: list[str], work: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config")}
    return subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_busy_socket_fails_with_3_before_the_model_loads(short_dir: Path) -> None:
    path = short_dir / "busy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(4)
        res = _memoryd(["run", "--socket", str(path), "--data-dir", str(short_dir / "data"),
                        "--root", str(short_dir / "root")], short_dir)
    finally:
        listener.close()
    assert res.returncode == 3, res.stderr[-2000:]
    assert "already running" in res.stderr and f"pid {os.getpid()}" in res.stderr
    assert "model.loaded" not in res.stderr and not (short_dir / "cache").exists()


def test_index_in_use_fails_with_3_before_the_model_loads(short_dir: Path) -> None:
    (short_dir / "root").mkdir()
    lock = DataDirLock(short_dir / "data")
    lock.acquire()
    try:
        for command in (["index"], ["run", "--socket", str(short_dir / "d.sock")]):
            res = _memoryd([*command, "--data-dir", str(short_dir / "data"), "--root", str(short_dir / "root")],
                           short_dir)
            assert res.returncode == 3, (command, res.stderr[-2000:])
            assert f"in use by another memoryd (pid {os.getpid()})" in res.stderr
            assert "model.loaded" not in res.stderr and not (short_dir / "cache").exists()
    finally:
        lock.release()


def test_bad_config_fails_with_3(short_dir: Path) -> None:
    bad = short_dir / "bad.toml"
    bad.write_text("[embedding]\nbatch_size = 0\n", encoding="utf-8")
    for command in (["run"], ["index"], ["search", "--offline", "x"]):
        res = _memoryd([*command, "--config", str(bad), "--data-dir", str(short_dir / "data")], short_dir)
        assert res.returncode == 3, (command, res.stderr[-2000:])
        assert "embedding.batch_size" in res.stderr
