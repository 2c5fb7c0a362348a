"""What the socket server is given: its settings (:class:`ServerConfig`) and who it serves (:class:`Admission`).

uvicorn's split: the server gets a config and a narrow piece of state, never the application.
The transport knows uids, limits and handler tables; which uid reaches which method, and as which
session, is the application's to decide (:func:`memoryd.daemon.api.session.admission` builds it
from ``server.allowed_uids``), handed over as ``handlers_for(peer)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.daemon.rpc.jsonrpc import Handler, Peer

#: The methods a connecting peer may call, or None: the peer is refused (-32001) before any request.
HandlersFor = Callable[[Peer], Mapping[str, Handler] | None]


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and within which limits (``server.*``; seconds and bytes).

    ``listen_fd`` adopts a listening socket passed by systemd instead of binding ``path`` (the file
    is then systemd's). When ``max_clients`` are open, one idle for ``evict_idle_after_s`` makes
    room; refusals are logged once per uid per ``busy_log_interval_s``.
    """

    path: Path
    max_request_bytes: int = 1_048_576
    max_clients: int = 256
    idle_timeout_s: float = 300.0
    read_timeout_s: float = 10.0
    write_timeout_s: float = 10.0
    listen_fd: int | None = None
    evict_idle_after_s: float = 1.0
    busy_log_interval_s: float = 10.0


@dataclass(frozen=True)
class Admission:
    """Who may talk to the server, and with which methods.

    ``owner_uid``: the daemon's owner, whose slots the fairness policy reserves. ``guests``: the
    other uids served; with any, the socket is shared (0666 in a 0711 folder, SO_PEERCRED the gate)
    and start-up names a folder that keeps one out. ``handlers_for(peer)``: the table that peer's
    requests dispatch to, None to refuse it.
    """

    handlers_for: HandlersFor
    owner_uid: int = field(default_factory=os.geteuid)
    guests: frozenset[int] = frozenset()
