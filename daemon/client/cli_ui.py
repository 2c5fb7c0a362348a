"""``memoryd ui``: a local web page to see, search and repair the memory (docs/ui.md).

Import-light on purpose, like ``cli_mcp``: ``memoryd.daemon.cli`` imports this module for
every command (editors run ``memoryd reindex`` on each save), so Starlette, uvicorn and Jinja2
(in the default install, docs/ui.md "Install") are imported only inside :func:`cmd_ui`. Exit status: 130
after Ctrl-C (as for every command), 2 for bad flags, 3 when the port is taken or a dependency of the page
is missing (the message names the command for the way memoryd was installed: pipx, uv tool, a venv).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.daemon.client.cli_help import command
from memoryd.daemon.exits import EXIT_STARTUP


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is 0..65535 (0 picks a free one)")
    return value


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the ``memoryd`` sub-command parsers."""
    p = command(sub, "ui", "open a local web page to see, search and repair the memory (a client of the daemon)",
                "memoryd ui", "memoryd ui --port 8765 --no-browser",
                note="It listens on 127.0.0.1 only and prints its URL with a new token each start.")
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    p.add_argument("--port", type=_port, default=0, help="TCP port on 127.0.0.1 (default 0: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")


def _socket(args: argparse.Namespace) -> Path:
    from memoryd.indexer.paths import client_socket_path

    if args.socket:
        return Path(os.path.abspath(os.path.expanduser(args.socket)))
    return client_socket_path(args.config, os.environ)


def _settings(args: argparse.Namespace) -> Any:
    """The sections and abstention score from the config the daemon reads (its defaults when it has none,
    or when it does not load: the daemon would refuse it too, and the page says what the daemon says)."""
    from memoryd.daemon.ui.state import Settings
    from memoryd.indexer import config
    from memoryd.indexer.errors import MemorydError

    try:
        cfg = config.load(args.config)
    except (MemorydError, OSError, ValueError):
        return Settings()
    return Settings(sections=tuple(cfg.write.sections), min_score=cfg.search.min_score)


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        from memoryd.daemon.ui.server import BindError, serve
    except ImportError as exc:
        from memoryd.daemon.client.install_hint import missing_ui_message

        print(missing_ui_message(exc.name or str(exc)), file=sys.stderr)
        return EXIT_STARTUP
    try:
        return serve(_socket(args), args.port, open_browser=not args.no_browser, settings=_settings(args))
    except BindError as exc:
        print(f"memoryd ui: {exc}", file=sys.stderr)
        return EXIT_STARTUP


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"ui": cmd_ui}
