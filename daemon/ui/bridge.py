"""The UI's only way to the memory: JSON-RPC calls on the daemon's socket, as the CLI makes them.

The page never opens the index or a memory file itself, so whatever the socket checks
(owner-only methods, sessions, path rules) and redacts (history texts) holds for the page too.
Write methods are called with no ``session`` param: the uid running ``memoryd ui`` is the owner
for the daemon (a person, not rate-limited, like ``memoryd forget``); a uid the daemon binds to a
confined session gets that session's answers, refusals included.

:class:`Daemon` keeps a few idle connections (``rpc_client.Client`` is not thread-safe, and the
page's requests run on a thread pool): a request takes one, or opens one, and gives it back
unless the connection broke.
"""

from __future__ import annotations

import os
import queue
from typing import Any

from memoryd.daemon.client.rpc_client import Client, RpcClientError

MAX_IDLE = 8


class Daemon:
    """Calls on the daemon at ``socket``; ``timeout`` bounds each call (seconds)."""

    def __init__(self, socket: str | os.PathLike[str], timeout: float = 30.0) -> None:
        self.socket = os.fspath(socket)
        self.timeout = timeout
        self._idle: queue.LifoQueue[Client] = queue.LifoQueue(maxsize=MAX_IDLE)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The method's result; raises what ``Client.call`` raises (``NotRunningError``, ``RpcClientError``…)."""
        try:
            client = self._idle.get_nowait()
        except queue.Empty:
            client = Client(self.socket, timeout=self.timeout)
        reusable = False
        try:
            result = client.call(method, params)
            reusable = True
            return result
        except RpcClientError:
            reusable = True  # an answer, not a broken connection
            raise
        finally:
            self._release(client, reusable)

    def _release(self, client: Client, reusable: bool) -> None:
        if not reusable:
            client.close()
            return
        try:
            self._idle.put_nowait(client)
        except queue.Full:
            client.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
