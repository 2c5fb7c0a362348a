"""systemd/memoryd.{service,socket}: the directives that matter, and systemd's own verdict.

The pure-Python checks always run. ``systemd-analyze verify`` runs where the
tool is installed (Debian package ``systemd``; it needs no running systemd)
and fails on *any* output, since systemd reports unknown or invalid directives
as warnings and still exits 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memoryd.indexer.config import Config

UNITS = Path(__file__).resolve().parents[2] / "systemd"
SERVICE = UNITS / "memoryd.service"
SOCKET = UNITS / "memoryd.socket"


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> every value (systemd keys may repeat, unlike configparser's)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path.name}:{number}: not 'Key=value': {raw!r}"
        assert not line.endswith("\\"), f"{path.name}:{number}: continuation lines are not used here"
        key, value = line.split("=", 1)
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    values = unit[section].get(key, [])
    assert len(values) == 1, f"[{section}] {key}= should be set exactly once, found {values}"
    return values[0]


@pytest.fixture(scope="module")
def service() -> dict[str, dict[str, list[str]]]:
    return parse_unit(SERVICE)


@pytest.fixture(scope="module")
def socket_unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(SOCKET)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("Type", "notify"),
        ("NotifyAccess", "main"),
        ("ExecStart", "%h/.local/bin/memoryd run"),
        ("Restart", "on-failure"),
        ("RestartSec", "2"),
        ("WatchdogSec", "30"),
        ("TimeoutStopSec", "15"),
        ("RuntimeDirectory", "memoryd"),
        ("RuntimeDirectoryMode", "0700"),
        ("RuntimeDirectoryPreserve", "yes"),
        ("UMask", "0077"),
        ("NoNewPrivileges", "yes"),
        ("PrivateUsers", "yes"),  # what makes the namespace options work in a user manager
        ("ProtectSystem", "strict"),
        ("ProtectHome", "read-only"),
        ("PrivateTmp", "yes"),
        ("LockPersonality", "yes"),
        ("RestrictRealtime", "yes"),
        ("SystemCallArchitectures", "native"),
        ("Nice", "10"),
        ("CPUWeight", "20"),
        ("MemoryHigh", "768M"),
    ],
)
def test_service_directive(service, key, value):
    assert one(service, "Service", key) == value


def test_service_is_a_user_unit_wanted_by_default_target(service):
    assert one(service, "Install", "WantedBy") == "default.target"
    assert one(service, "Install", "Also") == "memoryd.socket"
    assert "User" not in service["Service"], "a user unit cannot switch users"


def test_socket_directives(socket_unit):
    assert one(socket_unit, "Socket", "ListenStream") == "%t/memoryd/memoryd.sock"
    assert one(socket_unit, "Socket", "SocketMode") == "0600"
    assert one(socket_unit, "Socket", "DirectoryMode") == "0700"
    assert one(socket_unit, "Socket", "FileDescriptorName") == "memoryd"
    assert one(socket_unit, "Install", "WantedBy") == "sockets.target"
    assert "Accept" not in socket_unit["Socket"], "Accept=yes would spawn one daemon per connection"


def _expand(spec: str, home: Path, runtime: Path) -> Path:
    return Path(spec.replace("%h", str(home)).replace("%t", str(runtime)))


def test_units_agree_with_the_configured_default_paths(service, socket_unit):
    """The paths the units open up are the ones config.py defaults to (no XDG overrides)."""
    home, runtime = Path("/home/u"), Path("/run/user/1000")
    cfg = Config(state_home=home / ".local/state", data_home=home / ".local/share", cache_home=home / ".cache",
                 runtime_dir=runtime)
    listen = _expand(one(socket_unit, "Socket", "ListenStream"), home, runtime)
    assert listen == cfg.socket_path
    paths = one(service, "Service", "ReadWritePaths").split()
    writable = [_expand(p.lstrip("-"), home, runtime) for p in paths]
    for needed in (cfg.data_dir, cfg.default_root, cfg.socket_path.parent, cfg.model_cache_dir):
        assert any(needed == w or w in needed.parents for w in writable), f"{needed} is not writable"
    created = one(service, "Service", "ExecStartPre")
    assert created.startswith("+/bin/mkdir -p -m 0700 ")
    assert {_expand(p, home, runtime) for p in created.split()[4:]} == {cfg.data_dir, cfg.default_root,
                                                                       cfg.model_cache_dir}


def _verify(units_dir: Path, home: Path, runtime: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run(
        ["systemd-analyze", "verify", "--user", "memoryd.service", "memoryd.socket"],
        cwd=units_dir, env=env, capture_output=True, text=True, timeout=60,
    )


@pytest.fixture
def verify_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Both units, plus a HOME whose %h/.local/bin/memoryd exists (verify checks ExecStart)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package 'systemd')")
    units, home, runtime = tmp_path / "units", tmp_path / "home", tmp_path / "run"
    units.mkdir()
    runtime.mkdir(mode=0o700)
    shutil.copy(SERVICE, units)
    shutil.copy(SOCKET, units)
    exe = home / ".local/bin/memoryd"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return units, home, runtime


@pytest.mark.slow
def test_systemd_analyze_verify_is_clean(verify_tree):
    done = _verify(*verify_tree)
    assert done.returncode == 0 and (done.stdout + done.stderr).strip() == "", done.stdout + done.stderr


@pytest.mark.slow
def test_systemd_analyze_verify_catches_a_bad_directive(verify_tree):
    """Guards the test above against a verify that checks nothing in this environment."""
    units = verify_tree[0]
    text = (units / "memoryd.service").read_text()
    (units / "memoryd.service").write_text(text.replace("[Service]\n", "[Service]\nProtectSystm=strict\n"))
    done = _verify(*verify_tree)
    assert "Unknown key 'ProtectSystm'" in done.stdout + done.stderr
