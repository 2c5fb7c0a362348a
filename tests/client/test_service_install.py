"""``memoryd service install --flags`` (issue #28 item 9): checked flags, systemd quoting, writable roots.

On main a newline inside a quoted word went verbatim into the drop-in (adding an
``ExecStartPre=`` line), a ``"`` split a word into several arguments, ``--root ~/notes``
stayed read-only under ``ProtectHome=read-only``, a re-install without ``--flags`` dropped
the flags, and ``uninstall`` without a user bus exited 0 having disabled nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from memoryd.daemon.cli import main
from memoryd.daemon.client import cli_setup
from memoryd.daemon.client.service_dropin import FLAGS_MARK, exec_word

DROPIN = Path("memoryd.service.d") / cli_setup.DROPIN_NAME


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own: the default config, ``~`` and the unit's %h paths all live in it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def install(units: Path, *extra: str) -> int:
    return main(["service", "install", "--unit-dir", str(units), *extra])


def systemd_words(line: str) -> list[str]:
    """How systemd splits an ``ExecStart=`` value (systemd.service(5), "Command lines"): words on
    whitespace, "…" quoting with C escapes inside, ``%%`` → ``%`` and ``$$`` → ``$``; an unquoted
    lone ``;`` separates commands, returned as the word ``<;>``."""
    words, i = [], 0
    while i < len(line):
        if line[i].isspace():
            i += 1
            continue
        word, quoted = "", False
        while i < len(line) and not line[i].isspace():
            if line[i] == '"':
                quoted, i = True, i + 1
                while line[i] != '"':
                    if line[i] == "\\":
                        i += 1
                    word += line[i]
                    i += 1
                i += 1
            else:
                word += line[i]
                i += 1
        words.append("<;>" if word == ";" and not quoted else word)
    return [w.replace("%%", "\0").replace("$$", "\1").replace("\0", "%").replace("\1", "$") for w in words]


def exec_line(units: Path) -> list[str]:
    body = (units / DROPIN).read_text()
    line = [ln for ln in body.splitlines() if ln.startswith("ExecStart=") and ln != "ExecStart="]
    assert len(line) == 1, body
    return systemd_words(line[0].removeprefix("ExecStart="))


def rw_paths(units: Path) -> list[str]:
    body = (units / DROPIN).read_text()
    line = next(ln for ln in body.splitlines() if ln.startswith("ReadWritePaths="))
    return systemd_words(line.removeprefix("ReadWritePaths="))


# -- flags: split, checked, quoted ------------------------------------------------------------


def test_a_newline_in_a_word_is_refused_and_nothing_is_written(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    assert install(units, "--flags", "--root '/srv/x\nExecStartPre=/bin/touch /tmp/pwned'") == 1
    assert "control character" in capsys.readouterr().err
    assert not units.exists()


@pytest.mark.parametrize("name", ['a"b', "semi ; colon", ";", "$HOME", "50%h", "back\\slash", "it's", "é", "--x"])
def test_every_word_reaches_the_daemon_as_one_argument(tmp_path: Path, name: str) -> None:
    config = tmp_path / f"{name}.toml"  # --config: a path the daemon only reads, so any name may go
    config.write_text("")
    units = tmp_path / "units"
    assert install(units, "--flags", "--config " + shlex.quote(str(config))) == 0
    words = exec_line(units)
    assert words[1:] == ["run", "--config", str(config)], (words, (units / DROPIN).read_text())


def test_a_root_with_a_quote_is_refused_for_read_write_paths(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``ReadWritePaths=`` unquotes differently across systemd versions: such a root is left to the user."""
    assert install(tmp_path / "units", "--flags", """--root '/srv/a"b'""") == 1
    assert "systemctl --user edit memoryd.service" in capsys.readouterr().err
    assert not (tmp_path / "units").exists()


def test_exec_words_round_trip_through_systemd_rules() -> None:
    for word in ['a"b', "x y", "\\", "$FOO", "${FOO}", "%h", ";", "", "--root=/x", "日本"]:
        assert systemd_words(exec_word(word)) == [word]


@pytest.mark.parametrize(("flags", "why"), [("--bogus", "unrecognized arguments: --bogus"),
                                           ("notes", "unrecognized arguments: notes"),
                                           ("--root", "expected one argument"),
                                           ("--root /x --verbose", "unrecognized arguments: --verbose"),
                                           ("--help", "--help is not a flag")])
def test_flags_memoryd_run_would_refuse_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    flags: str, why: str) -> None:
    assert install(tmp_path / "units", f"--flags={flags}") == 1
    err = capsys.readouterr().err
    assert why in err and "'memoryd run' takes --config, --socket, --root, --data-dir" in err
    assert not (tmp_path / "units").exists()


def test_flags_that_cannot_be_split_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert install(tmp_path / "units", "--flags", "--root 'unclosed") == 1
    assert "No closing quotation" in capsys.readouterr().err


def test_a_refused_install_leaves_the_earlier_one_as_it_was(tmp_path: Path) -> None:
    units = tmp_path / "units"
    assert install(units, "--flags", "--root /srv/notes") == 0
    before = {p: p.read_bytes() for p in units.rglob("*") if p.is_file()}
    assert install(units, "--flags", "--root /srv/notes --nope") == 1
    assert {p: p.read_bytes() for p in units.rglob("*") if p.is_file()} == before


# -- writable paths ---------------------------------------------------------------------------


