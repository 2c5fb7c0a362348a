"""``memoryd config`` and ``memoryd service install|uninstall``: shipped files, absolute paths, exact reports."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memoryd.daemon.cli import main
from memoryd.daemon.client import cli_setup
from memoryd.indexer import config as configmod

REPO = Path(__file__).resolve().parents[2]


def test_config_prints_the_shipped_default_and_it_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 0
    text = capsys.readouterr().out
    assert text == (REPO / "config/memoryd.toml").read_text(encoding="utf-8")
    path = tmp_path / "memoryd.toml"
    path.write_text(text, encoding="utf-8")
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    assert configmod.load(path) == configmod.load(empty)  # every key it sets is the built-in default


def test_install_writes_both_units_with_this_executable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    assert main(["service", "install", "--unit-dir", str(units)]) == 0
    out = capsys.readouterr().out
    exe = cli_setup.running_executable()
    assert Path(exe).is_absolute() and os.access(exe, os.X_OK)
    service = (units / "memoryd.service").read_text()
    assert f"ExecStart={exe} run" in service and "%h/.local/bin/memoryd" not in service
    assert (units / "memoryd.socket").read_text() == (REPO / "systemd/memoryd.socket").read_text()
    for name in ("memoryd.service", "memoryd.socket"):
        assert f"wrote {units / name}" in out
    assert "systemctl --user daemon-reload" in out  # says what to do next without --enable
    assert not (units / "memoryd.service.d").exists()


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """install reads the config its flags name (or the default one): never the developer's own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


def test_flags_go_to_a_drop_in_and_only_flags_empty_removes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    flags = "--root '/srv/my notes' --root /srv/50%"
    assert main(["service", "install", "--unit-dir", str(units), "--flags", flags]) == 0
    dropin = units / "memoryd.service.d" / cli_setup.DROPIN_NAME
    body = dropin.read_text()
    assert "ExecStart=\n" in body and 'run --root "/srv/my notes" --root /srv/50%%\n' in body
    assert main(["service", "install", "--unit-dir", str(units)]) == 0  # tests/client/test_service_install.py: kept
    assert dropin.read_text() == body
    assert main(["service", "install", "--unit-dir", str(units), "--flags", ""]) == 0
    assert not dropin.exists() and f"removed {dropin}" in capsys.readouterr().out


def test_uninstall_removes_only_what_install_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_setup.shutil, "which", lambda name: None)  # no systemctl: files only
    units = tmp_path / "units"
    main(["service", "install", "--unit-dir", str(units), "--flags", "--root /x"])
    (units / "other.service").write_text("[Service]\n")
    capsys.readouterr()
    assert main(["service", "uninstall", "--unit-dir", str(units)]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in units.iterdir()) == ["other.service"]
    assert out.count("removed ") == 3
    assert main(["service", "uninstall", "--unit-dir", str(units)]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_enable_without_systemctl_says_what_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_setup.shutil, "which", lambda name: None)
    assert main(["service", "install", "--enable", "--unit-dir", str(tmp_path)]) == 1
    assert "systemctl not found; run yourself: systemctl --user daemon-reload" in capsys.readouterr().out


@pytest.mark.slow
def test_installed_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package 'systemd')")
    units, home, runtime = tmp_path / "units", tmp_path / "home", tmp_path / "run"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    assert main(["service", "install", "--unit-dir", str(units), "--flags", "--root /srv/notes"]) == 0
    done = subprocess.run(["systemd-analyze", "verify", "--user", "memoryd.service", "memoryd.socket"], cwd=units,
                          env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (done.stdout + done.stderr).strip() == "", done.stdout + done.stderr
