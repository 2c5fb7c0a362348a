"""A scripted ``/rerank`` server for the reranker's tests: each request is answered by a function of its
JSON body, which returns (status, body bytes) or takes the socket over (a trickle, a server that never
answers). Every request's body and headers are kept, so a test sees what was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, bytes] | Callable[[BaseHTTPRequestHandler], None]
Script = Callable[[dict[str, Any]], Answer]


def documents_of(body: dict[str, Any]) -> list[str]:
    return list(body.get("documents") or body.get("texts") or [])


def relevance(body: dict[str, Any], word: str = "answer") -> Answer:
    """A well-behaved Jina/llama.cpp-style server: a document holding ``word`` scores 0.9, others 0.1
    (listed best first, as servers do)."""
    docs = documents_of(body)
    rows = [{"index": i, "relevance_score": 0.9 if word in d else 0.1} for i, d in enumerate(docs)]
    rows.sort(key=lambda r: -r["relevance_score"])
    return 200, json.dumps({"model": body.get("model"), "results": rows}).encode()


class FakeReranker:
    """A ThreadingHTTPServer on 127.0.0.1 running ``script``; ``release`` frees handlers that wait."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                answer = fake.script(body)
                if callable(answer):
                    answer(self)
                    return
                status, data = answer
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/rerank"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def __enter__(self) -> FakeReranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def never_answers(fake: FakeReranker) -> Answer:
    """Headers sent, then silence until the test ends (the client's deadline must cut it)."""

    def hold(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", "1000")
        h.end_headers()
        h.wfile.write(b'{"results": [')
        h.wfile.flush()
        fake.release.wait(30)

    return hold


def trickle(fake: FakeReranker) -> Answer:
    """A byte at a time, each after a pause only the test's end releases: a deadline per read never trips."""

    def drip(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.end_headers()
        for ch in b'{"results": [{"index": 0, "relevance_score": 0.5}':
            h.wfile.write(bytes([ch]))
            h.wfile.flush()
            if fake.release.wait(0.05):
                return

    return drip
