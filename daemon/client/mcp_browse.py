"""Resources and prompts on the SDK server of ``memoryd mcp`` (its tools: :mod:`memoryd.daemon.client.mcp_server`).

Each handler runs the bridge's blocking socket call on a worker thread; a failure is
a JSON-RPC error carrying the bridge's message (resources and prompts have no
``isError``). Imported only by :func:`memoryd.daemon.client.mcp_server.build_server`,
so the SDK stays out of every other command.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from memoryd.daemon.client.mcp_prompts import PROMPTS
from memoryd.daemon.client.mcp_resources import MIME
from memoryd.daemon.client.mcp_tools import ToolError
from memoryd.daemon.rpc.errors import INVALID_PARAMS

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.server.lowlevel.helper_types import ReadResourceContents

log = structlog.get_logger(__name__)


class Bridge(Protocol):
    """What resources and prompts ask of the daemon (:class:`memoryd.daemon.client.mcp_server.DaemonBridge`
    is one); named here so that this module needs nothing of the server module that imports it."""

    def list_resources(self, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]: ...
    def read_resource(self, uri: str) -> str: ...
    def recall(self, arguments: dict[str, str] | None) -> str: ...


def add_resources(server: Server[Any, Any], bridge: Bridge) -> None:
    """resources/list and resources/read: the memory files, through the daemon (which scope-checks them).

    A failure is a JSON-RPC error (resources have no ``isError``) carrying the bridge's message.
    """
    import anyio.to_thread
    from mcp import types
    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.shared.exceptions import McpError

    async def list_resources(req: types.ListResourcesRequest) -> types.ListResourcesResult:
        cursor = req.params.cursor if req.params else None
        try:
            page, nxt = await anyio.to_thread.run_sync(bridge.list_resources, cursor)
        except ToolError as exc:
            raise McpError(types.ErrorData(code=INVALID_PARAMS, message=str(exc))) from None
        return types.ListResourcesResult(resources=[types.Resource.model_validate(r) for r in page], nextCursor=nxt)

    async def read_resource(uri: Any) -> list[ReadResourceContents]:
        try:
            text = await anyio.to_thread.run_sync(bridge.read_resource, str(uri))
        except ToolError as exc:
            log.info("mcp.resource_error", uri=str(uri)[:200], error=str(exc)[:300])
            raise McpError(types.ErrorData(code=INVALID_PARAMS, message=str(exc))) from None
        return [ReadResourceContents(content=text, mime_type=MIME)]

    on_list: Callable[[], Callable[[Callable[[types.ListResourcesRequest], Awaitable[types.ListResourcesResult]]],
                                   object]] = server.list_resources
    on_read: Callable[[], Callable[[Callable[[Any], Awaitable[list[ReadResourceContents]]]], object]] = \
        server.read_resource
    # The SDK passes the request (and its cursor) only to a handler whose annotation it can resolve, and
    # this module's annotations are strings naming a function-local import: give it the real types.
    list_resources.__annotations__ = {"req": types.ListResourcesRequest, "return": types.ListResourcesResult}
    on_list()(list_resources)
    on_read()(read_resource)


def add_prompts(server: Server[Any, Any], bridge: Bridge) -> None:
    """prompts/list and prompts/get (:mod:`memoryd.daemon.client.mcp_prompts`); failures are JSON-RPC errors."""
    import anyio.to_thread
    from mcp import types
    from mcp.shared.exceptions import McpError

    listed = [types.Prompt(name=p.name, title=p.title, description=p.description,
                           arguments=[types.PromptArgument(name=n, description=d, required=r)
                                      for n, d, r in p.arguments]) for p in PROMPTS]

    async def list_prompts() -> list[types.Prompt]:
        return listed

    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name not in {p.name for p in PROMPTS}:
            raise McpError(types.ErrorData(code=INVALID_PARAMS, message=f"unknown prompt {name!r}; the prompts "
                                           f"are {', '.join(p.name for p in PROMPTS)}"))
        try:
            text = await anyio.to_thread.run_sync(bridge.recall, arguments)
        except ToolError as exc:
            raise McpError(types.ErrorData(code=INVALID_PARAMS, message=str(exc))) from None
        return types.GetPromptResult(description=listed[0].description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

    on_list: Callable[[], Callable[[Callable[[], Awaitable[list[types.Prompt]]]], object]] = server.list_prompts
    on_get: Callable[[], Callable[[Callable[[str, dict[str, str] | None], Awaitable[types.GetPromptResult]]],
                                  object]] = server.get_prompt
    on_list()(list_prompts)
    on_get()(get_prompt)
