"""``memoryd config`` and ``memoryd service install|uninstall``: what a pipx user needs besides the command.

The default config and the systemd units ship inside the package
(``memoryd.config`` and ``memoryd.systemd``), so an installed wheel can print
the one and install the others without a checkout. ``service install`` writes
the user units with the absolute path of the running ``memoryd`` (the shipped
unit names ``~/.local/bin/memoryd``, which a venv or ``uv tool`` install may
not have) and a drop-in for extra flags and writable paths
(:mod:`memoryd.daemon.client.service_dropin`), then says every file it wrote and
every ``systemctl`` command it ran. Every check runs before the first file is
written, so a refused ``--flags`` leaves an earlier install as it was.

``systemctl --user`` needs the user's own systemd manager, reached over its bus
(``$XDG_RUNTIME_DIR/bus``): it is missing under ``su``/``sudo``, in most
containers, and over ssh without a login session. Then ``install --enable`` and
``uninstall`` exit 1 with :data:`NO_USER_BUS` (uninstall removes nothing: unit
files of units that may still be enabled or running would be orphaned). With no
``systemctl`` at all there is no systemd to ask, and the files are handled alone.
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
from memoryd.daemon.client.service_dropin import (
    DROPIN_NAME,
    ServiceError,
    check_flags,
    dropin_text,
    earlier_flags,
    exec_word,
    writable_paths,
)
from memoryd.indexer.atomic import atomic_write_bytes

UNITS = ("memoryd.service", "memoryd.socket")
SHIPPED_EXEC = "ExecStart=%h/.local/bin/memoryd run"
NEXT = "systemctl --user daemon-reload && systemctl --user enable --now memoryd.socket memoryd.service"
NO_USER_BUS = (
    "systemctl --user cannot reach your systemd user manager (no user bus: su, sudo, a container, or ssh without "
    "a login session). Run it from a login session of this user, or from root with 'machinectl shell USER@'; "
    "'loginctl enable-linger USER' keeps that manager running without a login (and starts memoryd at boot)."
)

__all__ = ["DROPIN_NAME", "ServiceError"]


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
    inst.add_argument("--flags", default=None, help="extra flags for 'memoryd run', checked and written to a "
                      "drop-in with their roots made writable (e.g. --flags '--root ~/notes'); a later install "
                      "without --flags keeps them, --flags '' removes them")
    inst.set_defaults(run_parser=sub.choices.get("run"))  # 'memoryd run' checks the flags it will be given
    rm = command(actions, "uninstall", "disable and remove the user units memoryd installed",
                 "memoryd service uninstall",
                note="It takes no --config or --socket: give the daemon's flags to install --flags.")
    rm.add_argument("--unit-dir", type=Path, default=None, help="unit folder (default: $XDG_CONFIG_HOME/systemd/user)")


def default_config_text() -> str:
    """The commented default config shipped in the package."""
    return files("memoryd.config").joinpath("memoryd.toml").read_text(encoding="utf-8")


# Optional ("-": a missing file is fine): MEMORYD_PG_DSN and such, kept out of the unit (docs/postgres.md).
ENV_FILE = ("# Optional variables, e.g. MEMORYD_PG_DSN=... (a file of mode 0600; docs/postgres.md)\n"
            "EnvironmentFile=-%E/memoryd/env")


def unit_text(name: str, exe: str) -> str:
    """A shipped unit, with ExecStart pointing at ``exe`` (an absolute path) instead of ~/.local/bin."""
    text = files("memoryd.systemd").joinpath(name).read_text(encoding="utf-8")
    if name == "memoryd.service":
        if SHIPPED_EXEC not in text:  # pragma: no cover - guarded by a test on the shipped unit
            raise ServiceError(f"shipped {name} has no line {SHIPPED_EXEC!r}")
        text = text.replace(SHIPPED_EXEC, f"{ENV_FILE}\nExecStart={exec_word(exe)} run")
    return text


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


def install(target: Path, exe: str, flags: str | None, say: Callable[[str], None],
            run_parser: argparse.ArgumentParser | None, env: Mapping[str, str]) -> list[Path]:
    """Write both units and the drop-in (flags, writable paths), or remove a stale drop-in.

    ``flags`` None keeps those of the earlier install. Everything is checked before the first
    write; returns the files written.
    """
    dropin = target / "memoryd.service.d" / DROPIN_NAME
    if flags is None:
        flags = earlier_flags(dropin)
        if flags:
            say(f"kept the flags of the earlier install: {flags} (--flags '' removes them)")
    if run_parser is None:  # pragma: no cover - the memoryd parser always has 'run'
        raise ServiceError("cannot check --flags: no 'memoryd run' parser")
    words, ns = check_flags(flags, run_parser)
    paths = writable_paths(ns, env)
    body = dropin_text(exe, words, paths) if words or paths else None
    units = {name: unit_text(name, exe) for name in UNITS}
    written: list[Path] = []
    target.mkdir(parents=True, exist_ok=True)
    for name, text in units.items():
        atomic_write_bytes(target / name, text.encode(), new_mode=0o644)
        say(f"wrote {target / name}")
        written.append(target / name)
    if body is not None:
        dropin.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(dropin, body.encode(), new_mode=0o644)
        say(f"wrote {dropin}" + (f" (writable: {', '.join(map(str, paths))})" if paths else ""))
        written.append(dropin)
    elif dropin.exists():
        dropin.unlink()
        say(f"removed {dropin} (no flags, and no root or data dir outside the unit's own)")
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


def user_manager() -> bool | None:
    """Whether ``systemctl --user`` reaches the user's systemd manager; None: no systemctl at all."""
    if shutil.which("systemctl") is None:
        return None
    proc = subprocess.run(["systemctl", "--user", "show", "--property=Version"], capture_output=True, text=True,
                          timeout=60, check=False)
    return proc.returncode == 0


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
        install(target, running_executable(), args.flags, say, args.run_parser, os.environ)
        if not args.enable:
            say(f"next: {NEXT}")
            return 0
        if user_manager() is False:
            return _no_bus(f"the files are written; from a session that reaches it, run: {NEXT}")
        ok = _systemctl(["daemon-reload"], say) and _systemctl(["enable", "--now", *UNITS], say)
        return 0 if ok else 1
    manager = user_manager()
    if manager is False:
        return _no_bus(f"nothing was removed (the units may still be enabled); from a session that reaches it, run "
                       f"'memoryd service uninstall' again, or remove {target / 'memoryd.*'} yourself")
    ok = True
    if manager and (target / "memoryd.service").exists():
        ok = _systemctl(["disable", "--now", *UNITS], say)
    uninstall(target, say)
    if manager:
        ok = _systemctl(["daemon-reload"], say) and ok
    return 0 if ok else 1


def _no_bus(then: str) -> int:
    print(f"memoryd: {NO_USER_BUS} {then}", file=sys.stderr)
    return 1


COMMANDS = {"config": cmd_setup, "service": cmd_setup}
