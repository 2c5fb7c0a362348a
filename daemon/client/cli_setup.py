"""``memoryd config`` and ``memoryd service install|uninstall``: what a pipx user needs besides the command.

The default config and the systemd units ship inside the package
(``memoryd.config`` and ``memoryd.systemd``), so an installed wheel can print
the one and install the others without a checkout. ``service install`` writes
the user units with the absolute path of the running ``memoryd`` (the shipped
unit names ``~/.local/bin/memoryd``, which a venv or ``uv tool`` install may
not have) and a drop-in for extra flags, then says every file it wrote and
every ``systemctl`` command it ran.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path

from memoryd.daemon.client.cli_help import command
from memoryd.indexer.atomic import atomic_write_bytes
from memoryd.indexer.errors import MemorydError

UNITS = ("memoryd.service", "memoryd.socket")
DROPIN_NAME = "10-memoryd-flags.conf"
SHIPPED_EXEC = "ExecStart=%h/.local/bin/memoryd run"


class ServiceError(MemorydError):
    """A unit could not be installed or removed (names the file or command at fault)."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command(sub, "config", "print the commented default config", "memoryd config > ~/.config/memoryd/memoryd.toml",
            note="It takes no --config or --socket.")
    p = command(sub, "service", "install or remove the systemd user units", "memoryd service install --enable",
                "memoryd service install --flags '--config ~/.config/memoryd/work.toml'",
                "memoryd service uninstall",
                note="It takes no --config or --socket: give the daemon's flags to install --flags.")
    actions = p.add_subparsers(dest="service_action", metavar="ACTION", required=True)
    inst = command(actions, "install", "write memoryd.service/.socket into the user unit folder",
                   "memoryd service install --enable", "memoryd service install --flags '--root ~/notes'")
    inst.add_argument("--enable", action="store_true", help="then daemon-reload and enable --now both units")
    inst.add_argument("--unit-dir", type=Path, default=None,
                      help="unit folder (default: $XDG_CONFIG_HOME/systemd/user)")
    inst.add_argument("--flags", default="", help="extra flags for 'memoryd run', written to a drop-in "
                      "(e.g. --flags '--root ~/notes')")
    rm = command(actions, "uninstall", "disable and remove the user units memoryd installed",
                 "memoryd service uninstall",
                note="It takes no --config or --socket: give the daemon's flags to install --flags.")
    rm.add_argument("--unit-dir", type=Path, default=None, help="unit folder (default: $XDG_CONFIG_HOME/systemd/user)")


def default_config_text() -> str:
    """The commented default config shipped in the package."""
    return files("memoryd.config").joinpath("memoryd.toml").read_text(encoding="utf-8")


def unit_text(name: str, exe: str) -> str:
    """A shipped unit, with ExecStart pointing at ``exe`` (an absolute path) instead of ~/.local/bin."""
    text = files("memoryd.systemd").joinpath(name).read_text(encoding="utf-8")
    if name == "memoryd.service":
        if SHIPPED_EXEC not in text:  # pragma: no cover - guarded by a test on the shipped unit
            raise ServiceError(f"shipped {name} has no line {SHIPPED_EXEC!r}")
        text = text.replace(SHIPPED_EXEC, f"ExecStart={_systemd_quote(exe)} run")
    return text


def _systemd_quote(path: str) -> str:
    """A path as one ExecStart word ('%' doubled, quoted when it holds spaces)."""
    path = path.replace("%", "%%")
    return f'"{path}"' if any(c.isspace() for c in path) else path


def running_executable() -> str:
    """The absolute path of the ``memoryd`` that runs now (its venv's script beside the interpreter)."""
    beside = Path(sys.executable).parent / "memoryd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("memoryd")
    if found:
        return str(Path(found).absolute())
    raise ServiceError(f"cannot find the memoryd command next to {sys.executable} or on PATH")


def unit_dir(explicit: Path | None, env: Mapping[str, str]) -> Path:
    if explicit is not None:
        return explicit.expanduser().absolute()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or os.path.expanduser("~")) / ".config")
    return Path(base) / "systemd" / "user"


def install(target: Path, exe: str, flags: str, say: Callable[[str], None]) -> list[Path]:
    """Write both units (and the flags drop-in, or remove a stale one); returns the files written."""
    written: list[Path] = []
    target.mkdir(parents=True, exist_ok=True)
    for name in UNITS:
        path = target / name
        atomic_write_bytes(path, unit_text(name, exe).encode(), new_mode=0o644)
        say(f"wrote {path}")
        written.append(path)
    dropin = target / "memoryd.service.d" / DROPIN_NAME
    if flags.strip():
        words = " ".join(_systemd_quote(w) for w in shlex.split(flags))
        dropin.parent.mkdir(parents=True, exist_ok=True)
        body = ("# Written by 'memoryd service install --flags'.\n[Service]\nExecStart=\n"
                f"ExecStart={_systemd_quote(exe)} run {words}\n")
        atomic_write_bytes(dropin, body.encode(), new_mode=0o644)
        say(f"wrote {dropin}")
        written.append(dropin)
    elif dropin.exists():
        dropin.unlink()
        say(f"removed {dropin} (no --flags given)")
    return written


def uninstall(target: Path, say: Callable[[str], None]) -> list[Path]:
    removed: list[Path] = []
    for path in [target / n for n in UNITS] + [target / "memoryd.service.d" / DROPIN_NAME]:
        if path.exists():
            path.unlink()
            say(f"removed {path}")
            removed.append(path)
    dropdir = target / "memoryd.service.d"
    if dropdir.is_dir() and not any(dropdir.iterdir()):
        dropdir.rmdir()
    if not removed:
        say(f"nothing to remove in {target}")
    return removed


def _systemctl(args: list[str], say: Callable[[str], None]) -> bool:
    cmd = ["systemctl", "--user", *args]
    if shutil.which("systemctl") is None:
        say(f"systemctl not found; run yourself: {shlex.join(cmd)}")
        return False
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    say(f"ran {shlex.join(cmd)}" + ("" if proc.returncode == 0 else f" (exit {proc.returncode}: "
                                    f"{(proc.stderr or proc.stdout).strip()[:300]})"))
    return proc.returncode == 0


def cmd_setup(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(line)

    if args.command == "config":
        sys.stdout.write(default_config_text())
        return 0
    target = unit_dir(args.unit_dir, os.environ)
    if args.service_action == "install":
        install(target, running_executable(), args.flags, say)
        if not args.enable:
            say("next: systemctl --user daemon-reload && systemctl --user enable --now memoryd.socket memoryd.service")
            return 0
        ok = _systemctl(["daemon-reload"], say) and _systemctl(["enable", "--now", *UNITS], say)
        return 0 if ok else 1
    if shutil.which("systemctl") is not None and (target / "memoryd.service").exists():
        _systemctl(["disable", "--now", *UNITS], say)
    uninstall(target, say)
    if shutil.which("systemctl") is not None:
        _systemctl(["daemon-reload"], say)
    return 0


COMMANDS = {"config": cmd_setup, "service": cmd_setup}
