"""A scripted OpenAI-compatible embedding server on 127.0.0.1, in a thread: healthy, or hostile on demand.

Modes (``server.mode = ...``, switched at any time):

* ``ok``: deterministic unit vectors of ``width`` (the same text, the same vector);
* ``nan`` / ``inf`` / ``huge_value``: as ``ok`` but vector 0 holds a NaN / ``Infinity`` / ``1e39``
  (the last is a valid JSON number past float32's range);
* ``wider``: as ``ok`` with ``width + 8`` components (a server that changed model mid-run);
* ``trickle_head`` / ``trickle_body``: the status line, or the body after the headers, one byte per
  ``interval`` s — a complete answer would take ``interval`` × its length (100 s and more);
* ``silent``: reads the request, never answers (until the server stops);
* ``huge``: a 200 response of ``huge_bytes`` (160 MB), generated chunk by chunk (never held whole);
* ``unauthorized``: HTTP 401 whose message repeats the bearer token it was sent;
* ``down``: HTTP 503.

``requests`` counts requests by ``input_type``-free kind ("query" when the input starts with the
query marker, else "passage"); ``sent`` counts the body bytes a ``huge`` answer got out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

QUERY_MARK = "Q: "  # the query prefix the tests configure (queries and passages are told apart by it)


def vector(text: str, width: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(width)
    return [float(x) for x in v / np.linalg.norm(v)]


class FakeEmbeddingServer:
    def __init__(self, width: int = 16) -> None:
        self.width = width
        self.mode = "ok"
        self.interval = 0.2
        self.huge_bytes = 160 * 1024 * 1024
        self.requests: Counter[str] = Counter()
        self.sent = 0
        self.stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"srv": self}))
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-embed-server", daemon=True)

    def __enter__(self) -> FakeEmbeddingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()  # hostile handlers end at once
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def answer(self, texts: list[str]) -> dict[str, Any]:
        width = self.width + 8 if self.mode == "wider" else self.width
        data = [{"object": "embedding", "index": i, "embedding": vector(t, width)} for i, t in enumerate(texts)]
        return {"object": "list", "data": data}


class _Handler(BaseHTTPRequestHandler):
    srv: FakeEmbeddingServer  # set on the subclass each server makes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        texts = list(body["input"])
        self.srv.requests["query" if texts and texts[0].startswith(QUERY_MARK) else "passage"] += 1
        mode = self.srv.mode
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up: what a mode waits for
            getattr(self, f"_{mode}")(texts)

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _ok(self, texts: list[str]) -> None:
        self._send(200, json.dumps(self.srv.answer(texts)).encode())

    _wider = _ok

    def _poisoned(self, texts: list[str], token: str) -> None:
        text = json.dumps(self.srv.answer(texts))
        first = text.index('"embedding": [') + len('"embedding": [')
        self._send(200, (text[:first] + token + ", " + text[first:].split(", ", 1)[1]).encode())

    def _nan(self, texts: list[str]) -> None:
        self._poisoned(texts, "NaN")

    def _inf(self, texts: list[str]) -> None:
        self._poisoned(texts, "Infinity")

    def _huge_value(self, texts: list[str]) -> None:
        self._poisoned(texts, "1e39")

    def _trickle(self, data: bytes) -> None:
        for i in range(len(data)):
            if self.srv.stopping.wait(self.srv.interval):
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def _trickle_head(self, texts: list[str]) -> None:
        payload = json.dumps(self.srv.answer(texts)).encode()
        self._trickle(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)

    def _trickle_body(self, texts: list[str]) -> None:
        payload = json.dumps(self.srv.answer(texts)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.flush()
        self._trickle(payload)

    def _silent(self, texts: list[str]) -> None:
        self.srv.stopping.wait(300)

    def _huge(self, texts: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()  # no length: the body ends when the connection does (HTTP/1.0)
        row = ("0.0123456789, " * 4096).encode()
        self.wfile.write(b'{"data": [{"index": 0, "embedding": [')
        while self.srv.sent < self.srv.huge_bytes and not self.srv.stopping.is_set():
            self.wfile.write(row)
            self.srv.sent += len(row)
        self.wfile.write(b"0.1]}]}")
        self.close_connection = True

    def _unauthorized(self, texts: list[str]) -> None:
        token = self.headers.get("authorization", "").removeprefix("Bearer ")
        self._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {token}. "
                                              "You can find your API key at https://example.invalid"}}).encode())

    def _down(self, texts: list[str]) -> None:
        self._send(503, json.dumps({"error": {"message": "model loading"}}).encode())

