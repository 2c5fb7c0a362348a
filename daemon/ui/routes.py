"""The pages and actions of ``memoryd ui``; each is one or two socket calls and a template.

GET pages change nothing. Every action is a POST made with :func:`post` — the only way a route
here takes one — which checks the CSRF token before anything else, runs the socket call, and
redirects (303) back with a one-shot message; a refusal by the daemon is that message, in red.
Daemon errors on a page become an error page: 503 when the daemon is not running, 403 for a
refusal of access (the socket's owner-only rule, unchanged), 400 for other refusals.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from memoryd.daemon.api.vocabulary import DEFAULT_K, MAX_CLIENT_K, SEARCH_MODES
from memoryd.daemon.client.cli_write import TYPES
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED, AMBIGUOUS_PATH
from memoryd.daemon.ui import edits, views
from memoryd.daemon.ui.bridge import Daemon
from memoryd.daemon.ui.security import CSRF_FIELD, CSRF_HEADER, TOKEN_PARAM
from memoryd.daemon.ui.state import Ui
from memoryd.indexer.errors import DaemonError, NotRunningError

MAX_K = MAX_CLIENT_K
HISTORY_LIMIT, AUDIT_TAIL, LIST_LIMIT, ACCESS_FILES = 100, 200, 100, 500

Page = Callable[[Request, Ui], Response]
Action = Callable[[dict[str, str], Ui], tuple[str, str, str]]


def _ui(request: Request) -> Ui:
    ui: Ui = request.app.state.ui
    return ui


def _answer(fn: Page, request: Request) -> Response:
    ui = _ui(request)
    try:
        return fn(request, ui)
    except NotRunningError as exc:
        return ui.error(request, 503, str(exc))
    except RpcClientError as exc:
        return ui.error(request, 403 if exc.code == ACCESS_DENIED else 400, f"{exc.message} ({exc.code})")
    except DaemonError as exc:
        return ui.error(request, 502, str(exc))


def page(fn: Page) -> Callable[[Request], Response]:
    """A GET page, run on Starlette's thread pool: the daemon's errors become an error page with a fitting
    status (503 not running, 403 access refused, 400 other refusals, 502 a broken connection)."""

    @functools.wraps(fn)
    def endpoint(request: Request) -> Response:
        return _answer(fn, request)

    return endpoint


def inline_page(fn: Page) -> Callable[[Request], Awaitable[Response]]:
    """A GET page answered on the event loop itself, for search as you type: on a loaded 2-core machine
    the thread pool's two extra wake-ups cost more than the page itself (docs/ui.md, "Speed"). Its
    socket calls are bounded by ``Ui.quick``'s shorter timeout, which bounds the stall of other requests."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        return _answer(fn, request)

    return endpoint


def post(fn: Action) -> Callable[[Request], Awaitable[Response]]:
    """An action: CSRF token first (403 without it), then the socket call, then 303 back with its message.

    ``fn`` gets the form's text fields and returns ``(kind, message, default page)``; a form field
    ``back`` (a local path) overrides where to go.
    """

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        ui = _ui(request)
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if not ui.keys.csrf_ok(fields.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)):
            return PlainTextResponse("403: missing or wrong CSRF token\n", status_code=403)
        acted = _local(fields.get("back")) or _referer(request)  # the page the person acted on
        try:
            kind, message, target = await run_in_threadpool(fn, fields, ui)
        except NotRunningError as exc:
            return ui.error(request, 503, str(exc))
        except RpcClientError as exc:
            return _refused(request, ui, acted, f"{exc.message} ({exc.code})", fields)
        except (Refused, DaemonError, ValueError) as exc:
            return _refused(request, ui, acted, str(exc), fields)
        return _back(request, ui, (acted if kind == "error" else None) or target, ui.flashes.put(kind, message))

    endpoint.csrf_checked = True  # type: ignore[attr-defined]  # tests/ui/test_ui_http.py: every POST route has it
    return endpoint


class Refused(Exception):
    """The daemon answered an action with "rejected": shown, in red, on the page where the person acted."""


def _refused(request: Request, ui: Ui, acted: str | None, message: str, fields: dict[str, str]) -> Response:
    """Back to the page the person acted on (never the dashboard), the refusal and their text with it."""
    flash = ui.flashes.put("error", message, fields.get("content"))
    return _back(request, ui, acted or "/", flash)


