"""The editor on-save hooks in ``editors/`` drive a real daemon.

The daemon runs as a subprocess with a 60 s debounce (``debounce_ms``,
``settle_ms`` and ``max_delay_ms`` all 60000), so its inotify watcher cannot
index a save within the test's 10 s bound: only the hook's ``memoryd reindex``
can make the new text searchable that fast. A control file, written straight
to disk (no hook), must stay unsearchable meanwhile — proof that the watcher
did not do the work.

Vim and Neovim run from a shell in tmux (a real terminal, real ``BufWritePost``); Emacs in
``--batch`` (its hook uses ``call-process`` with destination 0, which outlives
Emacs). Each editor's test is skipped when the editor (or tmux) is not on PATH.

Without a hook, the watcher alone must index a Vim save after ``settle_ms``:
Vim 9 and Neovim end ``:w`` with ``CLOSE_WRITE`` then ``ATTRIB``, and the
``ATTRIB`` must not send the save back to the full ``debounce_ms``. That test
runs the built-in watch settings and asserts which window released the save
(``status.debounced``), not a time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import Client, RpcClientError
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]
EDITORS = REPO / "editors"
WATCH_DELAY_MS = 60_000
HOOK_BOUND_S = 10.0

pytestmark = pytest.mark.slow


@dataclass
class Env:
    root: Path
    note: Path
    control: Path
    sock: Path
    env: dict[str, str]
    client: Client

    def found(self, word: str) -> list[dict[str, Any]]:
        return list(self.client.call("search", {"query": word, "mode": "keyword", "k": 5})["hits"])


def _wrapper(bin_dir: Path) -> None:
    """A ``memoryd`` on PATH that runs this checkout's CLI with this interpreter (no install needed)."""
    bin_dir.mkdir()
    exe = bin_dir / "memoryd"
    exe.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m memoryd.daemon.cli "$@"\n')
    exe.chmod(0o755)


