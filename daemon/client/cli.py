"""The ``memoryd`` command line.

Client commands (``search``, ``status``, ``reindex``, ``get``) talk to the
daemon over its socket and import nothing heavy: editors run ``memoryd
reindex`` on every save, so start-up cost matters. ``run``, ``index`` and
``search --offline`` load the model stack lazily, inside their functions.

Exit codes: 0 ok, 1 error reported by the daemon or a bad argument, 2 usage,
3 start-up failed (config, socket in use, model), 4 the daemon is not running,
141 the reader closed the pipe (``| head``; quiet, no traceback).

Everything the client commands print passes through ``memoryd.daemon.client.termsafe``:
control and escape characters from file names and content are shown
escaped (``\x1b``), never sent to the terminal raw.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.daemon.api.vocabulary import SEARCH_MODES, SearchReply
from memoryd.daemon.client import (
    cli_bank,
    cli_completion,
    cli_history,
    cli_manage,
    cli_mcp,
    cli_observe,
    cli_onboard,
    cli_setup,
    cli_storage,
    cli_ui,
    cli_write,
)
from memoryd.daemon.client.cli_help import Parser, command, positive_int, unit_float
from memoryd.daemon.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NOT_RUNNING,
    EXIT_STARTUP,
    EXIT_STORAGE_UNAVAILABLE,
    EXIT_USAGE,
)
from memoryd.daemon.rpc.errors import STORAGE_UNAVAILABLE
from memoryd.indexer.errors import (
    ConfigError,
    IndexInUseError,
    MemorydError,
    ModelError,
    NotRunningError,
    SocketInUseError,
)
from memoryd.indexer.paths import client_daemon_uid, client_socket_path

if TYPE_CHECKING:
    from memoryd.indexer.config import Config

# memoryd.daemon.client.mcp_tools.NAMESPACE's rule, for --help (the daemon checks the value).
NAMESPACE_HELP = ("only one namespace: default (outside agents/, peers/, groups/), agent:ID, peer:ID or group:ID "
                  "(as the MCP tools' namespace)")



def _common(p: argparse.ArgumentParser, daemon_side: bool = False) -> None:
    p.add_argument("--config", type=Path, help="config file (default: $XDG_CONFIG_HOME/memoryd/memoryd.toml)")
    p.add_argument("--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/memoryd/memoryd.sock)")
    if daemon_side:
        p.add_argument("--root", type=Path, action="append", help="memory folder to index (repeatable; "
                       "replaces the configured roots)")
        p.add_argument("--data-dir", type=Path, help="index directory (default: $XDG_STATE_HOME/memoryd)")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="memoryd", description="Live hybrid search over Markdown memory files.",
        epilog="Run 'memoryd COMMAND --help' for a command's options and an example.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = command(sub, "run", "run the daemon in the foreground (what systemd starts)",
                "memoryd run --root ~/notes", "memoryd run --config ~/.config/memoryd/memoryd.toml")
    _common(p, daemon_side=True)

    p = command(sub, "index", "index/reconcile the roots once, then exit",
                "memoryd index --root ~/notes --data-dir /tmp/notes-index")
    _common(p, daemon_side=True)
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")

    p = command(sub, "search", "search the memory", 'memoryd search "which database did we choose"',
                'memoryd search --mode keyword -k 3 -- "PostgreSQL"',
                'memoryd search --offline --root ~/notes "release checklist"')
    _common(p, daemon_side=True)
    p.add_argument("query", nargs="+")
    p.add_argument("-k", type=positive_int, default=None, help="number of hits (default from config: 8)")
    p.add_argument("--mode", default=None, choices=SEARCH_MODES, help="hybrid (default), vector or keyword")
    p.add_argument("--path-prefix", default=None, help="only files whose path starts with this")
    p.add_argument("--namespace", default=None, help=NAMESPACE_HELP)
    p.add_argument("--min-score", type=unit_float, default=None,
                   help="leave out hits whose calibrated score (0-1) is below this; none left: abstain")
    p.add_argument("--width", type=positive_int, default=None,
                   help="cut lines to this many columns with '…' (default: the terminal's width; on a pipe, "
                        "lines are never cut)")
    p.add_argument("--explain", action="store_true", help="show each hit's ranks and raw scores in both legs")
    p.add_argument("--site", action="append", dest="sites", default=None,
                   help="PostgreSQL backend: only this site's files (repeatable; 'self' = the daemon's own)")
    p.add_argument("--offline", action="store_true", help="open the index in-process (read-only), no daemon")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")

    p = command(sub, "status", "show the daemon's state: freshness, files, errors, size, memory",
                "memoryd status", "memoryd status --json | jq .fresh")
    _common(p)
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")

    p = command(sub, "reindex", "re-index files now (editor on-save hook)", "memoryd reindex --wait ~/notes/todo.md",
                "memoryd reindex   # everything, in the background")
    _common(p)
    p.add_argument("paths", nargs="*", type=Path, help="files or folders (none: everything)")
    p.add_argument("--wait", action="store_true", help="return only when indexed")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")

    p = command(sub, "context", "the best memories for a query as a Markdown block within a token budget",
                'memoryd context --max-tokens 800 "how do we deploy"',
                'memoryd context --namespace default --path-prefix memory/ "what did we decide"')
    _common(p, daemon_side=True)
    p.add_argument("query", nargs="+")
    p.add_argument("--max-tokens", type=positive_int, default=1000, help="token budget (model tokens; default 1000)")
    p.add_argument("-k", type=positive_int, default=None, help="hits considered (default 20)")
    p.add_argument("--min-score", type=unit_float, default=None,
                   help="leave out hits whose calibrated score (0-1) is below this (default: search.min_score)")
    p.add_argument("--path-prefix", default=None, help="only files whose path starts with this")
    p.add_argument("--namespace", default=None, help=NAMESPACE_HELP)
    p.add_argument("--mode", default=None, choices=SEARCH_MODES,
                   help="how the hits are searched: hybrid (default), vector or keyword (with --offline only, "
                        "until the daemon's context method takes a mode)")
    p.add_argument("--offline", action="store_true", help="open the index in-process (read-only), no daemon")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")
    p.add_argument("--user-prompt", action="store_true",
                   help="the query is a person's new prompt (an agent host's prompt hook): every agent's MCP "
                        "write turn ends, giving back its write.max_per_turn allowance")

    p = command(sub, "get", "print lines of a memory file: PATH[:START[-END]]", "memoryd get memory/2024-05-01.md:8-15")
    _common(p)
    p.add_argument("target", metavar="PATH[:START[-END]]")
    p.add_argument("--abstract", action="store_true", help="print the file's abstract (written at idle time by "
                   "the [llm] model) instead of its lines, or why it has none")
    p.add_argument("--json", action="store_true", help="print the socket's JSON result")

    cli_bank.add_parsers(sub)
    cli_write.add_parsers(sub)
    cli_observe.add_parsers(sub)
    cli_history.add_parsers(sub)
    cli_manage.add_parsers(sub)
    cli_mcp.add_parsers(sub)
    cli_setup.add_parsers(sub)
    cli_onboard.add_parsers(sub)
    cli_completion.add_parsers(sub)
    cli_storage.add_parsers(sub)
    cli_ui.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (see :mod:`memoryd.daemon.exits`).

    A reader that stops early (``memoryd search x | head -3``) closes the pipe: that ends the
    command quietly with 141 (128 + SIGPIPE, what a shell reports for ``yes | head``), with no
    traceback, as a C tool killed by SIGPIPE would.
    """
    try:
        return _main(argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered
    does not fail a second time ("Exception ignored ... BrokenPipeError")."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (an embedding host): nothing will flush to it
        pass


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the command's own parser: its usage, not the top-level one
            _subparser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit:  # --help or a usage error: what argparse printed must reach the pipe here
        sys.stdout.flush()
        raise
    if args.version:
        from importlib.metadata import version

        print(f"memoryd {version('memoryd')}")
        return 0
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    handler = _COMMANDS[args.command]
    if args.command in _RAW_OUTPUT:
        status = _run(handler, args)
        if not sys.stdout.closed:  # a command that closed it (none should) has nothing left to flush
            sys.stdout.flush()  # a closed pipe shows here, inside main's handler, not at interpreter exit
        return status
    from memoryd.daemon.client.termsafe import SafeStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        return _run(handler, args)
    finally:
        sys.stdout, sys.stderr = out, err
        out.flush()


def _subparser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``args`` ran, down to the deepest ACTION level."""
    current = parser
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if chosen is None or chosen not in subs[0].choices:
            return current
        current = subs[0].choices[chosen]


def _run(handler: Any, args: argparse.Namespace) -> int:
    try:
        return int(handler(args))
    except (ConfigError, IndexInUseError, SocketInUseError, ModelError) as exc:  # the README's "start-up failed"
        _report(exc)
        return EXIT_STARTUP
    except NotRunningError as exc:
        _report(exc)
        return EXIT_NOT_RUNNING
    except MemorydError as exc:
        _report(exc)
        return EXIT_STORAGE_UNAVAILABLE if getattr(exc, "code", None) == STORAGE_UNAVAILABLE else EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _report(exc: Exception) -> None:
    """One line on stderr, named once: ``memoryd: <message>``, or the message alone when it
    already starts with the name ("memoryd is not running ...")."""
    message = str(exc)
    print(message if message.startswith("memoryd ") else f"memoryd: {message}", file=sys.stderr)


def _load_config(args: argparse.Namespace) -> Config:
    """The full, validated config (daemon-side commands only: it costs an import of the machinery)."""
    from memoryd.indexer import config as configmod

    cfg = configmod.load(args.config)
    return configmod.with_overrides(
        cfg, roots=getattr(args, "root", None), data_dir=getattr(args, "data_dir", None), socket=args.socket
    )


def _socket(args: argparse.Namespace) -> Path:
    """The daemon's socket, found without loading the full config (client commands must start fast)."""
    if args.socket:
        return Path(os.path.abspath(os.path.expanduser(args.socket)))
    return client_socket_path(args.config, os.environ)


# -- daemon-side commands (heavy imports inside) ------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from memoryd.daemon.app import run_daemon

    return run_daemon(_load_config(args), reload=lambda: _load_config(args))


def cmd_index(args: argparse.Namespace) -> int:
    from memoryd.daemon.oneshot import run_index

    return run_index(_load_config(args), as_json=args.json)


# -- client commands ----------------------------------------------------------


def _client(args: argparse.Namespace) -> Any:
    from memoryd.daemon.client.rpc_client import Client

    return Client(_socket(args), expect_uid=client_daemon_uid(args.config, os.environ))


def cmd_search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    params: dict[str, Any] = {"query": query}
    if args.explain:
        params["explain"] = True
    for key in ("k", "mode", "path_prefix", "namespace", "min_score", "sites"):
        if getattr(args, key) is not None:
            params[key] = getattr(args, key)
    result: SearchReply
    if args.offline:
        from memoryd.daemon.offline_read import offline_search

        result = offline_search(_load_config(args), params)  # the socket handler's own reply, in-process
    else:
        with _client(args) as client:
            result = client.call("search", params)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        from memoryd.daemon.client.render import render_hits

        tty = sys.stdout.isatty()
        highlight = tty and not os.environ.get("NO_COLOR")
        # A terminal's lines are cut to its width; a pipe's never are (a script or a model reads them whole).
        width = args.width or (shutil.get_terminal_size((100, 20)).columns if tty else None)
        # Highlighted output carries its own escapes; render_hits escapes every untrusted part itself.
        out = getattr(sys.stdout, "inner", sys.stdout) if highlight else sys.stdout
        print(render_hits(result, highlight=highlight, width=width, query=query), file=out)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("status")
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        from memoryd.daemon.client.render import render_status

        print(render_status(result))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"wait": bool(args.wait)}
    if args.paths:
        # abspath, not Path.absolute(): a '..' the user typed is resolved here, since the daemon refuses it
        params["paths"] = [os.path.abspath(p.expanduser()) for p in args.paths]
    with _client(args) as client:
        result = client.call("reindex", params)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        from memoryd.daemon.client.render import render_reindex

        print(render_reindex(result))
    # --wait promises "indexed": a path that was not (missing, filtered, too large ...) is a failure
    return 1 if args.wait and (result.get("not_indexed") or result.get("skipped")) else 0


