"""``memoryd doctor`` asks the running daemon (#42 item 5): its roots, its model; no model load of its
own (that took 5.5 s), no log line among the checks; and it says when no ``memoryd`` is on PATH."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client import cli, doctor
from memoryd.indexer import embedding
from tests.client.test_cli_messages import _own_lines  # the in-process daemon's own log lines share stdout
from tests.client.test_onboard import _by_name, _inputs
from tests.helpers import running_daemon


def _no_load(*_a: Any, **_k: Any) -> Any:
    raise AssertionError("doctor loaded a model while the daemon answers")


def test_doctor_checks_the_roots_the_daemon_watches_not_the_configs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    watched, configured = tmp_path / "watched", tmp_path / "configured-later"
    watched.mkdir()
    status = {"version": "9.9", "files": 3, "fresh": True, "roots": [{"path": str(watched), "alive": True}],
              "model": {"id": "intfloat/multilingual-e5-small", "dim": 384}}
    monkeypatch.setattr(embedding, "load_embedder", _no_load)
    checks = _by_name(doctor.run_checks(_inputs(tmp_path, [configured], status=lambda _s: status)))
    assert f"root {watched}" in checks and f"root {configured}" not in checks
    assert checks["provider"].level == doctor.OK
    assert checks["provider"].message == "intfloat/multilingual-e5-small: loaded in the daemon, 384-d vectors"
    gone = {**status, "roots": [{"path": str(tmp_path / "gone"), "alive": False, "error": "cannot watch"}]}
    checks = _by_name(doctor.run_checks(_inputs(tmp_path, [watched], status=lambda _s: gone)))
    assert checks[f"root {tmp_path / 'gone'}"].level == doctor.FAIL


def test_doctor_says_when_no_memoryd_is_on_path(tmp_path: Path) -> None:
    checks = _by_name(doctor.run_checks(_inputs(tmp_path, [tmp_path], which=lambda _n: None)))
    assert checks["command"].level == doctor.WARN and "agents install --project" in checks["command"].message
    assert "pipx install" in checks["command"].fix
    assert _by_name(doctor.run_checks(_inputs(tmp_path, [tmp_path])))["command"].level == doctor.OK


def test_doctor_against_a_running_daemon_loads_nothing_and_prints_only_checks(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with running_daemon(tmp_path, short_dir / "d.sock", {"a.md": "# A\n"}) as (d, _client, root):
        cfg = tmp_path / "doctor.toml"  # the config names another root: the daemon's is what is checked
        cfg.write_text(f'[watch]\nroots = ["{tmp_path / "elsewhere"}"]\n[embedding]\nprovider = "hash"\n')
        monkeypatch.setattr(embedding, "load_embedder", _no_load)
        capsys.readouterr()
        cli.main(["doctor", "--config", str(cfg), "--socket", str(d.cfg.socket_path),
                  "--unit-dir", str(tmp_path / "no-units")])
        lines = _own_lines(capsys.readouterr().out)
        cli.main(["doctor", "--config", str(cfg), "--socket", str(d.cfg.socket_path), "--json",
                  "--unit-dir", str(tmp_path / "no-units")])
        report = json.loads(_own_lines(capsys.readouterr().out)[-1])
    assert all(line.split("  ", 1)[0].strip() in ("ok", "warn", "FAIL") for line in lines), lines
    names = [c["name"] for c in report["checks"]]
    assert f"root {root}" in names and f"root {tmp_path / 'elsewhere'}" not in names
    assert next(c for c in report["checks"] if c["name"] == "provider")["message"].endswith("loaded in the daemon, "
                                                                                           "64-d vectors")