def test_a_root_under_home_is_made_writable_and_absolute(tmp_path: Path, home: Path) -> None:
    units = tmp_path / "units"
    assert install(units, "--flags", "--root ~/notes --data-dir ~/idx") == 0
    assert exec_line(units)[1:] == ["run", "--root", str(home / "notes"), "--data-dir", str(home / "idx")]
    assert rw_paths(units) == [f"-{home / 'notes'}", f"-{home / 'idx'}"]


def test_roots_and_data_dir_of_the_config_are_writable_too(tmp_path: Path, home: Path) -> None:
    config = home / "work.toml"
    config.write_text('[watch]\nroots = ["/srv/team notes", "~/.local/share/memoryd/memory"]\n'
                      '[storage]\ndata_dir = "/var/tmp/md-index"\n[server]\nsocket = "/run/md-x/m.sock"\n')
    units = tmp_path / "units"
    assert install(units, "--flags", f"--config {config}") == 0
    # the default root is in the shipped unit's list already: not repeated
    assert rw_paths(units) == ["-/srv/team notes", "-/var/tmp/md-index", "-/run/md-x"]


def test_the_default_config_counts_without_flags(tmp_path: Path, home: Path) -> None:
    (home / ".config/memoryd").mkdir(parents=True)
    (home / ".config/memoryd/memoryd.toml").write_text('[watch]\nroots = ["/srv/notes"]\n')
    units = tmp_path / "units"
    assert install(units) == 0
    assert rw_paths(units) == ["-/srv/notes"]
    assert "ExecStart" not in (units / DROPIN).read_text()


def test_a_config_the_daemon_would_refuse_is_refused(tmp_path: Path, home: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (home / "bad.toml").write_text("[server]\nallowed_uids = [1001]\n")
    assert install(tmp_path / "units", "--flags", f"--config {home / 'bad.toml'}") == 1
    assert "server.allowed_uids" in capsys.readouterr().err


# -- re-install -------------------------------------------------------------------------------


def test_a_reinstall_keeps_the_flags_unless_flags_is_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    assert install(units, "--flags", "--root '/srv/my notes'") == 0
    first = (units / DROPIN).read_text()
    assert FLAGS_MARK + "--root '/srv/my notes'" in first
    capsys.readouterr()
    assert install(units) == 0
    assert (units / DROPIN).read_text() == first
    assert "kept the flags of the earlier install: --root '/srv/my notes'" in capsys.readouterr().out
    assert install(units, "--flags", "") == 0
    assert not (units / DROPIN).exists()


def test_a_drop_in_of_an_older_version_keeps_its_flags(tmp_path: Path) -> None:
    units = tmp_path / "units"
    (units / DROPIN).parent.mkdir(parents=True)
    (units / DROPIN).write_text("# Written by 'memoryd service install --flags'.\n[Service]\nExecStart=\n"
                                'ExecStart=/old/bin/memoryd run --root "/srv/my notes" --root /srv/50%%\n')
    assert install(units) == 0
    assert exec_line(units)[1:] == ["run", "--root", "/srv/my notes", "--root", "/srv/50%"]
    assert exec_line(units)[0] == cli_setup.running_executable()


# -- no user bus ------------------------------------------------------------------------------


@pytest.fixture
def systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``systemctl`` first on PATH; it logs its arguments and fails like one without a user bus
    unless ``tmp_path/bus`` exists."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ -e {tmp_path / "bus"} ] && exit 0\n'
                    'echo "Failed to connect to bus: No medium found" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_without_a_user_bus_install_enable_fails_with_a_hint(tmp_path: Path, systemctl: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert install(tmp_path / "units", "--enable") == 1
    err = capsys.readouterr().err
    assert "systemctl --user" in err and "loginctl enable-linger" in err
    assert "enable" not in systemctl.read_text().replace("enable-linger", "")  # never tried to enable


def test_without_a_user_bus_uninstall_fails_with_a_hint_and_removes_nothing(
        tmp_path: Path, systemctl: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = tmp_path / "units"
    assert install(units, "--flags", "--root /srv/notes") == 0
    assert main(["service", "uninstall", "--unit-dir", str(units)]) == 1
    err = capsys.readouterr().err
    assert "systemctl --user" in err and "loginctl enable-linger" in err and "nothing was removed" in err
    assert (units / "memoryd.service").exists() and (units / DROPIN).exists()


def test_with_a_user_bus_uninstall_disables_then_removes(tmp_path: Path, systemctl: Path) -> None:
    units = tmp_path / "units"
    assert install(units) == 0
    (tmp_path / "bus").touch()
    assert main(["service", "uninstall", "--unit-dir", str(units)]) == 0
    calls = systemctl.read_text().splitlines()
    assert "--user disable --now memoryd.service memoryd.socket" in calls and calls[-1] == "--user daemon-reload"
    assert not (units / "memoryd.service").exists()


@pytest.mark.slow
def test_a_drop_in_with_hard_words_passes_systemd_analyze_verify(tmp_path: Path, home: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package 'systemd')")
    units, runtime = tmp_path / "units", tmp_path / "run"
    runtime.mkdir(mode=0o700)
    odd = home / 'a"b;$HOME%h.toml'
    odd.write_text("")
    flags = f"--root '/srv/my notes' --root '/srv/50%h' --root ~/notes --config {shlex.quote(str(odd))}"
    assert install(units, "--flags", flags) == 0
    done = subprocess.run(["systemd-analyze", "verify", "--user", "memoryd.service", "memoryd.socket"], cwd=units,
                          env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (done.stdout + done.stderr).strip() == "", done.stdout + done.stderr
    assert re.search(r"^ReadWritePaths=.*\"-/srv/my notes\"", (units / DROPIN).read_text(), re.M)
