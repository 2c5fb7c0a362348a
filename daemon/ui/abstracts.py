"""File abstracts in ``memoryd ui``: fetched by the page after it is shown, never on its own path.

A file's abstract (made at idle time by the ``[llm]`` model, daemon/api/file_abstracts.py) costs
the daemon a read of the whole file to look up, so the file page and the access page's file lists
render without it (their ≤ 150 ms budget, bench/ui_pages.py) and ``static/ui.js`` fills it in:

* ``/file/abstract?path=P&part=1``: the file page's abstract line (a fragment; without ``part``, a
  page of its own, for a browser without script);
* ``/access/abstracts?namespace=N&offset=O``: JSON ``{abstracts, files: {path: text | null}, note}``
  for the page of files the access page lists, asked as that namespace's session like the list;
* ``/abstracts?path=P&path=Q…``: the same JSON for the files an entries page groups its entries by
  (at most ``MAX_PATHS``, one ``get`` each).

Without a model the answer says so at once ("needs [llm]"), and the daemon reads no file.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memoryd.daemon.client.render import abstract_note
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.ui import views
from memoryd.daemon.ui.routes import ACCESS_FILES, page, session_of
from memoryd.daemon.ui.state import Ui


@page
def file_abstract(request: Request, ui: Ui) -> Response:
    path = request.query_params.get("path", "")
    if not path:
        return ui.error(request, 400, "which file? (/file/abstract?path=PATH)")
    got = ui.daemon.call("get", {"path": path, "start_line": 1, "end_line": 1, "abstract": True})
    note = abstract_note(got.get("abstracts"), got.get("abstract"))
    if request.query_params.get("part") == "1":
        return ui.page(request, "_abstract.html", abstract=got.get("abstract"), note=note)
    return ui.page(request, "abstract.html", nav="", name=path, href=views.file_href(path),
                   abstract=got.get("abstract"), note=note)


@page
def access_abstracts(request: Request, ui: Ui) -> Response:
    session = session_of(request.query_params.get("namespace", ""))
    if session is None:
        return JSONResponse({"error": "which peer, group or agent? "
                                      "(/access/abstracts?namespace=peer:ID|group:ID|agent:ID)"}, status_code=400)
    raw = request.query_params.get("offset", "0")
    offset = min(int(raw), 10**9) if raw.isdigit() else 0  # as the access page pages (routes._int)
    got = ui.daemon.call("files", {"limit": ACCESS_FILES, "offset": offset, "session": session, "abstracts": True})
    files = {_shown(f["path"]): _abstract(f.get("abstract")) for f in got.get("files", [])}
    return JSONResponse({"abstracts": got.get("abstracts"), "files": files,
                         "note": views.abstracts_note(got.get("abstracts"), files)})


MAX_PATHS = 100  # an entries page's 100 entries lie in at most 100 files


@page
def abstracts_of(request: Request, ui: Ui) -> Response:
    paths = list(dict.fromkeys(request.query_params.getlist("path")))[:MAX_PATHS]
    files: dict[str, str | None] = {}
    state = None
    for path in paths:
        try:
            got = ui.daemon.call("get", {"path": path, "start_line": 1, "end_line": 1, "abstract": True})
        except RpcClientError:  # gone since the page, ambiguous ...: no abstract to show for it
            files[_shown(path)] = None
            continue
        state = got.get("abstracts")
        files[_shown(path)] = _abstract(got.get("abstract"))
        if state == "off":  # no model: no file has one, and the daemon need not read the others
            files.update({_shown(p): None for p in paths if _shown(p) not in files})
            break
    return JSONResponse({"abstracts": state, "files": files, "note": views.abstracts_note(state, files)})


def _shown(text: str) -> str:
    """``text`` as the templates show strings (controls made visible: views.visible)."""
    return str(views.visible(text))


def _abstract(text: str | None) -> str | None:
    return None if text is None else _shown(text)


ROUTES = [
    Route("/abstracts", abstracts_of),
    Route("/file/abstract", file_abstract),
    Route("/access/abstracts", access_abstracts),
]
