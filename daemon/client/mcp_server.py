"""``memoryd mcp``: the memory tools over the Model Context Protocol (stdio), on the official ``mcp`` SDK.

A thin client of the running daemon: every tool call becomes one JSON-RPC call
on the daemon's socket (a fresh connection per call, so a daemon restart is
picked up and calls may overlap); the index is never opened here. The process
is started by an MCP host (Claude Desktop, Claude Code, Cursor, OpenClaw ...)
and lives as long as the host keeps its stdin open.

**Turns.** memoryd limits writes per *turn* (``write.max_per_turn``, default 3)
as well as per minute. MCP has no notion of a turn, so this server defines
one (:class:`TurnClock`): a burst of *writes* with no pause longer than
``TURN_GAP_S`` (30 s), cut after ``TURN_MAX_S`` (5 min) at most. Reads
(search, get, context, list, status) neither start nor extend a turn: an
agent that keeps searching after its writes gets its allowance back 30 s after
the last one, not never. When the host tells memoryd that the person sent a
new prompt (Claude Code's prompt hook runs ``memoryd context --user-prompt``),
the daemon ends every agent turn at once (``user_prompt``), so the next write
starts afresh without waiting. Every write (each tool that is not read-only)
carries the current turn id (unique to this process) in its session, so five
``memory_remember`` calls in a row are refused from the fourth on (-32021)
until the agent pauses or the person answers; the refusal says how long that
pause is. The turn is also how the daemon knows an owner session is an
agent's, held to the limits like a confined one (a person's own ``memoryd``
commands send none).

**Shutdown.** The host ends a session by closing stdin: the server answers every
request it has read (:mod:`memoryd.daemon.client.mcp_drain`, at most ``DRAIN_S``),
then exits 0 with nothing on stderr. It reads and writes its own duplicates of fds 0 and 1,
so the SDK closing its streams never closes ``sys.stdout`` under the CLI.

Every failure is an MCP *tool* error (``isError: true``) with a message a model
can act on: bad arguments name the argument, a stopped daemon names the command
that starts it, a refusal by the daemon (permission, rate limit, size) keeps
the daemon's own message. Nothing is ever printed on stdout but protocol
messages; logs go to stderr.

The SDK is imported by :func:`serve` and :func:`build_server` only: it costs
most of the start-up time (~0.7 s of CPU for pydantic models) and the rest of
this module is usable (and testable) without it.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import structlog

from memoryd.daemon.client.mcp_drain import run_draining
from memoryd.daemon.client.mcp_prompts import recall_message, recall_params
from memoryd.daemon.client.mcp_resources import PAGE, ResourceError, cursor_offset, path_of, resource_of
from memoryd.daemon.client.mcp_shapes import SHAPERS, Shaped
from memoryd.daemon.client.mcp_tools import (
    BANK_PROPOSE,
    BY_NAME,
    CONTEXT,
    DEFAULT_CONTEXT_TOKENS,
    GET,
    LIST,
    OBSERVE,
    OWNER_TOOLS,
    PROMOTE,
    REMEMBER,
    SEARCH,
    STATUS,
    TOOLS,
    UPDATE_SECTION,
    ToolError,
    check_arguments,
)
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED, STORAGE_UNAVAILABLE, TURN_LIMIT
from memoryd.indexer.errors import MemorydError, NotRunningError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

log = structlog.get_logger(__name__)

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
CALL_TIMEOUT_S = 90.0  # a remember may wait 2 x write.wait_s for the index worker
DRAIN_S = CALL_TIMEOUT_S + 10  # at stdin EOF, the longest wait for the calls read to be answered
INSTRUCTIONS = (
    "memoryd keeps a live search index over the user's Markdown memory files. Call memory_search (or "
    "memory_context) before answering questions about prior work, decisions, people, preferences or todos; "
    "memory_get reads more of a file around a hit; memory_remember saves a durable fact; memory_status says "
    "whether the index has caught up with recent saves; memory_list lists stored entries; "
    "memory_update_section rewrites a kept-current section (e.g. Current Focus); memory_promote copies a "
    "peer's or group's entry into the user's own memory; memory_bank_propose drafts a 💾 Memory Bank proposal "
    "after a task; memory_observe hands the conversation over, to be kept as a session note (not needed where "
    "memoryd's agent hooks are installed). The memory files themselves are resources "
    "(file:// URIs) a host can list and attach; the `recall` prompt loads the memories about a topic. "
    "When not to write: small talk, greetings, routine acknowledgements, what is already stored, anything "
    "low-confidence or speculative (conversations are captured as session notes on their own). At most 3 "
    "memory_remember calls per turn. Never mention memory operations in the reply, never print tool-call JSON. "
    "In a group, when memories disagree: MY_ROLE (the agent's role in the group) > the group's notes > the "
    "group's MEMORY."
)

LIST_LIMIT = 50

TURN_GAP_S = 30.0
TURN_MAX_S = 300.0

Session = dict[str, str]


class TurnClock:
    """The id of the current turn: a new one after ``gap_s`` without a write, or ``max_s`` after it began.

    Thread-safe (the SDK runs tool calls on worker threads); the clock is
    injectable so tests never sleep.
    """

    def __init__(self, gap_s: float = TURN_GAP_S, max_s: float = TURN_MAX_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.gap_s = gap_s
        self.max_s = max_s
        self._clock = clock
        self._prefix = f"mcp-{os.getpid()}-{time.time_ns():x}"  # distinct from every other bridge's turns
        self._lock = threading.Lock()
        self._n = 0
        self._started = self._last = float("-inf")

    def tick(self) -> str:
        """Note one write now; return the id of the turn it belongs to (reads call nothing here)."""
        with self._lock:
            now = self._clock()
            if now - self._last > self.gap_s or now - self._started > self.max_s:
                self._n += 1
                self._started = now
            self._last = now
            return f"{self._prefix}-{self._n}"

    def next_turn_in(self) -> float:
        """Seconds until a call starts a new turn, if none is made meanwhile (rounded up to a tenth)."""
        with self._lock:
            now = self._clock()
            wait = min(self._last + self.gap_s, self._started + self.max_s) - now
        return max(0.0, math.ceil(round(wait * 10, 6)) / 10)


class DaemonBridge:
    """Runs tool calls against the daemon at ``socket`` on behalf of one memoryd ``session``.

    ``session`` is ``{"kind": "owner" | "direct" | "group", "peer"?, "group"?}``, sent with
    every call but ``status``: the daemon confines reads and writes to what it may touch.
    """

    def __init__(self, socket: str | os.PathLike[str], session: Session | None = None,
                 timeout: float = CALL_TIMEOUT_S, turns: TurnClock | None = None,
                 expect_uid: int | None = None) -> None:
        self.socket = Path(socket)
        self.expect_uid = expect_uid  # the listener's uid the client requires (None: ours)
        self.session: Session = dict(session or {"kind": "owner"})
        self.timeout = timeout
        self.turns = turns or TurnClock()
        # memory_observe's session id when the model names none: one conversation per MCP connection
        self.connection_id = f"mcp-{os.getpid()}-{time.time_ns():x}"

    def call_tool(self, name: str, arguments: dict[str, Any] | None) -> Shaped:
        """``(text, structured)`` for the model; raises :class:`ToolError` with a clear message."""
        spec = BY_NAME.get(name)
        if spec is None:
            raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(t.name for t in TOOLS)}")
        args = check_arguments(spec, dict(arguments or {}))
        method, params = self.request(name, args)
        # every write: limited per turn, and marked as an agent's; reads (and observe) keep no turn open
        if not spec.read_only and spec.turn:
            params["session"] = {**params["session"], "turn": self.turns.tick()}
        result = self._call(method, params)
        return SHAPERS[name](args, result)

    def request(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The daemon method and params for a tool call whose ``args`` passed the schema."""
        if name == SEARCH.name:
            # Agents get the configured abstention threshold unless they name one (the daemon knows it).
            found = {"query": args["query"], "min_score": args.get("min_score", "default")}
            return SEARCH.method, self._with(found, args, "k", "mode", "namespace", "path_prefix", "sites")
        if name == GET.name:
            start = args.get("from", 1)
            params: dict[str, Any] = {"path": args["path"], "start_line": start}
            if "lines" in args:
                params["end_line"] = start + args["lines"] - 1
            return GET.method, self._with(params, args)
        if name == REMEMBER.name:
            return REMEMBER.method, {**args, "session": self.session}
        if name == STATUS.name:
            return STATUS.method, {}
        if name == LIST.name:
            return LIST.method, self._with({"limit": args.get("limit", LIST_LIMIT)}, args, "namespace", "type", "since",
                                      "until", "cursor")
        if name == OBSERVE.name:
            found = {"session_id": args.get("session_id", self.connection_id), "transcript": args["transcript"]}
            return OBSERVE.method, self._with(found, args, "namespace", "format", "final")
        if name == BANK_PROPOSE.name:
            return "bank_propose", self._with({"transcript": args["transcript"]}, args, "namespace")
        if name in (UPDATE_SECTION.name, PROMOTE.name):
            return BY_NAME[name].method, {**args, "session": self.session}
        budget = args.get("max_tokens", DEFAULT_CONTEXT_TOKENS)  # the daemon requires it; the tool has a default
        return CONTEXT.method, self._with({"query": args["query"], "max_tokens": budget}, args, "namespace",
                                          "min_score", "path_prefix")

    def list_resources(self, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the memory files this session may read, as resources; and the next page's cursor."""
        try:
            offset = cursor_offset(cursor)
        except ResourceError as exc:
            raise ToolError(str(exc)) from None
        params = {"offset": offset, "limit": PAGE, "session": self.session}
        try:  # each file's abstract too, for its description
            res = self._call("files", {**params, "abstracts": True})
        except DaemonRefusal as exc:
            if exc.code != INVALID_PARAMS:
                raise
            res = self._call("files", params)  # a daemon older than the param: the list without them
        nxt = res.get("next_offset")
        return [resource_of(f) for f in res.get("files", [])], None if nxt is None else str(nxt)

    def recall(self, arguments: dict[str, str] | None) -> str:
        """The ``recall`` prompt's message: the context block for ``arguments["topic"]``."""
        try:
            params = recall_params(arguments)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        block = self._call("context", {**params, "session": self.session}).get("text", "")
        return recall_message(str(params["query"]), str(block))

    def read_resource(self, uri: str) -> str:
        """The whole text of the memory file ``uri`` names, read through the daemon's ``get`` (scope-checked)."""
        try:
            path = path_of(uri)
        except ResourceError as exc:
            raise ToolError(str(exc)) from None
        return str(self._call("get", {"path": path, "session": self.session}).get("text", ""))

    def _with(self, params: dict[str, Any], args: dict[str, Any], *optional: str) -> dict[str, Any]:
        return {**params, **{k: args[k] for k in optional if k in args}, "session": self.session}

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            with Client(self.socket, timeout=self.timeout, expect_uid=self.expect_uid) as client:
                return client.call(method, params)
        except NotRunningError as exc:
            raise ToolError(f"{exc} If it runs on another socket, start the MCP server with "
                            "`memoryd mcp --socket PATH`.") from None
        except RpcClientError as exc:
            raise DaemonRefusal(self._daemon_refusal(method, exc), exc.code) from None
        except MemorydError as exc:  # timeout, broken connection
            raise ToolError(f"memoryd error: {exc}") from None

    def _daemon_refusal(self, method: str, exc: RpcClientError) -> str:
        if exc.code == METHOD_NOT_FOUND:
            return (f"the memoryd daemon on {self.socket} does not offer {method!r} (it is older than this "
                    "MCP server): update memoryd and restart the daemon")
        if exc.code == INVALID_PARAMS:
            return f"invalid arguments: {exc.message}"
        if exc.code == ACCESS_DENIED:
            return f"permission denied: {exc.message} (this MCP server acts as {_describe(self.session)})"
        if exc.code == TURN_LIMIT:
            wait = self.turns.next_turn_in()
            return (f"{exc.message}: a new turn starts at the user's next prompt, or after {self.turns.gap_s:g} s "
                    f"without a memory write (searches do not count); retry in {wait:g} s")
        if exc.code == STORAGE_UNAVAILABLE:
            return (f"storage unavailable (memoryd error {STORAGE_UNAVAILABLE}): {exc.message}; memory files "
                    "can still be written, and are searchable once the database is back")
        return exc.message


class DaemonRefusal(ToolError):
    """The daemon answered with an error (``code``: its JSON-RPC code); the message is the model's to read."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _describe(session: Session) -> str:
    """``an owner session``, ``a direct session (peer alice)``: for messages."""
    kind = session["kind"]
    ids = ", ".join(f"{k} {v}" for k, v in session.items() if k != "kind")
    return f"{'an' if kind == 'owner' else 'a'} {kind} session" + (f" ({ids})" if ids else "")


def build_server(bridge: DaemonBridge, version: str = "0") -> Server[Any, Any]:
    """The low-level SDK server: hand-written schemas, our own argument checks and error messages."""
    import anyio.to_thread
    from mcp import types
    from mcp.server.lowlevel import Server

    from memoryd.daemon.client.mcp_browse import add_prompts, add_resources

    server: Server[Any, Any] = Server("memoryd", version=version, instructions=INSTRUCTIONS)
    tools = [types.Tool(name=t.name, title=t.title, description=t.description, inputSchema=t.schema,
                        outputSchema=t.output,
                        annotations=types.ToolAnnotations(title=t.title, readOnlyHint=t.read_only,
                                                          destructiveHint=t.destructive,
                                                          idempotentHint=t.idempotent, openWorldHint=False))
             for t in TOOLS if t.name not in OWNER_TOOLS or bridge.session.get("kind") == "owner"]

    async def list_tools() -> list[types.Tool]:
        return tools

    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            text, structured = await anyio.to_thread.run_sync(bridge.call_tool, name, arguments)
        except ToolError as exc:
            log.info("mcp.tool_error", tool=name, error=str(exc)[:300])
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], isError=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structuredContent=structured)

    # The SDK's registering decorators carry no annotations: give them their types here, once.
    on_list_tools: Callable[[], Callable[[Callable[[], Awaitable[list[types.Tool]]]], object]] = server.list_tools
    on_call_tool: Callable[..., Callable[[Callable[[str, dict[str, Any] | None], Awaitable[types.CallToolResult]]],
                                          object]] = server.call_tool
    on_list_tools()(list_tools)
    on_call_tool(validate_input=False)(call_tool)
    add_resources(server, bridge)
    add_prompts(server, bridge)
    return server


def serve(bridge: DaemonBridge, version: str = "0") -> int:
    """Serve MCP on stdin/stdout until the host closes stdin; returns the exit status (0).

    The SDK's default streams wrap ``sys.stdin.buffer`` and ``sys.stdout.buffer`` and close them
    when they are collected, so the CLI's last ``sys.stdout.flush()`` raised "I/O operation on
    closed file" (exit 1, a traceback in every host's log, every session). The streams given
    here are duplicates of fds 0 and 1: closing them leaves the process's own untouched.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(bridge, version)

    async def main(stdin: TextIO, stdout: TextIO) -> None:
        async with stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as (read, write):
            await run_draining(lambda r, w: server.run(r, w, server.create_initialization_options()), read, write,
                               DRAIN_S)

    # The SDK flushes each message: nothing is left to flush at close, unless the host stopped reading
    # (a BrokenPipeError then, which the CLI ends quietly with 141).
    with open(os.dup(sys.stdin.fileno()), encoding="utf-8", errors="replace") as stdin, \
            open(os.dup(sys.stdout.fileno()), "w", encoding="utf-8") as stdout:
        anyio.run(main, stdin, stdout)
    return 0
