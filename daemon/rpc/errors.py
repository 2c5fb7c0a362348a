"""Every JSON-RPC error code memoryd answers, and the exception that carries one.

One table for the server, the API methods, the client and the MCP bridge, so a
code is defined once. It imports nothing at run time: the light client
(:mod:`memoryd.daemon.client.rpc_client`, loaded on every editor save) and the
MCP bridge use it too.

Protocol codes (JSON-RPC 2.0) and transport codes:

======  ===================  ==================================================
code    name                 when
======  ===================  ==================================================
-32700  PARSE_ERROR          invalid UTF-8 or JSON, NaN/Infinity, nesting too deep
-32600  INVALID_REQUEST      not an object, a batch, bad ``jsonrpc``/``method``/``id``
-32601  METHOD_NOT_FOUND     no such method
-32602  INVALID_PARAMS       a param is missing, unknown or has a bad type/value
-32603  INTERNAL_ERROR       a bug; the daemon log has the traceback
-32000  APPLICATION_ERROR    any ``MemorydError``, with its message
-32001  PERMISSION_DENIED    peer uid not allowed (sent before closing)
-32002  SERVER_BUSY          ``server.max_clients`` reached (sent before closing)
-32003  SHUTTING_DOWN        the daemon is stopping: the request was not (or not fully) run
-32004  IDLE_CLOSED          an idle connection closed to make room (id null; nothing of it was read)
======  ===================  ==================================================

Application codes (-32010..-32099); ``data`` names the limit or rule. The rate limits
(-32021, -32022) hold agents only and count only writes that changed something
(:mod:`memoryd.daemon.api.limits`, :func:`memoryd.daemon.api.session.held_to_limits`):

======  ===================  ==================================================
-32010  NOT_INDEXED          ``get``: the path is not a readable file inside a memory root
-32011  TIMEOUT              ``reindex`` with ``wait``: still running after the wait
-32020  ACCESS_DENIED        the session may not do this (owner claim from another uid too)
-32021  TURN_LIMIT           an agent's ``write.max_per_turn`` writes with one ``turn`` id are used;
                             ``data`` = ``{limit, max}``; retry in a new turn (the client's to start)
-32022  MINUTE_LIMIT         an agent's ``write.max_per_minute`` writes in 60 s are used; ``data`` =
                             ``{limit, max, retry_after_s}``, the message ends ``retry in N s``
-32023  CONTENT_TOO_LARGE    content over ``write.max_content_bytes`` (UTF-8 bytes)
-32024  BAD_TARGET           path/namespace refused (``..``, absolute, symlink, not .md, not UTF-8)
-32025  WRITE_CONFLICT       the file kept changing, or its block markers are broken
-32026  WRITE_TIMEOUT        the index worker stayed busy for ``write.wait_s``; nothing written
-32027  WRITE_DISABLED       ``write.enabled = false``
-32028  ENTRY_NOT_FOUND      ``forget``/``undo``: no memory entry on that line, no such history id
-32029  SECTION_REFUSED      ``update_section``: not on ``write.sections``, holds a USER block, unsafe body
-32030  AMBIGUOUS_PATH       ``get``: a relative path that several roots hold; ``data.candidates`` lists them
-32031  STORAGE_UNAVAILABLE  the database backend is unreachable (within ``storage.connect_timeout_s``);
                             ``data`` = ``{backend, where}``, ``where`` password-free
-32032  DISK_FULL            a write found no room (ENOSPC/EDQUOT) in the data dir or a memory root;
                             nothing changed; ``data`` = ``{directory}``
======  ===================  ==================================================
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
APPLICATION_ERROR = -32000
PERMISSION_DENIED = -32001
SERVER_BUSY = -32002
SHUTTING_DOWN = -32003
IDLE_CLOSED = -32004

NOT_INDEXED = -32010
TIMEOUT = -32011
ACCESS_DENIED = -32020
TURN_LIMIT = -32021
MINUTE_LIMIT = -32022
CONTENT_TOO_LARGE = -32023
BAD_TARGET = -32024
WRITE_CONFLICT = -32025
WRITE_TIMEOUT = -32026
WRITE_DISABLED = -32027
ENTRY_NOT_FOUND = -32028
SECTION_REFUSED = -32029
AMBIGUOUS_PATH = -32030
STORAGE_UNAVAILABLE = -32031
DISK_FULL = -32032


class RpcError(Exception):
    """An error answered to the client as ``{"code", "message", "data"?}``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class InvalidParams(RpcError):
    """A parameter is missing or has a bad type/value; the message names it (-32602)."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)
