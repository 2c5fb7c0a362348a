"""JSON-RPC 2.0 over lines: parse one request line, dispatch it, encode the answer.

No sockets and no threads here, so that every protocol rule can be tested
in-process; ``memoryd.daemon.rpc.server`` only moves bytes. The framing (README, "Socket
protocol"): one UTF-8 JSON object per line in both directions.

Rules this module fixes:

- ``id`` must be a string, an integer (not a bool) or null; a request without
  ``id`` is a notification: its handler runs, nothing is answered.
- ``params`` must be an object or absent (absent = ``{}``); named parameters
  only, an array gets -32602.
- Batch arrays are not supported: one -32600 error with a null id.
- Errors detected before the id is known (-32700, -32600) carry a null id.
- A handler raises ``RpcError`` (application codes -32000..-32099, all in
  :mod:`memoryd.daemon.rpc.errors`), ``InvalidParams`` (-32602), or any
  ``MemorydError`` (its own ``rpc_code`` and ``rpc_data()``: -32000 with its message unless the
  error says otherwise, e.g. a storage outage -32031 with ``{backend, where}``);
  anything else is logged with its traceback and answered with a generic -32603.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import structlog

from memoryd.daemon.rpc.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    InvalidParams,
    RpcError,
)
from memoryd.indexer.errors import MemorydError

log = structlog.get_logger(__name__)

RequestId = str | int | None
T = TypeVar("T")
D = TypeVar("D")


@dataclass(frozen=True)
class Peer:
    """Credentials of the process at the other end of a connection (``SO_PEERCRED``)."""

    pid: int
    uid: int
    gid: int


#: A method implementation: params (always a dict) and the caller → a JSON-serialisable result.
#: Handlers run concurrently on connection threads and must be thread-safe.
Handler = Callable[[dict[str, Any], Peer], Any]


@dataclass(frozen=True)
class Request:
    """A well-formed request envelope; ``params`` is still unchecked (see ``dispatch``)."""

    method: str
    params: object
    id: RequestId
    is_notification: bool


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_request(line: bytes) -> Request:
    """Decode one line (without its newline) into a ``Request``.

    Raises ``RpcError`` with -32700 (invalid UTF-8, invalid JSON, NaN/Infinity,
    nesting too deep) or -32600 (not an object, batch, bad ``jsonrpc``,
    ``method`` or ``id``).
    """
    try:
        obj = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}") from None
    except (ValueError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    if isinstance(obj, list):
        raise RpcError(INVALID_REQUEST, "invalid request: batch requests are not supported")
    if not isinstance(obj, dict):
        raise RpcError(INVALID_REQUEST, f"invalid request: expected an object, got {type(obj).__name__}")
    if obj.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    method = obj.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, 'invalid request: "method" must be a non-empty string')
    rid = obj.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int)):
        raise RpcError(INVALID_REQUEST, 'invalid request: "id" must be a string, an integer or null')
    return Request(method, obj.get("params"), rid, "id" not in obj)


def _dumps(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates (e.g. echoed from a "\ud800" escape)
        return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("ascii") + b"\n"


def encode_error(rid: RequestId, code: int, message: str, data: Any = None) -> bytes:
    """One error response line, newline included."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    try:
        return _dumps({"jsonrpc": "2.0", "id": rid, "error": error})
    except (TypeError, ValueError):  # unserialisable data: drop it, keep the message
        del error["data"]
        return _dumps({"jsonrpc": "2.0", "id": rid, "error": error})


def encode_result(rid: RequestId, result: Any) -> bytes:
    """One result line, newline included. Raises TypeError/ValueError if not JSON-serialisable."""
    return _dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def _call(request: Request, handler: Handler, peer: Peer) -> bytes:
    params = request.params
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be an object (named parameters), got {type(params).__name__}")
    return encode_result(request.id, handler(params, peer))


def dispatch(request: Request, handlers: Mapping[str, Handler], peer: Peer) -> bytes | None:
    """Run the request's handler and return the response line (None for a notification)."""
    handler = handlers.get(request.method)
    try:
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {request.method}")
        line = _call(request, handler, peer)
    except RpcError as exc:
        log.debug("request.failed", method=request.method, code=exc.code, message=exc.message)
        line = encode_error(request.id, exc.code, exc.message, exc.data)
    except MemorydError as exc:  # the error carries its code and data (a storage outage: -32031 {backend, where})
        log.info("request.failed", method=request.method, code=exc.rpc_code, message=str(exc))
        line = encode_error(request.id, exc.rpc_code, str(exc), exc.rpc_data())
    except Exception:
        log.exception("request.error", method=request.method, peer_pid=peer.pid)
        message = f"internal error in {request.method}; see the daemon log"
        line = encode_error(request.id, INTERNAL_ERROR, message)
    return None if request.is_notification else line


_MISSING: Any = object()


@overload
def param(params: Mapping[str, Any], name: str, kind: type[T]) -> T: ...
@overload
def param(params: Mapping[str, Any], name: str, kind: type[T], default: D) -> T | D: ...
def param(params: Mapping[str, Any], name: str, kind: type[Any], default: Any = _MISSING) -> Any:
    """``params[name]`` checked against ``kind`` (a float accepts an int; an int never a bool).

    Raises ``InvalidParams`` naming the parameter when it is missing (and no
    default is given) or has the wrong type.
    """
    if name not in params:
        if default is _MISSING:
            raise InvalidParams(f"missing required param {name!r}")
        return default
    value = params[name]
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise InvalidParams(f"param {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def reject_unknown(params: Mapping[str, Any], allowed: frozenset[str] | set[str]) -> None:
    """Raise ``InvalidParams`` naming the first param not in ``allowed`` (typos fail loudly)."""
    for name in params:
        if name not in allowed:
            raise InvalidParams(f"unknown param {name!r} (expected one of {sorted(allowed)})")
