"""What keeps ``memoryd ui`` the user's own page: one ASGI layer that every request passes first.

The page can forget, promote, edit and undo as the owner, so a web page elsewhere in the same
browser, another local user's browser or a DNS-rebinding host must reach none of it:

* **Host allow-list** — ``127.0.0.1:PORT`` and ``localhost:PORT`` only, else 403: a rebinding
  name (``evil.example`` resolving to 127.0.0.1) still sends its own name as ``Host``.
* **Token** — a random token per start, printed in the URL (``/?token=…``). A request that
  carries it (``token=`` in the query) gets an ``HttpOnly``, ``SameSite=Strict``, ``Path=/``
  cookie named for the port (``memoryd_ui_PORT``) whose value is derived from the token *and*
  the port: browsers send 127.0.0.1's cookies to every port, so the name keeps two starts apart
  and only this server's own cookie, under its own name, is accepted. A request with neither gets
  401, a wrong one 403. Tokens and cookies are compared in constant time. The browser is never
  given the token on its command line (``/proc/PID/cmdline`` is readable by every local user):
  :mod:`memoryd.daemon.ui.launch` opens a 0600 file that hands it over.
* **Origin** — a request that is not ``GET``/``HEAD`` with a foreign ``Origin`` (``null``
  included) or a ``Sec-Fetch-Site`` other than ``same-origin``/``none`` gets 403; the CSRF
  token itself is checked by :func:`memoryd.daemon.ui.routes.post`, the only way a route takes a POST.
* **Headers on every answer**, refusals included: a Content-Security-Policy without
  ``unsafe-inline`` (scripts and styles come from ``/static`` only; no inline handler can run),
  ``nosniff``, no framing, no referrer to other sites (the URL may hold the token; not
  ``no-referrer``, under which Chromium sends ``Origin: null`` with the page's own form POSTs), ``no-store``, and
  ``Server-Timing: app;dur=MS`` (the server-side time, for ``bench/ui_latency.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import structlog

log = structlog.get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "memoryd_ui"  # the prefix: the cookie is COOKIE_PORT (see cookie_name)
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
TOKEN_PARAM = "token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


@dataclass(frozen=True)
class Keys:
    """The secrets of one ``memoryd ui`` start: the URL token and the CSRF token derived from it."""

    token: str
    csrf: str

    @classmethod
    def fresh(cls) -> Keys:
        token = secrets.token_urlsafe(32)
        return cls(token, hmac.new(token.encode(), b"memoryd-ui csrf", hashlib.sha256).hexdigest())

    def token_ok(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def cookie_value(self, port: int) -> str:
        """The cookie's value for this start on ``port``: useless to a server on any other port."""
        return hmac.new(self.token.encode(), f"memoryd-ui cookie {port}".encode(), hashlib.sha256).hexdigest()

    def cookie_ok(self, candidate: str, port: int) -> bool:
        return hmac.compare_digest(candidate.encode(), self.cookie_value(port).encode())

    def csrf_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf.encode())


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


@dataclass(frozen=True)
class Verdict:
    """A request let through: whether its token came in the query (then the cookie is set)."""

    query_token: bool


def cookie_name(port: int) -> str:
    """``memoryd_ui_PORT``: cookies are not port-scoped, so each start on a port has its own name."""
    return f"{COOKIE}_{port}"


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def judge(keys: Keys, port: int, method: str, headers: dict[str, str], query: str) -> Refusal | Verdict:
    """The whole policy for one request, from its method, headers (lower-case names) and query string."""
    if headers.get("host", "").lower() not in allowed_hosts(port):
        return Refusal(403, "this page answers only as 127.0.0.1 or localhost on its port (Host refused)")
    if method not in SAFE_METHODS:
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in allowed_hosts(port)}:
            return Refusal(403, "a request from another site (Origin refused)")
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return Refusal(403, "a request from another site (Sec-Fetch-Site refused)")
    tokens = parse_qs(query, keep_blank_values=True).get(TOKEN_PARAM)
    if tokens:
        return Verdict(query_token=True) if keys.token_ok(tokens[-1]) else Refusal(403, "wrong token")
    cookie = _cookie(headers.get("cookie", ""), cookie_name(port))
    if cookie is None:
        return Refusal(401, "open the URL that `memoryd ui` printed (it carries the token)")
    return Verdict(query_token=False) if keys.cookie_ok(cookie, port) else Refusal(403, "wrong token")


def _cookie(header: str, wanted: str) -> str | None:
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == wanted:
            return value
    return None


class Guard:
    """ASGI middleware applying :func:`judge`, and the security headers to every answer."""

    def __init__(self, app: ASGIApp, keys: Keys, port: int, on_token: Callable[[], None] | None = None) -> None:
        self.app = app
        self.keys = keys
        self.port = port
        self.on_token = on_token  # called when a request brought the right token (the launcher file goes)
        self.cookie = f"{cookie_name(port)}={keys.cookie_value(port)}; Path=/; HttpOnly; SameSite=Strict".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        verdict = judge(self.keys, self.port, scope["method"], headers, query)
        if isinstance(verdict, Refusal):
            log.info("ui.refused", status=verdict.status, reason=verdict.reason, method=scope["method"],
                     path=scope.get("path", "")[:200])
            await _refuse(send, verdict)
            return
        scope["memoryd.query_token"] = verdict.query_token
        if verdict.query_token and self.on_token is not None:
            self.on_token()
        extra = (*HEADERS, (b"set-cookie", self.cookie)) if verdict.query_token else HEADERS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = f"app;dur={(time.perf_counter() - start) * 1000:.2f}".encode()
                message["headers"] = [*message.get("headers", []), *extra, (b"server-timing", took)]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(send: Send, refusal: Refusal) -> None:
    body = f"{refusal.status}: {refusal.reason}\n".encode()
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": body})
