"""JSON-RPC framing and dispatch, in-process (no sockets)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from memoryd.daemon.rpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    InvalidParams,
    RpcError,
)
from memoryd.daemon.rpc.jsonrpc import (
    Peer,
    dispatch,
    encode_error,
    encode_result,
    param,
    parse_request,
    reject_unknown,
)
from memoryd.indexer.errors import ConfigError, DiskFullError

PEER = Peer(pid=1234, uid=1000, gid=1000)


def _needs_query(params: dict[str, Any], peer: Peer) -> Any:
    return {"query": param(params, "query", str)}


def _boom(params: dict[str, Any], peer: Peer) -> Any:
    raise ValueError("secret internal detail")


def _app_error(params: dict[str, Any], peer: Peer) -> Any:
    raise RpcError(-32010, "index is rebuilding", {"retry_after_s": 3})


def _memoryd_error(params: dict[str, Any], peer: Peer) -> Any:
    raise ConfigError("search.k: must be > 0, got -1")


def _disk_full(params: dict[str, Any], peer: Peer) -> Any:  # e.g. reindex, whose worker has no error map
    raise DiskFullError("/data: no space left on device while writing the index; nothing was changed", "/data")


CALLS: list[dict[str, Any]] = []
HANDLERS = {
    "echo": lambda params, peer: params,
    "whoami": lambda params, peer: {"pid": peer.pid, "uid": peer.uid},
    "record": lambda params, peer: CALLS.append(params),
    "query": _needs_query,
    "boom": _boom,
    "app_error": _app_error,
    "memoryd_error": _memoryd_error,
    "disk_full": _disk_full,
    "nan": lambda params, peer: float("nan"),
    "unserialisable": lambda params, peer: threading.Lock(),
}


def handle_line(line: bytes, handlers: dict[str, Any], peer: Peer) -> bytes | None:
    """One request line as a connection handles it (memoryd.daemon.rpc.connection): parsed, then dispatched."""
    try:
        request = parse_request(line)
    except RpcError as exc:
        return encode_error(None, exc.code, exc.message)
    return dispatch(request, handlers, peer)


def ask(obj: Any) -> dict[str, Any]:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    reply = handle_line(raw, HANDLERS, PEER)
    assert reply is not None and reply.endswith(b"\n") and reply.count(b"\n") == 1
    decoded: dict[str, Any] = json.loads(reply)
    assert decoded["jsonrpc"] == "2.0"
    return decoded


def req(method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def test_echo_result_keeps_id_and_unicode() -> None:
    resp = ask(req("echo", {"text": "记忆 ✓"}, rid="abc"))
    assert resp == {"jsonrpc": "2.0", "id": "abc", "result": {"text": "记忆 ✓"}}


def test_absent_params_are_an_empty_object_and_peer_is_passed() -> None:
    assert ask(req("echo"))["result"] == {}
    assert ask(req("whoami"))["result"] == {"pid": 1234, "uid": 1000}


@pytest.mark.parametrize(
    "line",
    [b"{not json", b'{"jsonrpc": "2.0", "id": 1, "method": "echo"', b"\xff\xfe{}", b"[" * 100_000, b"NaN"],
)
def test_parse_errors(line: bytes) -> None:
    resp = ask(line)
    assert resp["error"]["code"] == PARSE_ERROR
    assert resp["id"] is None


def test_invalid_utf8_names_the_byte() -> None:
    resp = ask(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":"\xc3\x28"}}')
    assert resp["error"]["code"] == PARSE_ERROR
    assert "UTF-8" in resp["error"]["message"]


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        (42, "expected an object"),
        ("echo", "expected an object"),
        ([req("echo")], "batch"),
        ({"id": 1, "method": "echo"}, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "echo"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, "method"),
        (req("echo", rid=True), "id"),
        (req("echo", rid=1.5), "id"),
        (req("echo", rid=[1]), "id"),
    ],
)
def test_invalid_requests(obj: Any, fragment: str) -> None:
    resp = ask(obj)
    assert resp["error"]["code"] == INVALID_REQUEST
    assert fragment in resp["error"]["message"]
    assert resp["id"] is None


def test_null_id_is_a_request_not_a_notification() -> None:
    assert ask(req("echo", {"a": 1}, rid=None)) == {"jsonrpc": "2.0", "id": None, "result": {"a": 1}}


def test_unknown_method() -> None:
    resp = ask(req("nope", rid=5))
    assert resp["id"] == 5
    assert resp["error"] == {"code": METHOD_NOT_FOUND, "message": "method not found: nope"}


@pytest.mark.parametrize(("params", "fragment"), [([1, 2], "must be an object"), ("x", "must be an object")])
def test_params_must_be_an_object(params: Any, fragment: str) -> None:
    resp = ask(req("echo", params))
    assert resp["error"]["code"] == INVALID_PARAMS
    assert fragment in resp["error"]["message"]


def test_handler_invalid_params_names_the_param() -> None:
    missing = ask(req("query", {}))
    assert missing["error"] == {"code": INVALID_PARAMS, "message": "missing required param 'query'"}
    wrong = ask(req("query", {"query": 3}))
    assert wrong["error"]["message"] == "param 'query' must be str, got int"


def test_application_errors_keep_code_message_and_data() -> None:
    resp = ask(req("app_error"))
    assert resp["error"] == {"code": -32010, "message": "index is rebuilding", "data": {"retry_after_s": 3}}
    resp = ask(req("memoryd_error"))
    assert resp["error"] == {"code": -32000, "message": "search.k: must be > 0, got -1"}


def test_an_error_carries_its_own_code_a_full_disk_names_the_directory() -> None:
    resp = ask(req("disk_full"))
    assert resp["error"]["code"] == -32032 and resp["error"]["data"] == {"directory": "/data"}
    assert "no space left on device" in resp["error"]["message"]


@pytest.mark.parametrize("method", ["boom", "nan", "unserialisable"])
def test_internal_errors_are_generic(method: str) -> None:
    resp = ask(req(method, rid=9))
    assert resp["id"] == 9
    assert resp["error"]["code"] == INTERNAL_ERROR
    assert "secret" not in resp["error"]["message"]
    assert method in resp["error"]["message"]


def test_notifications_run_but_get_no_reply() -> None:
    CALLS.clear()
    line = json.dumps({"jsonrpc": "2.0", "method": "record", "params": {"n": 1}}).encode()
    assert handle_line(line, HANDLERS, PEER) is None
    assert CALLS == [{"n": 1}]
    failing = json.dumps({"jsonrpc": "2.0", "method": "boom"}).encode()
    assert handle_line(failing, HANDLERS, PEER) is None
    unknown = json.dumps({"jsonrpc": "2.0", "method": "nope"}).encode()
    assert handle_line(unknown, HANDLERS, PEER) is None


def test_parse_request_distinguishes_notifications() -> None:
    note = parse_request(b'{"jsonrpc":"2.0","method":"m"}')
    assert note.is_notification and note.id is None and note.params is None
    call = parse_request(b'{"jsonrpc":"2.0","method":"m","id":null,"params":{"a":1}}')
    assert not call.is_notification and call.params == {"a": 1}


def test_encoders_are_single_lines_and_survive_lone_surrogates() -> None:
    line = encode_result(1, {"s": "a\ud800b", "nl": "x\ny"})
    assert line.count(b"\n") == 1
    assert json.loads(line)["result"] == {"s": "a\ud800b", "nl": "x\ny"}
    err = encode_error(2, -32000, "bad", data=object())  # unserialisable data is dropped
    assert json.loads(err)["error"] == {"code": -32000, "message": "bad"}


def test_param_helper_types_and_defaults() -> None:
    params = {"k": 5, "w": 1, "flag": True, "name": "x"}
    assert param(params, "k", int) == 5
    assert param(params, "w", float) == 1  # an int is a valid float
    assert param(params, "missing", int, None) is None
    assert param(params, "missing", int, 8) == 8
    with pytest.raises(InvalidParams, match="'flag' must be int, got bool"):
        param(params, "flag", int)
    assert param(params, "flag", bool) is True
    reject_unknown(params, {"k", "w", "flag", "name"})
    with pytest.raises(InvalidParams, match="unknown param 'name'") as info:
        reject_unknown(params, {"k", "w", "flag"})
    assert info.value.code == INVALID_PARAMS