def _ready(client: Client) -> bool:
    try:
        st = client.call("status")
    except (OSError, RpcClientError):
        return False
    return st["pending"] == 0 and not st["reconciling"]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _daemon(tmp_path: Path, short_dir: Path, watch: str) -> Iterator[Env]:
    """A running daemon with the ``[watch]`` settings ``watch``; the default socket of ``env`` is its socket."""
    root = tmp_path / "root"
    root.mkdir()
    note, control = root / "note.md", root / "control.md"
    note.write_text("# Note\n\nFirst line.\n")
    control.write_text("# Control\n\nWritten without any hook.\n")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[embedding]\nprovider = "hash"\n[watch]\n{watch}')
    _wrapper(tmp_path / "bin")
    # XDG_RUNTIME_DIR makes the daemon's socket the CLI's default one: the hooks run unconfigured.
    sock = short_dir / "memoryd" / "memoryd.sock"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "TMUX", "PYTHONDONTWRITEBYTECODE")}
    env.update(XDG_RUNTIME_DIR=str(short_dir), XDG_CONFIG_HOME=str(tmp_path / "noconfig"), HOME=str(tmp_path),
               PATH=f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    cmd = [sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(conf), "--root", str(root),
           "--data-dir", str(tmp_path / "data"), "--socket", str(sock)]
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    client = Client(sock, timeout=10)
    try:
        wait_for(lambda: proc.poll() is not None or sock.exists(), 30, "the daemon's socket")
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
        wait_for(lambda: _ready(client), 30, "the start-up reconcile")
        yield Env(root, note, control, sock, env, client)
    finally:
        client.close()
        _stop(proc)
        log.close()


@pytest.fixture
def daemon_env(tmp_path: Path, short_dir: Path) -> Iterator[Env]:
    """A running daemon whose watcher waits 60 s, so that only a hook can index a save in time."""
    watch = f"debounce_ms = {WATCH_DELAY_MS}\nsettle_ms = {WATCH_DELAY_MS}\nmax_delay_ms = {WATCH_DELAY_MS}\n"
    with _daemon(tmp_path, short_dir, watch) as e:
        # Written after the reconcile: only the (60 s) watcher could index it.
        e.control.write_text("# Control\n\nWritten without any hook: wombatcontrol.\n")
        yield e
        assert not e.found("wombatcontrol"), \
            "the watcher indexed the control file: the test no longer proves the hook did the work"


@pytest.fixture
def watcher_env(tmp_path: Path, short_dir: Path) -> Iterator[Env]:
    """A running daemon with the built-in watch settings (debounce_ms 1500, settle_ms 100)."""
    with _daemon(tmp_path, short_dir, "") as e:
        yield e


def _tmux(sock: Path, env: dict[str, str], *args: str) -> str:
    out = subprocess.run(["tmux", "-S", str(sock), *args], env=env, capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, f"tmux {args}: {out.stderr}"
    return out.stdout


def _needs(*programs: str) -> pytest.MarkDecorator:
    missing = [p for p in programs if not shutil.which(p)]
    return pytest.mark.skipif(bool(missing), reason=f"needs {' and '.join(programs)} on PATH (missing: {missing})")


VIMS = [pytest.param("vim", marks=_needs("vim", "tmux", "bash")),
        pytest.param("nvim", marks=_needs("nvim", "tmux", "bash"))]


@contextmanager
def _vim_in_tmux(e: Env, short_dir: Path, editor: str,
                 hook: bool) -> Iterator[tuple[Callable[[], str], Callable[..., None]]]:
    """``editor`` on the note, from a shell in a detached tmux session; yields (screen, keys)."""
    vimrc = short_dir / "vimrc"
    # shortmess-=F: Neovim, like Vim, shows the file message ("3L, 24B") that tells the test it is up.
    vimrc.write_text("set nocompatible shortmess-=F\n" + (f"source {EDITORS / 'memoryd.vim'}\n" if hook else ""))
    tsock = short_dir / "tmux.sock"
    _tmux(tsock, e.env, "new-session", "-d", "-x", "120", "-y", "20", "-s", "ed", "bash --norc --noprofile -i")

    def screen() -> str:
        return _tmux(tsock, e.env, "capture-pane", "-p", "-t", "ed")

    def keys(*k: str) -> None:
        _tmux(tsock, e.env, "send-keys", "-t", "ed", *k)

    try:
        keys(f"{editor} -u {vimrc} -i NONE -n {e.note}", "Enter")
        wait_for(lambda: re.search(r"\d+L, \d+B", screen()), 10, f"{editor}'s file message")  # "3L, 24B"
        yield screen, keys
    finally:
        subprocess.run(["tmux", "-S", str(tsock), "kill-server"], env=e.env, capture_output=True, timeout=10)


@pytest.mark.parametrize("editor", VIMS)
def test_vim_save_is_searchable_through_the_hook(daemon_env: Env, short_dir: Path, editor: str) -> None:
    """Vim 8+ (``job_start``) and Neovim (``jobstart``) started from a shell in a terminal: ``:w``, then ``:wq``.

    From a shell, as users do: when Vim itself is the terminal's process, ``:wq`` closes the terminal at once
    and the just-forked job can die of the hang-up before it detaches (see docs/editor-hooks.md).
    """
    e = daemon_env

    def saved(word: str) -> bool:
        return word in e.note.read_text()

    with _vim_in_tmux(e, short_dir, editor, hook=True) as (screen, keys):
        keys("Go", "quokkahook000001", "Escape", ":w", "Enter")
        wait_for(lambda: saved("quokkahook000001"), 10, f"{editor} to save")
        wait_for(lambda: e.found("quokkahook000001"), HOOK_BOUND_S, "the hook's re-index after :w")
        assert "written" in screen()
        # :wq: the job must outlive the editor (Vim: stoponexit ''; Neovim: detach).
        keys("Go", "quokkahook000002", "Escape", ":wq", "Enter")
        wait_for(lambda: saved("quokkahook000002"), 10, f"{editor} to save and quit")
        wait_for(lambda: e.found("quokkahook000002"), HOOK_BOUND_S, "the hook's re-index after :wq")
        assert e.found("quokkahook000002")[0]["path"] == "note.md"


@pytest.mark.parametrize("editor", VIMS)
def test_vim_save_without_a_hook_is_released_by_the_settle_window(watcher_env: Env, short_dir: Path,
                                                                   editor: str) -> None:
    """No hook: the watcher alone sees ``:w`` (…, CLOSE_WRITE, ATTRIB) and must take ``settle_ms``.

    The debouncer's counters say which window released the save: "settled" (the finished write's
    100 ms), not "quiet" (the full 1.5 s ``debounce_ms``). The time bound is only a generous cap.
    """
    e = watcher_env
    with _vim_in_tmux(e, short_dir, editor, hook=False) as (_screen, keys):
        before = e.client.call("status")["debounced"]
        keys("Go", "quokkasave000004", "Escape", ":w", "Enter")
        wait_for(lambda: "quokkasave000004" in e.note.read_text(), 10, f"{editor} to save")
        wait_for(lambda: e.found("quokkasave000004"), HOOK_BOUND_S, "the watcher's re-index after :w")
        after = e.client.call("status")["debounced"]
    assert after["settled"] > before["settled"], (before, after)
    assert after["quiet"] == before["quiet"], f"the save waited the full debounce_ms: {before} -> {after}"


@_needs("emacs")
def test_emacs_save_is_searchable_through_the_hook(daemon_env: Env, short_dir: Path) -> None:
    """Emacs visits the note through a symlinked folder (~/notes -> ~/Sync/notes): unlike Vim, it keeps that
    path as the buffer's file name, and the daemon does not resolve the paths it is sent, so the hook must."""
    e = daemon_env
    link = short_dir / "notes"
    link.symlink_to(e.root, target_is_directory=True)
    # A configured command (explicit --socket), unlike the Vim test's defaults.
    command = f'(setq memoryd-command (list "memoryd" "reindex" "--socket" "{e.sock}"))'
    edit = (f'(progn (find-file "{link / e.note.name}") (goto-char (point-max)) (insert "kiwihook000003\\n") '
            "(save-buffer) (kill-emacs 0))")
    out = subprocess.run(["emacs", "--batch", "-Q", "-L", str(EDITORS), "--eval", "(require 'memoryd)",
                          "--eval", "(memoryd-mode 1)", "--eval", command, "--eval", edit],
                         env={**e.env, "XDG_RUNTIME_DIR": "/nonexistent"}, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "kiwihook000003" in e.note.read_text()
    wait_for(lambda: e.found("kiwihook000003"), HOOK_BOUND_S, "the hook's re-index (emacs)")
    assert e.found("kiwihook000003")[0]["path"] == "note.md"