def cmd_context(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"query": " ".join(args.query), "max_tokens": args.max_tokens}
    for key in ("k", "min_score", "path_prefix", "namespace", "mode"):
        if getattr(args, key) is not None:
            params[key] = getattr(args, key)
    if args.offline:
        from memoryd.daemon.offline_read import offline_context

        result = offline_context(_load_config(args), params)
    else:
        with _client(args) as client:
            if args.user_prompt:
                _end_agent_turns(client)
            result = client.call("context", params)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        empty = "no relevant memories" + (f" ({result['reason']})" if result.get("abstained") else "")
        print(result["text"] or empty, end="\n" if not result["text"].endswith("\n") else "")
    return 0


def _end_agent_turns(client: Any) -> None:
    """Tell the daemon a person sent a prompt; a daemon older than ``user_prompt`` is left as it is (its
    MCP turns still end after their silence), so the hook's context block comes either way."""
    from memoryd.daemon.client.rpc_client import RpcClientError
    from memoryd.daemon.rpc.errors import METHOD_NOT_FOUND

    try:
        client.call("user_prompt", {})
    except RpcClientError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise


def cmd_get(args: argparse.Namespace) -> int:
    from memoryd.daemon.client.render import TargetError, parse_target
    from memoryd.daemon.client.rpc_client import RpcClientError
    from memoryd.daemon.rpc.errors import AMBIGUOUS_PATH, INVALID_PARAMS

    try:
        params = parse_target(args.target)
    except TargetError as exc:
        print(f"memoryd get: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.abstract:
        params["abstract"] = True
    try:
        with _client(args) as client:
            result = client.call("get", params)
    except RpcClientError as exc:
        if exc.code == INVALID_PARAMS:  # a line range past the end of the file: the caller's mistake
            print(f"memoryd get: {exc.message}", file=sys.stderr)
            return EXIT_USAGE
        if exc.code != AMBIGUOUS_PATH or not isinstance(exc.data, dict):
            raise
        print(f"memoryd: {params['path']} is in several memory roots; name one of:", file=sys.stderr)
        suffix = args.target[len(params["path"]):]  # the :START-END the user typed
        for name in exc.data.get("candidates", []):
            print(f"  {name}{suffix}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    elif args.abstract:
        from memoryd.daemon.client.render import abstract_note
        from memoryd.daemon.client.termsafe import escape_line

        print(escape_line(result.get("abstract") or abstract_note(result.get("abstracts"), None)))
    else:
        sys.stdout.write(result.get("text", ""))
        if result.get("text") and not result["text"].endswith("\n"):
            sys.stdout.write("\n")
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for ``args.shell``, generated from this very parser."""
    sys.stdout.write(cli_completion.script(build_parser(), args.shell))
    return 0


# Commands whose output is not for a person to read through the filter: the daemon's own log (with its
# colours), the indexer's progress bar, the MCP protocol on stdout, a shell script, and the web UI's server
# (its URL is plain ASCII; uvicorn's log handlers keep the stream they were given).
_RAW_OUTPUT = frozenset({"run", "index", "mcp", "completion", "ui"})

_COMMANDS = {
    "run": cmd_run,
    "index": cmd_index,
    "search": cmd_search,
    "status": cmd_status,
    "reindex": cmd_reindex,
    "get": cmd_get,
    "context": cmd_context,
    "completion": cmd_completion,
    **cli_write.COMMANDS,
}
_COMMANDS.update(cli_bank.COMMANDS)
_COMMANDS.update(cli_mcp.COMMANDS)
_COMMANDS.update(cli_observe.COMMANDS)
_COMMANDS.update(cli_setup.COMMANDS)
_COMMANDS.update(cli_onboard.COMMANDS)
_COMMANDS.update(cli_history.COMMANDS)
_COMMANDS.update(cli_manage.COMMANDS)
_COMMANDS.update(cli_storage.COMMANDS)
_COMMANDS.update(cli_ui.COMMANDS)

if __name__ == "__main__":
    sys.exit(main())