def _referer(request: Request) -> str | None:
    """The same-origin page a form was sent from (``Referrer-Policy: same-origin`` sends it), as a local path."""
    ref = request.headers.get("referer") or ""
    origin = f"http://{request.headers.get('host', '')}"
    if not ref.startswith(origin + "/"):
        return None
    local = ref[len(origin):]
    return _local(_without(local, "flash"))


def _without(url: str, name: str) -> str:
    """``url`` without its query parameter ``name`` (an old flash must not show twice)."""
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != name]
    return parts.path + (f"?{urlencode(kept)}" if kept else "")


def _local(url: str | None) -> str | None:
    """``url`` if it is a path on this server (``/…``, not ``//host`` nor ``/\\host``), else None."""
    if not url or not url.startswith("/") or url.startswith(("//", "/\\")) or any(c in url for c in "\r\n"):
        return None
    return url


def _back(request: Request, ui: Ui, target: str, flash: str) -> Response:
    target = _without(target.partition("#")[0], "flash") + ("#" + target.partition("#")[2] if "#" in target else "")
    extra = {"flash": flash}
    if request.scope.get("memoryd.query_token"):  # a client without cookies: the next page needs the token too
        extra[TOKEN_PARAM] = ui.keys.token
    sep = "&" if "?" in target.split("#")[0] else "?"
    path, _, anchor = target.partition("#")
    return RedirectResponse(path + sep + urlencode(extra) + (f"#{anchor}" if anchor else ""), status_code=303)


