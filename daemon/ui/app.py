"""The ``memoryd ui`` web app: Starlette routes behind :class:`memoryd.daemon.ui.security.Guard`.

:func:`create_app` builds it for one start (one token, one port): server-rendered Jinja2 pages
with autoescape on, every string through :func:`memoryd.daemon.ui.views.visible` first, and
``/static`` for the stylesheet and the one script. It holds no memory of its own but the flash
messages a POST leaves for the page it redirects to (:mod:`memoryd.daemon.ui.state`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from memoryd.daemon.ui.abstracts import ROUTES as ABSTRACT_ROUTES
from memoryd.daemon.ui.bridge import Daemon
from memoryd.daemon.ui.routes import ROUTES
from memoryd.daemon.ui.security import Guard, Keys
from memoryd.daemon.ui.state import HERE, QUICK_TIMEOUT_S, Settings, Ui, environment


def create_app(socket: str | os.PathLike[str], port: int, keys: Keys | None = None,
               on_token: Callable[[], None] | None = None, settings: Settings | None = None) -> Starlette:
    """The app for one start on ``port`` (the Host allow-list names it), talking to the daemon on ``socket``;
    ``on_token`` runs when a request brings the token (:mod:`memoryd.daemon.ui.launch` removes its file)."""
    ui = Ui(daemon=Daemon(socket), quick=Daemon(socket, timeout=QUICK_TIMEOUT_S), keys=keys or Keys.fresh(),
            port=port, env=environment(), settings=settings or Settings())
    app = Starlette(
        routes=[*ROUTES, *ABSTRACT_ROUTES, Mount("/static", StaticFiles(directory=HERE / "static"), name="static")],
        middleware=[Middleware(Guard, keys=ui.keys, port=port, on_token=on_token)],
    )
    app.state.ui = ui
    return app
