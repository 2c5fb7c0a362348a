"""``memoryd init`` and ``memoryd doctor`` (issue #29 item 3): a config on a fresh machine in one command, and
one line per check of a set-up, each verdict driven by injected inputs (no real home, no real /proc)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client import cli, doctor
from memoryd.daemon.client.cli_setup import default_config_text
from memoryd.daemon.client.init import ROOTS_LINE, config_text, parse_answer
from memoryd.indexer import config as configmod
from memoryd.indexer.errors import NotRunningError
from tests.helpers import running_daemon

# -- init -------------------------------------------------------------------------------------


def _init(home: Path, *argv: str) -> int:
    return cli.main(["init", "--home", str(home), *argv])


def test_init_creates_the_missing_folder_and_a_config_that_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert _init(home, "--root", str(tmp_path / "notes"), "--root", str(tmp_path / "work")) == 0
    path = home / ".config" / "memoryd" / "memoryd.toml"
    out = capsys.readouterr().out
    assert f"created {path}" in out and str(tmp_path / "notes") in out
    cfg = configmod.load(path, env={"HOME": str(home)})
    assert cfg.watch.roots == (tmp_path / "notes", tmp_path / "work")
    assert (tmp_path / "notes").is_dir()
    assert path.stat().st_mode & 0o777 == 0o600  # #38 item 13: every file memoryd creates is 0600
    text = path.read_text()  # the commented config of `memoryd config`, roots filled in
    assert text.replace(text.splitlines()[11] + "\n", ROOTS_LINE) == default_config_text()


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    path = home / ".config" / "memoryd" / "memoryd.toml"
    path.parent.mkdir(parents=True)
    path.write_text("# mine\n")
    assert _init(home, "--root", str(tmp_path)) == 1
    assert "already exists" in capsys.readouterr().err and path.read_text() == "# mine\n"
    assert _init(home, "--root", str(tmp_path), "--force") == 0
    assert (path.parent / "memoryd.toml.bak").read_text() == "# mine\n"
    assert tomllib.loads(path.read_text())["watch"]["roots"] == [str(tmp_path)]


def test_init_without_roots_keeps_the_builtin_default(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    home = tmp_path / "home"
    assert _init(home, "--config", str(tmp_path / "m.toml")) == 0
    assert (tmp_path / "m.toml").read_text() == default_config_text()
    assert str(home / ".local" / "share" / "memoryd" / "memory") in capsys.readouterr().out


def test_init_asks_for_roots_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: f"{tmp_path}/a , {tmp_path}/b c")
    assert _init(tmp_path / "home", "--config", str(tmp_path / "m.toml")) == 0
    assert tomllib.loads((tmp_path / "m.toml").read_text())["watch"]["roots"] == [f"{tmp_path}/a", f"{tmp_path}/b c"]


def test_init_text_quotes_roots_as_toml() -> None:
    assert parse_answer(" ~/a, ,/b ") == ["~/a", "/b"]
    text = config_text([Path('/odd "name"\\x')])
    assert tomllib.loads(text)["watch"]["roots"] == ['/odd "name"\\x']


# -- doctor -----------------------------------------------------------------------------------


def _inputs(tmp_path: Path, roots: list[Path], status: Any = None, watches: int = 8192, unit: str | None = None,
            **config: Any) -> doctor.Inputs:
    cfg = tmp_path / "memoryd.toml"
    lines = ["[watch]", f"roots = {json.dumps([str(r) for r in roots])}", "[embedding]", 'provider = "hash"']
    cfg.write_text("\n".join(lines) + "\n")
    (tmp_path / "watches").write_text(f"{watches}\n")
    unit_dir = tmp_path / "units"
    if unit is not None:
        (unit_dir / "memoryd.service.d").mkdir(parents=True)
        (unit_dir / "memoryd.service").write_text(
            "[Service]\nReadWritePaths=%t/memoryd -%h/.local/state/memoryd -%h/.local/share/memoryd\n")
        (unit_dir / "memoryd.service.d" / "10-memoryd-flags.conf").write_text(unit)

    def not_running(sock: Path) -> dict[str, Any]:
        raise NotRunningError(f"memoryd is not running (no socket at {sock})")

    config.setdefault("which", lambda _name: "/usr/bin/memoryd")
    return doctor.Inputs(env={"HOME": str(tmp_path / "home")}, config=cfg, unit_dir=unit_dir,
                         watches_file=tmp_path / "watches", status=status or not_running, **config)


def _by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {c.name: c for c in checks}


def test_doctor_fails_on_a_stopped_daemon_and_a_missing_root(tmp_path: Path) -> None:
    checks = _by_name(doctor.run_checks(_inputs(tmp_path, [tmp_path / "nope"])))
    assert checks["daemon"].level == doctor.FAIL and "memoryd run" in checks["daemon"].fix
    assert checks[f"root {tmp_path / 'nope'}"].level == doctor.FAIL
    assert checks["provider"].level == doctor.OK and "hash" in checks["provider"].message


def test_doctor_passes_a_good_setup_and_reads_the_daemon_status(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    status = {"version": "9.9", "files": 3, "fresh": True, "roots": [{"path": str(root), "alive": True}]}
    checks = doctor.run_checks(_inputs(tmp_path, [root], status=lambda sock: status))
    assert all(c.level == doctor.OK for c in checks), [c.line() for c in checks]
    assert "memoryd 9.9, 3 files, up to date" in _by_name(checks)["daemon"].message
    assert doctor.as_json(checks)["ok"] is True


def test_doctor_compares_the_folders_to_watch_with_the_inotify_limit(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    for i in range(6):
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / "n.md").write_text("x")
    (root / ".git" / "objects").mkdir(parents=True)  # hidden: not watched
    assert doctor.count_tree((root,)) == (7, 6)
    assert _by_name(doctor.run_checks(_inputs(tmp_path, [root], watches=5)))["inotify"].level == doctor.FAIL
    assert _by_name(doctor.run_checks(_inputs(tmp_path, [root], watches=10)))["inotify"].level == doctor.WARN
    ok = _by_name(doctor.run_checks(_inputs(tmp_path, [root], watches=100)))["inotify"]
    assert ok.level == doctor.OK and "7 folders to watch (6 files)" in ok.message


def test_doctor_fails_a_root_outside_the_services_writable_paths(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    checks = doctor.run_checks(_inputs(tmp_path, [inside, outside], unit=f"[Service]\nReadWritePaths=-{inside}\n"))
    service = [c for c in checks if "systemd service" in c.message]
    assert [c.level for c in service] == [doctor.OK, doctor.FAIL]
    assert f"--root {outside}" in service[1].fix


def test_doctor_warns_on_a_read_only_root_and_fails_an_unreadable_one(tmp_path: Path) -> None:
    ro, hidden = tmp_path / "ro", tmp_path / "hidden"
    ro.mkdir()
    hidden.mkdir()
    modes = {ro: os.R_OK | os.X_OK, hidden: 0}  # what each folder allows this user

    def access(path: Path, mode: int) -> bool:
        return modes.get(path, 7) & mode == mode

    checks = _by_name(doctor.run_checks(_inputs(tmp_path, [ro, hidden], access=access)))
    assert checks[f"root {ro}"].level == doctor.WARN and "memory_remember cannot write" in checks[f"root {ro}"].message
    assert checks[f"root {hidden}"].level == doctor.FAIL and "chmod u+rx" in checks[f"root {hidden}"].fix


def test_doctor_reports_a_config_that_does_not_load(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[watch]\nroots = 3\n")
    (check,) = doctor.run_checks(doctor.Inputs(env={}, config=cfg))
    assert check.level == doctor.FAIL and str(cfg) in check.message


def test_doctor_cli_exit_status_and_json(tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running_daemon(tmp_path, short_dir / "d.sock", {"a.md": "# A\n"}) as (d, _client, root):
        cfg = tmp_path / "doctor.toml"
        cfg.write_text(f'[watch]\nroots = ["{root}"]\n[embedding]\nprovider = "hash"\n')
        capsys.readouterr()
        rc = cli.main(["doctor", "--config", str(cfg), "--socket", str(d.cfg.socket_path), "--json",
                       "--unit-dir", str(tmp_path / "no-units")])
        report = json.loads(capsys.readouterr().out.splitlines()[-1])
    levels = {c["name"]: c["level"] for c in report["checks"]}
    assert levels["daemon"] == "ok" and levels[f"root {root}"] == "ok"
    assert rc == (0 if report["ok"] else 1)
    rc = cli.main(["doctor", "--config", str(cfg), "--socket", str(short_dir / "none.sock"), "--no-model"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 1 and any(line.startswith("FAIL  daemon: nothing answers") for line in lines)
