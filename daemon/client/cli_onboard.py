"""``memoryd init``, ``memoryd agents install|uninstall HOST`` and ``memoryd doctor``: set-up in one command each.

The commands are thin: :mod:`memoryd.daemon.client.init`,
:mod:`memoryd.daemon.client.agents_install` and :mod:`memoryd.daemon.client.doctor`
do the work with every path given to them. This module is the one place that
reads the environment for them (``HOME``, ``XDG_*``), as the project's rule asks:
``--home`` overrides it, for tests and for setting up another account's files.

Exit codes: 0 done (or nothing to do), 1 a check failed or a file could not be
edited (the message names it; nothing was written), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command
from memoryd.daemon.exits import EXIT_ERROR

HOSTS = ("claude-code", "codex", "openclaw")  # memoryd.daemon.client.agents_install.HOSTS (a test keeps them equal)


def add_parsers(sub: Any) -> None:
    """Add ``init``, ``agents`` and ``doctor`` to the ``memoryd`` sub-command parsers."""
    p = command(sub, "init", "create the config folder and file (memoryd.toml) with your memory folders",
                "memoryd init --root ~/notes", "memoryd init   # asks for the folders on a terminal",
                note="It never replaces an existing file without --force.")
    p.add_argument("--root", action="append", default=None, help="memory folder to index (repeatable; none: "
                   "asked for on a terminal, else the built-in default folder)")
    p.add_argument("--config", type=Path, default=None,
                   help="file to write (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--force", action="store_true", help="replace an existing file (the old one is kept as .bak)")
    p.add_argument("--home", type=Path, default=None, help="the home folder for the default paths (default: $HOME)")

    p = command(sub, "agents", "wire memoryd into an agent host: MCP server, context hook, instructions",
                "memoryd agents install claude-code", "memoryd agents install codex --dry-run",
                "memoryd agents uninstall openclaw")
    actions = p.add_subparsers(dest="agents_action", metavar="ACTION", required=True)
    for action, summary in (("install", "write the host's MCP entry, hook and instructions (idempotent)"),
                            ("uninstall", "remove what install wrote, and nothing else")):
        a = command(actions, action, summary, f"memoryd agents {action} claude-code --dry-run")
        a.add_argument("host", choices=HOSTS)
        a.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
        a.add_argument("--home", type=Path, default=None, help="the home folder whose files to edit (default: $HOME)")
        a.add_argument("--project", type=Path, default=None,
                       help="claude-code: the project's .mcp.json, .claude/settings.json and CLAUDE.md instead")
        a.add_argument("--workspace", type=Path, default=None,
                       help="openclaw: the agent workspace (default: ~/.openclaw/workspace)")
        a.add_argument("--config", type=Path, default=None,
                       help="openclaw: the memoryd config to create when absent (default: "
                            "$XDG_CONFIG_HOME/memoryd/memoryd.toml)")

    p = command(sub, "doctor", "check the set-up: config, daemon, roots, inotify, model; one line each",
                "memoryd doctor", "memoryd doctor --json | jq '.checks[] | select(.level != \"ok\")'",
                note="Exit status 1 when a check fails.")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: from the config)")
    p.add_argument("--no-model", action="store_true", help="do not load the embedding model (faster)")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--unit-dir", type=Path, default=None, help="systemd user unit folder "
                   "(default: $XDG_CONFIG_HOME/systemd/user)")


def _env(args: argparse.Namespace) -> Mapping[str, str]:
    """The environment, with ``--home`` as HOME (and the XDG folders under it) when given."""
    home = getattr(args, "home", None)
    if home is None:
        return os.environ
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") or k == "XDG_RUNTIME_DIR"}
    env["HOME"] = str(Path(os.path.abspath(home.expanduser())))
    return env


def _say(line: str) -> None:
    print(line)


def cmd_init(args: argparse.Namespace) -> int:
    from memoryd.daemon.client import init
    from memoryd.daemon.client.setup_files import SetupError, apply
    from memoryd.indexer.paths import default_config_path, xdg_dir

    env = _env(args)
    path = Path(os.path.abspath(args.config.expanduser())) if args.config else default_config_path(env)
    default_root = xdg_dir(env, "DATA", ".local/share") / "memoryd" / "memory"  # Config.default_root
    raw: list[str] = list(args.root or [])
    if not raw and sys.stdin.isatty():
        raw = init.parse_answer(input(f"Memory folders to index, comma-separated [{default_root}]: "))
    roots = init.absolute_roots(raw, Path.cwd())
    try:
        change = init.plan_init(path, roots, args.force, env)
    except SetupError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    apply([change], _say)
    for line in init.describe_roots(roots, default_root):
        _say(line)
    _say("next: memoryd run (or memoryd service install --enable), then memoryd agents install claude-code|codex|"
         "openclaw, and memoryd doctor to check it all")
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    from memoryd.daemon.client import agents_install
    from memoryd.daemon.client.cli_setup import running_executable
    from memoryd.daemon.client.setup_files import SetupError, apply
    from memoryd.indexer.paths import default_config_path, home

    env = _env(args)
    install = args.agents_action == "install"

    def absolute(p: Path | None) -> Path | None:
        return None if p is None else Path(os.path.abspath(p.expanduser()))

    config = absolute(args.config) or default_config_path(env)
    try:
        where = agents_install.Where(home=home(env), exe=running_executable(), python=os.path.abspath(sys.executable),
                                     project=absolute(args.project), on_path=shutil.which("memoryd"),
                                     workspace=absolute(args.workspace), config=config)
        changes, notes = agents_install.plan(args.host, where, install)
        done = apply(changes, _say, dry_run=args.dry_run, install=install)
    except SetupError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for note in notes:
        _say(f"note: {note}")
    if not args.dry_run:
        verb = "installed" if install else "uninstalled" if done else "nothing to remove"
        _say(f"{args.host}: {verb} ({done} files changed)" + (
            "; restart the agent to load the MCP server" if install and done else ""))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from memoryd.daemon.client import doctor
    from memoryd.daemon.client.cli_setup import unit_dir

    def status(sock: Path) -> dict[str, Any]:
        from memoryd.daemon.client.rpc_client import Client

        with Client(sock, timeout=10.0) as client:
            result: dict[str, Any] = client.call("status")
            return result

    from memoryd.daemon.logs import configure_logging, reset_logging

    socket = Path(os.path.abspath(args.socket.expanduser())) if args.socket else None
    inputs = doctor.Inputs(env=os.environ, config=args.config, socket=socket, status=status,
                           unit_dir=unit_dir(args.unit_dir, os.environ), load_model=not args.no_model)
    configure_logging("warning", "auto")  # stdout is the checks' (a model load's info line is not one of them)
    try:
        checks = doctor.run_checks(inputs)
    finally:
        reset_logging()
    if args.json:
        print(json.dumps(doctor.as_json(checks), ensure_ascii=False))
    else:
        for c in checks:
            print(c.line())
    return EXIT_ERROR if any(c.level == doctor.FAIL for c in checks) else 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"init": cmd_init, "agents": cmd_agents,
                                                             "doctor": cmd_doctor}
