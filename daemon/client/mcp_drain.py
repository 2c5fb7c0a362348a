"""``memoryd mcp`` answers every request it has read before it exits (issue #37, item 6).

A host may write its last requests and close stdin at once (a one-shot script, a host shutting
down after a final ``tools/call``). The SDK's stdio transport ends its read stream at EOF; the
session then closes its write stream and ``Server.run`` cancels every handler still running, so
a call already read was never answered (measured: initialize + initialized + ``tools/call`` then
EOF gave exit 0 and only the initialize answer).

:func:`run_draining` sits between the transport and the server: it forwards every message both
ways, counts the requests read and not answered yet, and passes the end of input on to the server
only once that count is zero (or ``drain_s`` has passed: a call that never ends must not keep the
process alive for good). The server then ends as before, with nothing left to cancel. The SDK is
imported by the caller (:func:`memoryd.daemon.client.mcp_server.serve`); this module only names its
types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage
    from mcp.types import RequestId

    Incoming = MemoryObjectReceiveStream[SessionMessage | Exception]
    Outgoing = MemoryObjectSendStream[SessionMessage]

log = structlog.get_logger(__name__)


class _Unanswered:
    """The ids of the requests read and not answered yet; :meth:`settled` waits until there are none."""

    def __init__(self) -> None:
        import anyio

        self._ids: set[RequestId] = set()
        self._none = anyio.Event()
        self._none.set()

    def read(self, rid: RequestId) -> None:
        import anyio

        self._ids.add(rid)
        if self._none.is_set():
            self._none = anyio.Event()

    def answered(self, rid: RequestId) -> None:
        self._ids.discard(rid)
        if not self._ids:
            self._none.set()

    def __len__(self) -> int:
        return len(self._ids)

    async def settled(self) -> None:
        while self._ids:
            await self._none.wait()


async def run_draining(run: Callable[[Incoming, Outgoing], Awaitable[None]], read: Incoming, write: Outgoing,
                       drain_s: float) -> None:
    """``run(incoming, outgoing)`` (the SDK server's ``run``) on the transport's ``read`` and ``write``,
    with the end of ``read`` held back until every request read has its answer written to ``write``
    (at most ``drain_s`` seconds after the end of input)."""
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    to_server, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    unanswered = _Unanswered()

    async def pump_in() -> None:
        async with read, to_server:
            async for msg in read:
                if isinstance(msg, SessionMessage) and isinstance(msg.message.root, types.JSONRPCRequest):
                    unanswered.read(msg.message.root.id)
                await to_server.send(msg)
            with anyio.move_on_after(drain_s) as waited:  # stdin is at EOF: finish what was asked first
                await unanswered.settled()
            if waited.cancelled_caught:
                log.warning("mcp.drain_timeout", unanswered=len(unanswered), waited_s=drain_s,
                            action="exiting; those calls get no answer")

    async def pump_out() -> None:
        async with from_server, write:
            async for msg in from_server:
                await write.send(msg)
                root = msg.message.root
                if isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
                    unanswered.answered(root.id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_out)  # ends when the server closes its write stream, after its last answer
        async with anyio.create_task_group() as reading:
            reading.start_soon(pump_in)
            await run(incoming, outgoing)
            reading.cancel_scope.cancel()  # the server ended on its own: stop reading for it
