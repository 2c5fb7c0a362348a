"""A scripted OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, in a thread.

It records every request (``requests``: the JSON bodies, ``auth``: the Authorization headers) and
answers what it is told: ``server.replies`` is a queue of canned answers (a dict is sent as the
message content, JSON-encoded; a str as is), ``server.default`` what to send when the queue is
empty. ``server.mode`` (switched at any time) picks a failure instead:

* ``ok``: the next canned reply as ``choices[0].message.content``, with ``usage``;
* ``not_json`` / ``not_object`` / ``no_choices`` / ``cut``: a 200 whose content is prose, a JSON
  list, whose envelope has no ``choices``, whose ``finish_reason`` is ``length``;
* ``429`` (with ``Retry-After: 0``), ``500``, ``503``: that status;
* ``unauthorized``: 401 whose message repeats the bearer token it was sent;
* ``trickle``: the body one byte per ``interval`` s; ``silent``: never answers; ``huge``: 50 MB;
* ``fail_then_ok``: ``fail_times`` answers of 503, then ``ok``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeChatServer:
    def __init__(self, models: tuple[str, ...] = ("fake-model",)) -> None:
        self.mode = "ok"
        self.models = models
        self.replies: list[dict[str, Any] | str] = []
        self.default: dict[str, Any] | str | Callable[[dict[str, Any]], dict[str, Any] | str] = {}
        self.interval = 0.5
        self.fail_times = 0
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"srv": self}))
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-chat-server", daemon=True)

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def next_content(self, body: dict[str, Any]) -> str:
        with self.lock:
            reply = self.replies.pop(0) if self.replies else self.default
        if callable(reply):
            reply = reply(body)
        return reply if isinstance(reply, str) else json.dumps(reply)


class _Handler(BaseHTTPRequestHandler):
    srv: FakeChatServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.srv.models]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        with self.srv.lock:
            self.srv.requests.append(body)
            self.srv.auth.append(self.headers.get("authorization", ""))
            mode = self.srv.mode
            if mode == "fail_then_ok":
                if self.srv.fail_times > 0:
                    self.srv.fail_times -= 1
                    mode = "503"
                else:
                    mode = "ok"
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            getattr(self, f"_m_{mode}")(body)

    def _send(self, status: int, payload: dict[str, Any] | list[Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _envelope(self, content: str, finish: str = "stop") -> dict[str, Any]:
        return {"id": "x", "object": "chat.completion", "model": "fake-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    def _m_ok(self, body: dict[str, Any]) -> None:
        self._send(200, self._envelope(self.srv.next_content(body)))

    def _m_not_json(self, body: dict[str, Any]) -> None:
        self._send(200, self._envelope("Sure! Here are the memories you asked for: the user likes tea."))

    def _m_not_object(self, body: dict[str, Any]) -> None:
        self._send(200, self._envelope("[1, 2, 3]"))

    def _m_no_choices(self, body: dict[str, Any]) -> None:
        self._send(200, {"object": "chat.completion", "choices": []})

    def _m_cut(self, body: dict[str, Any]) -> None:
        self._send(200, self._envelope('{"memories": [', finish="length"))

    def _m_429(self, body: dict[str, Any]) -> None:
        self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})

    def _m_500(self, body: dict[str, Any]) -> None:
        self._send(500, {"error": {"message": "internal error"}})

    def _m_503(self, body: dict[str, Any]) -> None:
        self._send(503, {"error": {"message": "model loading"}})

    def _m_unauthorized(self, body: dict[str, Any]) -> None:
        token = self.headers.get("authorization", "").removeprefix("Bearer ")
        self._send(401, {"error": {"message": f"Incorrect API key provided: {token}."}})

    def _m_trickle(self, body: dict[str, Any]) -> None:
        data = json.dumps(self._envelope(self.srv.next_content(body))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for i in range(len(data)):
            if self.srv.stopping.wait(self.srv.interval):
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def _m_silent(self, body: dict[str, Any]) -> None:
        self.srv.stopping.wait(300)

    def _m_huge(self, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        chunk = b" " * 65536
        sent = 0
        while sent < 50 * 2**20 and not self.srv.stopping.is_set():
            self.wfile.write(chunk)
            sent += len(chunk)
        self.close_connection = True
