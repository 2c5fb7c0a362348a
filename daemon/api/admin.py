"""The admin socket methods: ``ping`` (is it alive, which version) and ``status`` (the whole picture)."""

from __future__ import annotations

import os
import time
from typing import Any, cast

from memoryd.daemon.api.ports import StatusProvider
from memoryd.daemon.api.requests import no_params
from memoryd.daemon.api.vocabulary import PingReply, StatusReply
from memoryd.daemon.rpc.jsonrpc import Handler, Peer


class AdminMethods:
    def __init__(self, daemon: StatusProvider) -> None:
        self._daemon = daemon

    def handlers(self) -> dict[str, Handler]:
        return {"ping": self.ping, "status": self.status}

    def ping(self, params: dict[str, Any], peer: Peer) -> PingReply:
        no_params(params)
        d = self._daemon
        return {"version": d.version, "uptime_s": round(time.monotonic() - d.started, 3), "pid": os.getpid()}

    def status(self, params: dict[str, Any], peer: Peer) -> StatusReply:
        no_params(params)
        return cast(StatusReply, self._daemon.status().to_json())  # DaemonStatus.to_json: that shape