def both(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """``first()`` and ``second()`` at once (two socket calls on two connections): on PostgreSQL ``status`` waits
    on the database, and the dashboard then costs the slower answer rather than the sum. ``second`` runs on a
    thread of its own, joined before this returns; its exception is raised here."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, second()))
        except BaseException as exc:  # re-raised below, in the page's thread
            out.append((False, exc))

    helper = threading.Thread(target=run, name="ui-second-call")
    helper.start()
    try:
        a = first()
    finally:
        helper.join()
    ok, b = out[0]
    if not ok:
        raise b
    return a, b


def _int(text: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(text or default)))
    except ValueError:
        return default


# -- pages ---------------------------------------------------------------------


@page
def dashboard(request: Request, ui: Ui) -> Response:
    status, stats = both(lambda: ui.daemon.call("status"), ui.stats)
    return ui.page(request, "dashboard.html", nav="dashboard", d=views.dashboard(status, stats))


def _search(request: Request, ui: Ui, daemon: Daemon | None = None) -> dict[str, Any]:
    q = request.query_params.get("q", "").strip()
    mode = request.query_params.get("mode", "hybrid")
    mode = mode if mode in SEARCH_MODES else "hybrid"
    k = _int(request.query_params.get("k"), DEFAULT_K, 1, MAX_K)
    explain = request.query_params.get("explain") == "1"
    ctx: dict[str, Any] = {"q": q, "mode": mode, "k": k, "explain": explain, "modes": SEARCH_MODES, "result": None}
    if q:
        params: dict[str, Any] = {"query": q, "k": k, "mode": mode}
        if explain:
            params["explain"] = True
        result = (daemon or ui.daemon).call("search", params)
        found = views.hits(result, q)
        floor = ui.settings.min_score  # under it the daemon's context and MCP tools abstain: "weaker matches"
        ctx.update(result=result, hits=found, analysis=views.analysis_rows(result) if explain else [],
                   strong=[h for h in found if h.score >= floor], weak=[h for h in found if h.score < floor],
                   min_score=floor)
    return ctx


@page
def search(request: Request, ui: Ui) -> Response:
    return ui.page(request, "search.html", nav="search", **_search(request, ui))


@inline_page
def search_hits(request: Request, ui: Ui) -> Response:
    """The hits alone, for search as you type (``static/ui.js`` puts them in the page)."""
    return ui.page(request, "_hits.html", **_search(request, ui, ui.quick))


@page
def file_view(request: Request, ui: Ui) -> Response:
    path = request.query_params.get("path", "")
    if not path:
        return ui.error(request, 400, "which file? (/file?path=PATH)")
    marked = views.parse_lines(request.query_params.get("hl"))
    start = views.page_start(_int(request.query_params.get("from"), 0, 0, 10**9) or None, marked)
    try:
        result = ui.daemon.call("get", {"path": path, "start_line": start, "end_line": start + views.FILE_PAGE - 1})
    except RpcClientError as exc:
        if exc.code != AMBIGUOUS_PATH or not isinstance(exc.data, dict):
            raise
        names = [str(c) for c in exc.data.get("candidates", [])]
        return ui.page(request, "ambiguous.html", status=409, nav="", name=path,
                       candidates=[(c, views.file_href(c)) for c in names])
    return ui.page(request, "file.html", nav="", result=result, lines=views.file_lines(result, marked), name=path,
                   pager=views.file_pager(path, result, request.query_params.get("hl")))


@page
def entries(request: Request, ui: Ui) -> Response:
    q = request.query_params
    namespace, kind = q.get("namespace") or "", q.get("type") or ""
    wanted = {"namespace": namespace, "type": kind if kind in TYPES else "", "cursor": q.get("cursor") or ""}
    result = ui.daemon.call("list", {"limit": LIST_LIMIT, **{k: v for k, v in wanted.items() if v}})
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return ui.page(request, "entries.html", nav="entries", entries=result.get("entries", []),
                   next_cursor=result.get("next_cursor"), chosen_ns=namespace, chosen_type=kind, types=TYPES,
                   namespaces=ui.namespaces(), here=here, file_href=views.file_href,
                   writable=ui.settings.writable, paged=bool(wanted["cursor"]))


@page
def section_form(request: Request, ui: Ui) -> Response:
    path, title = request.query_params.get("path", ""), request.query_params.get("section", "")
    if not path or not title:
        return ui.error(request, 400, "which section? (/section?path=PATH&section=TITLE)")
    result = ui.daemon.call("get", {"path": path})
    found = views.section_body(result.get("text", ""), title)
    flash = ui.flashes.peek(request.query_params.get("flash"))
    draft = flash[2] if flash else None  # a refused edit: what the person typed, to fix and send again
    body = found[1] if found else ""
    return ui.page(request, "section.html", nav="entries", name=path, title=title, found=found is not None,
                   body=draft if draft is not None else edits.editable_body(body),
                   writable=ui.settings.writable(title), sections=ui.settings.sections,
                   user_block=edits.has_user_block(body), here=request.url.path + "?" + request.url.query,
                   href=views.file_href(path, found[0] if found else None, anchor=found[0] if found else None))


@page
def history(request: Request, ui: Ui) -> Response:
    params: dict[str, Any] = {"limit": _int(request.query_params.get("limit"), HISTORY_LIMIT, 1, 1000)}
    if request.query_params.get("path"):
        params["path"] = request.query_params["path"]
    result = ui.daemon.call("history", params)
    return ui.page(request, "history.html", nav="history", entries=result.get("entries", []),
                   filter=params.get("path", ""), who=views.who, file_href=views.file_href)


@page
def audit(request: Request, ui: Ui) -> Response:
    result = ui.daemon.call("audit", {"tail": _int(request.query_params.get("tail"), AUDIT_TAIL, 1, 10_000)})
    rows = list(reversed(result.get("entries", [])))  # newest first
    chosen = request.query_params.get("who", "")
    shown = [e for e in rows if not chosen or views.who(e.get("session")) == chosen]
    return ui.page(request, "audit.html", nav="audit", entries=shown, summary=views.audit_summary(rows),
                   chosen=chosen, who=views.who, file_href=views.file_href)


def session_of(namespace: str) -> dict[str, str] | None:
    """The confined session that reads ``namespace`` (an agent's too: ``memoryd mcp --session agent``)."""
    kind, _, ident = namespace.partition(":")
    if kind == "peer":
        return {"kind": "direct", "peer": ident}
    if kind == "group":
        return {"kind": "group", "group": ident}
    if kind == "agent":
        return {"kind": "agent", "agent": ident}
    return None


@page
def access(request: Request, ui: Ui) -> Response:
    """Each namespace with its counts; for the peer or group chosen (``?namespace=``), the files its confined
    session may read (the socket's ``files``, asked as that session) — one namespace's files per view, not
    every namespace's on every view. An agent run as the owner (``memoryd mcp`` without ``--session``) reads
    everything; one run as its agent session (``--session agent --agent ID``) only ``agents/ID/``."""
    stats = ui.stats()
    chosen = request.query_params.get("namespace", "")
    offset = _int(request.query_params.get("offset"), 0, 0, 10**9)
    rows = []
    for name, counts in sorted(stats.get("namespaces", {}).items()):
        session = session_of(name)
        files = ui.daemon.call("files", {"limit": ACCESS_FILES, "offset": offset, "session": session}) \
            if session and name == chosen else None
        nxt = (files or {}).get("next_offset")
        rows.append({"namespace": name, "session": session, "counts": counts, "open": files is not None,
                     "href": "/access?" + urlencode({"namespace": name}) + f"#ns-{name}",
                     "files": (files or {}).get("files"), "offset": offset,
                     "next": "/access?" + urlencode({"namespace": name, "offset": nxt}) + f"#ns-{name}"
                     if nxt else None})
    return ui.page(request, "access.html", nav="access", rows=rows, file_href=views.file_href, access_page=ACCESS_FILES)


FAVICON = (Path(__file__).resolve().parent / "static" / "favicon.svg").read_bytes()


async def favicon(request: Request) -> Response:
    """``/favicon.ico``, which browsers ask for whatever the page links: the same small SVG, not a 404."""
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


# -- actions ---------------------------------------------------------------------


def _line(fields: dict[str, str]) -> int:
    line = fields.get("line", "")
    if not line.isdigit():
        raise ValueError(f"line must be a number, got {line[:20]!r}")
    return int(line)


def _required(fields: dict[str, str], *names: str) -> list[str]:
    missing = [n for n in names if not fields.get(n)]
    if missing:
        raise ValueError(f"missing form field(s): {', '.join(missing)}")
    return [fields[n] for n in names]


@post
def forget(fields: dict[str, str], ui: Ui) -> tuple[str, str, str]:
    (path,) = _required(fields, "path")
    params: dict[str, Any] = {"path": path, "line": _line(fields)}
    if fields.get("text"):
        params["text"] = fields["text"]
    r = ui.daemon.call("forget", params)
    return "ok", f"removed {r.get('path')}:{r.get('line')} — undo it from the history ({r.get('history_id')})", \
        "/entries"


@post
def promote(fields: dict[str, str], ui: Ui) -> tuple[str, str, str]:
    (path,) = _required(fields, "path")
    params: dict[str, Any] = {"path": path, "line": _line(fields), "to": fields.get("to") or "default"}
    if fields.get("text"):
        params["text"] = fields["text"]  # the entry as the page showed it: refused if the line moved since
    r = ui.daemon.call("promote", params)
    if r.get("decision") == "rejected":
        return "error", f"not promoted ({r.get('rule')}): {r.get('reason')}", "/entries"
    if r.get("decision") in ("replaced", "reinforced"):  # say what it was, and how to take it back
        was = f' (was: "{r["previous"]}")' if r.get("previous") is not None else ""
        undo = f" — undo it from the history ({r['history_id']})" if r.get("history_id") else ""
        return "ok", f"{r.get('decision')} {r.get('path')}:{r.get('line')}{was}{undo}", "/entries"
    return "ok", f"{r.get('decision')}: {r.get('path')}:{r.get('line')} ({r.get('reason', '')})", "/entries"


@post
def update_section(fields: dict[str, str], ui: Ui) -> tuple[str, str, str]:
    path, title = _required(fields, "path", "section")
    current = views.section_body(ui.daemon.call("get", {"path": path}).get("text", ""), title)
    content = edits.restore_markers(fields.get("content", ""), current[1] if current else "")
    r = ui.daemon.call("update_section", {"path": path, "section": title, "content": content})
    if r.get("decision") == "rejected":
        raise Refused(f"not updated ({r.get('rule')}): {r.get('reason')}")
    undo = f"; undo from the history ({r['history_id']})" if r.get("history_id") else ""
    return "ok", f"{r.get('decision')}: {r.get('path')}, section {title}{undo}", \
        views.file_href(r.get("path") or path, r.get("line"), anchor=r.get("line"))  # the section's page


@post
def undo(fields: dict[str, str], ui: Ui) -> tuple[str, str, str]:
    (ident,) = _required(fields, "id")
    r = ui.daemon.call("undo", {"id": ident})
    return "ok", f"restored {r.get('path')}:{r.get('line')} (recorded as {r.get('history_id')})", "/history"


ROUTES = [
    Route("/", dashboard),
    Route("/search", search),
    Route("/search/hits", search_hits),
    Route("/file", file_view),
    Route("/entries", entries),
    Route("/section", section_form),
    Route("/history", history),
    Route("/audit", audit),
    Route("/access", access),
    Route("/favicon.ico", favicon),
    Route("/forget", forget, methods=["POST"]),
    Route("/promote", promote, methods=["POST"]),
    Route("/section", update_section, methods=["POST"]),
    Route("/undo", undo, methods=["POST"]),
]
