"""Serve ``memoryd ui``: bind loopback, print (and open) the URL with this start's token, run uvicorn.

The listening socket is made here, on 127.0.0.1 and nowhere else — there is no option for
another address — and handed to uvicorn, so ``--port 0`` knows its port (for the URL and the
Host allow-list) before the first request. uvicorn's access log is off: it would write the
token, which travels in the first URL, to the terminal's scrollback; what is logged (stderr) is
memoryd's own events, such as ``ui.refused`` with the status, the reason and the path, never a query.

The browser is given a ``file://`` URL of a 0600 page that forwards it to the token URL
(:mod:`memoryd.daemon.ui.launch`), never the token URL itself: a browser's command line is
readable by every local user. uvicorn runs with :mod:`memoryd.daemon.ui.limits`' protocol (a
deadline for each request, a cap on connections) and ``limit_concurrency`` bounding the tasks.

A browser is opened only where one can show a window (``DISPLAY``, ``WAYLAND_DISPLAY``, or
macOS): elsewhere Python's ``webbrowser`` may start a text browser in this very terminal.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import uvicorn

from memoryd.daemon.ui.app import create_app
from memoryd.daemon.ui.launch import Launcher
from memoryd.daemon.ui.limits import KEEP_ALIVE_S, MAX_CONNECTIONS, REQUEST_TIMEOUT_S, bounded_protocol
from memoryd.daemon.ui.security import Keys
from memoryd.daemon.ui.state import Settings

log = structlog.get_logger(__name__)

LOOPBACK = "127.0.0.1"


class BindError(Exception):
    """The port could not be had (taken, or not ours to bind): ``memoryd ui`` exits 3 with this message."""


def bind_loopback(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:``port`` (0: a free port); ``OSError`` when taken.

    ``IPPROTO_TCP`` is named: asyncio turns Nagle off (``TCP_NODELAY``) only on sockets whose ``proto``
    says TCP, and without it every small page waited ~40 ms for the client's delayed ACK (uvicorn
    writes the headers and the body separately)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(port: int, keys: Keys) -> str:
    return f"http://{LOOPBACK}:{port}/?token={keys.token}"


def can_open_browser(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return sys.platform == "darwin" or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _open(url: str) -> None:
    import webbrowser

    try:
        webbrowser.open(url, new=2)
    except Exception as exc:  # a broken browser setup must not stop the server: the URL is printed
        log.warning("ui.browser_failed", error=str(exc))


def build(socket_path: Path, port: int, on_token: Callable[[], None] | None = None,
          request_timeout_s: float = REQUEST_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
          owner_uid: int | None = None, settings: Settings | None = None) -> tuple[Any, socket.socket, str]:
    """The uvicorn server (not started), its bound socket and the URL to open. The protocol is httptools'
    (in the ``ui`` extra; ~0.4 ms faster than h11, which stays the fallback) with the request deadline and
    connection cap of :mod:`memoryd.daemon.ui.limits`, serving only connections of ``owner_uid`` (default: ours);
    ``on_token`` runs when a request brings the token."""
    try:
        sock = bind_loopback(port)
    except OSError as exc:
        raise BindError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    owner_uid = os.geteuid() if owner_uid is None else owner_uid  # only its connections are served (tests: another)
    keys = Keys.fresh()
    app = create_app(socket_path, port, keys, on_token=on_token, settings=settings)
    config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="off",
                            server_header=False, proxy_headers=False, ws="none",
                            http=bounded_protocol(request_timeout_s, max_connections, owner_uid),
                            timeout_keep_alive=KEEP_ALIVE_S, limit_concurrency=2 * max_connections)
    return uvicorn.Server(config), sock, url_of(port, keys)


def serve(socket_path: Path, port: int, open_browser: bool,
          say: Callable[[str], None] = lambda line: print(line, flush=True), settings: Settings | None = None) -> int:
    """Run until Ctrl-C or SIGTERM. uvicorn stops gracefully, then hands the signal on: Ctrl-C ends
    as ``KeyboardInterrupt`` (the CLI's exit 130, as for every command), SIGTERM as the signal."""
    from memoryd.daemon.logs import configure_logging

    configure_logging("info", "auto")  # stderr: refusals (ui.refused) and uvicorn's warnings; never a URL
    launcher = Launcher(os.environ)
    server, sock, url = build(socket_path, port, on_token=launcher.remove, settings=settings)
    say(f"memoryd ui: {url}")
    say("  (a new token each start; Ctrl-C stops it)")
    if not socket_path.exists():
        say(f"  the daemon is not running yet (no socket at {socket_path}): the page will say so until it is")
    if open_browser and can_open_browser():
        threading.Thread(target=_open, args=(launcher.write(url),), name="ui-browser", daemon=True).start()
    elif open_browser:
        say("  no display here: open the URL in a browser on this machine")
    try:
        server.run(sockets=[sock])
    finally:
        launcher.remove()
        sock.close()
        server.config.app.state.ui.close()
    return 0
