"""``memoryd mcp``: serve the memory tools to an MCP host over stdio (see docs/mcp.md).

Import-light on purpose: ``memoryd.daemon.cli`` imports this module for every command
(editors run ``memoryd reindex`` on each save), so the MCP SDK is imported only
inside :func:`cmd_mcp`. ``memoryd.daemon.cli`` adds the parser with :func:`add_parsers`
and dispatches through :data:`COMMANDS`; ``python -m memoryd.daemon.client.cli_mcp ...`` runs
the same command stand-alone.

The session flags map the MCP session to a memoryd session (docs/mcp.md): the
owner by default; ``--session direct --peer ID`` or ``--session group --group
ID`` confine a shared agent to that peer's or group's namespace. Exit status:
0 when the host closes stdin (with nothing on stderr: hosts log every stderr
line, often as an error), 2 for bad flags, 3 for a bad config file. The log
level is ``warning`` unless ``--log-level`` says otherwise: a session that goes
well logs nothing; a daemon that is not running is a warning.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from memoryd.daemon.client.cli_help import command
from memoryd.daemon.exits import EXIT_INTERRUPTED, EXIT_STARTUP, EXIT_USAGE

SESSION_KINDS = ("owner", "direct", "group")
# memoryd.indexer.config.LOG_LEVELS, spelled out: this module must not import the config machinery.
LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_LOG_LEVEL = "warning"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # memoryd.indexer.access's id rule


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the top-level ``memoryd`` sub-command parsers."""
    p = command(subparsers, "mcp", "serve memory_search/get/context/remember/status to an MCP host "
                "over stdio (a client of the running daemon)", "claude mcp add memoryd -- memoryd mcp",
                "memoryd mcp --session direct --peer alice")
    _arguments(p)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    p.add_argument("--session", choices=SESSION_KINDS, default="owner",
                   help="the memoryd session the MCP client acts as (default owner: reads and writes everything)")
    p.add_argument("--peer", metavar="ID", help="the peer of a direct session")
    p.add_argument("--group", metavar="ID", help="the group of a group session")
    p.add_argument("--log-level", choices=LOG_LEVELS, default=DEFAULT_LOG_LEVEL,
                   help="what goes to stderr, the host's log (default warning: nothing when all goes well; "
                   "info adds mcp.started and each tool error)")


def session_of(args: argparse.Namespace) -> dict[str, str]:
    """The memoryd session named by the flags; ``ValueError`` with a usage message when they do not fit."""
    kind, peer, group = args.session, args.peer, args.group
    if kind == "owner" and (peer or group):
        raise ValueError("--peer and --group need --session direct or --session group")
    if kind == "direct" and (not peer or group):
        raise ValueError("--session direct needs --peer ID (and no --group)")
    if kind == "group" and (not group or peer):
        raise ValueError("--session group needs --group ID (and no --peer)")
    session = {"kind": kind}
    for key, value in (("peer", peer), ("group", group)):
        if value:
            if not _ID.fullmatch(value) or ".." in value:
                raise ValueError(f"--{key} {value[:80]!r}: an id is 1-64 letters, digits, '.', '_' or '-', "
                                 "starting with a letter or digit")
            session[key] = value
    return session


def _socket(args: argparse.Namespace) -> Path:
    from memoryd.indexer.paths import client_socket_path

    if args.socket:
        return Path(os.path.abspath(os.path.expanduser(args.socket)))
    return client_socket_path(args.config, os.environ)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until the host closes stdin. Logs go to stderr (JSON lines): stdout carries only the protocol."""
    try:
        session = session_of(args)
    except ValueError as exc:
        print(f"memoryd mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import structlog

    from memoryd.daemon.client.mcp_server import DaemonBridge, serve
    from memoryd.daemon.logs import configure_logging

    configure_logging(args.log_level, "auto")  # stderr: MCP hosts keep it as the server's log
    log = structlog.get_logger(__name__)
    socket = _socket(args)
    log.info("mcp.started", socket=str(socket), session=session, pid=os.getpid())
    if not socket.exists():
        log.warning("mcp.daemon_not_running", socket=str(socket),
                    hint="every tool answers with an error until `memoryd run` starts the daemon")
    from memoryd.indexer.paths import client_daemon_uid

    return serve(DaemonBridge(socket, session, expect_uid=client_daemon_uid(args.config, os.environ)),
                 version=_version())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "0+unknown"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"mcp": cmd_mcp}


def main(argv: list[str] | None = None) -> int:
    """``python -m memoryd.daemon.client.cli_mcp [flags]``: the ``mcp`` command without the rest of the CLI."""
    from memoryd.indexer.errors import ConfigError

    parser = argparse.ArgumentParser(prog="memoryd mcp", description="Serve memoryd's tools over MCP (stdio).")
    _arguments(parser)
    try:
        return cmd_mcp(parser.parse_args(argv))
    except ConfigError as exc:
        print(f"memoryd mcp: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

