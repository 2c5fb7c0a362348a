"""``memoryd ui`` over plain HTTP (Starlette's TestClient, no browser): the security rules, the pages
and the actions, against a real in-process daemon (hash embedder). Runs wherever the ``ui`` extra is
installed (the dev extra includes it); tests/ui/test_ui_browser.py repeats the main flows in Chromium.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

from starlette.routing import Route
from starlette.testclient import TestClient

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED
from memoryd.daemon.ui.app import create_app
from memoryd.daemon.ui.security import CSP, Keys
from tests.helpers import start_daemon
from tests.write_fixtures import HASH_WRITE

PORT = 8377
BASE = f"http://127.0.0.1:{PORT}"
HOSTILE_NAME = "<img src=x onerror=alert(1)>.md"
FILES = {
    "MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n"
                 "- Deploy notes <script>alert('pwned')</script> are in the wiki.\n",
    "peers/alice/MEMORY.md": "# Alice\n\n## Preferences\n\n- Alice prefers green tea over coffee.\n",
    "groups/dev/MEMORY.md": "# Dev\n\n- The dev group ships on Thursdays.\n",
    HOSTILE_NAME: "# Odd name\n\n- A file whose name is markup, about zebras.\n",
    "memory-bank/activeContext.md": "# Active Context\n\n## Current Focus\n\n- Ship the ui command.\n\n"
                                    "## Notes\n\n- x\n",
}
PAGES = ["/", "/search?q=Lisbon", "/search/hits?q=Lisbon", "/file?path=MEMORY.md", "/entries", "/history",
         "/audit", "/access", "/section?path=memory-bank/activeContext.md&section=Current+Focus"]


@dataclasses.dataclass
class Ui:
    client: TestClient
    keys: Keys
    root: Path
    daemon: Any
    app: Any

    def get(self, url: str, **kw: Any) -> Any:
        sep = "&" if "?" in url else "?"
        return self.client.get(f"{url}{sep}token={self.keys.token}", **kw)

    def post(self, url: str, data: dict[str, str], **kw: Any) -> Any:
        return self.client.post(url, data=data, **kw)


@pytest.fixture
def ui(tmp_path: Path, short_dir: Path) -> Iterator[Ui]:
    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    d, rpc, root = start_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak)
    keys = Keys.fresh()
    app = create_app(short_dir / "m.sock", PORT, keys)
    try:
        with TestClient(app, base_url=BASE) as client:
            yield Ui(client, keys, root, d, app)
    finally:
        app.state.ui.close()
        rpc.close()
        d.shutdown()


def _flash(html: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'class="flash [a-z]+"[^>]*>([^<]*)<', html)]


# -- who may ask -------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/static/ui.js"])
def test_neither_token_nor_cookie_is_401(ui: Ui, url: str) -> None:
    r = ui.client.get(url)
    assert r.status_code == 401
    assert "memoryd ui" in r.text and "Lisbon" not in r.text


def test_a_wrong_token_or_cookie_is_403(ui: Ui) -> None:
    assert ui.client.get("/?token=not-the-token").status_code == 403
    ui.client.cookies.set(f"memoryd_ui_{PORT}", "not-the-token")
    assert ui.client.get("/").status_code == 403


def test_the_token_sets_an_httponly_strict_cookie_that_then_suffices(ui: Ui) -> None:
    r = ui.get("/")
    assert r.status_code == 200
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"memoryd_ui_{PORT}={ui.keys.cookie_value(PORT)};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    again = ui.client.get("/search?q=Lisbon")  # the client's cookie jar now holds it
    assert again.status_code == 200 and "Lisbon" in again.text
    assert "set-cookie" not in again.headers  # set only where the token came in the URL


def test_only_this_ports_own_cookie_is_accepted(ui: Ui) -> None:
    """#38 item 6: cookies are not port-scoped; another port's server got the cookie. Its name and value are
    now bound to the port: the old name, the raw token, another port's cookie are not credentials here."""
    ui.client.cookies.set("memoryd_ui", ui.keys.cookie_value(PORT))  # the old, port-less name
    assert ui.client.get("/").status_code == 401
    ui.client.cookies.clear()
    ui.client.cookies.set(f"memoryd_ui_{PORT}", ui.keys.token)  # the token itself is not the cookie
    assert ui.client.get("/").status_code == 403
    ui.client.cookies.clear()
    ui.client.cookies.set(f"memoryd_ui_{PORT}", ui.keys.cookie_value(PORT + 1))  # minted for another port
    assert ui.client.get("/").status_code == 403
    ui.client.cookies.clear()
    ui.client.cookies.set(f"memoryd_ui_{PORT}", ui.keys.cookie_value(PORT))
    assert ui.client.get("/").status_code == 200


def test_each_start_has_its_own_token() -> None:
    a, b = Keys.fresh(), Keys.fresh()
    assert a.token != b.token and a.csrf != b.csrf and len(a.token) >= 40


@pytest.mark.parametrize("host", ["evil.example", f"evil.example:{PORT}", f"127.0.0.1:{PORT + 1}",
                                  "127.0.0.1", f"0.0.0.0:{PORT}", f"[::1]:{PORT}", ""])
def test_a_host_off_the_allow_list_is_403_even_with_the_token(ui: Ui, host: str) -> None:
    r = ui.get("/", headers={"host": host})
    assert r.status_code == 403
    assert "Host" in r.text


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"LOCALHOST:{PORT}"])
def test_the_loopback_names_are_allowed(ui: Ui, host: str) -> None:
    assert ui.get("/", headers={"host": host}).status_code == 200


# -- POST: CSRF token and Origin ---------------------------------------------------------------------


def _forget_form(ui: Ui, **extra: str) -> dict[str, str]:
    return {"path": "MEMORY.md", "line": "3", "text": "The office is in Lisbon, near the river.", **extra}


def _memory(ui: Ui) -> str:
    return (ui.root / "MEMORY.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("csrf", [None, "", "0" * 64])
def test_a_post_without_the_right_csrf_token_is_403_and_changes_nothing(ui: Ui, csrf: str | None) -> None:
    ui.get("/")
    before = _memory(ui)
    form = _forget_form(ui) if csrf is None else _forget_form(ui, csrf=csrf)
    r = ui.post("/forget", form)
    assert r.status_code == 403 and "CSRF" in r.text
    assert _memory(ui) == before


@pytest.mark.parametrize("headers", [{"origin": "http://evil.example"}, {"origin": "null"},
                                     {"origin": f"http://127.0.0.1:{PORT + 1}"},
                                     {"origin": f"https://127.0.0.1:{PORT}"}, {"sec-fetch-site": "cross-site"},
                                     {"sec-fetch-site": "same-site"}])
def test_a_post_from_another_origin_is_403_even_with_the_csrf_token(ui: Ui, headers: dict[str, str]) -> None:
    ui.get("/")
    before = _memory(ui)
    r = ui.post("/forget", _forget_form(ui, csrf=ui.keys.csrf), headers=headers)
    assert r.status_code == 403 and "another site" in r.text
    assert _memory(ui) == before


def test_every_post_route_checks_the_csrf_token(ui: Ui) -> None:
    posts = [r for r in ui.app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert {r.path for r in posts} == {"/forget", "/promote", "/section", "/undo"}
    assert all(getattr(r.endpoint, "csrf_checked", False) for r in posts)
    ui.get("/")  # the cookie: what is left to refuse is the missing CSRF token
    for r in posts:
        assert ui.client.post(r.path, data={"id": "h-0"}).status_code == 403


def test_a_get_changes_nothing(ui: Ui) -> None:
    before = _memory(ui)
    for url in ["/forget?path=MEMORY.md&line=3", "/undo?id=h-0"]:
        assert ui.get(url).status_code == 405
    assert _memory(ui) == before


# -- what every answer carries -----------------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/static/ui.css"])
def test_every_answer_has_a_strict_csp_and_no_inline_script(ui: Ui, url: str) -> None:
    r = ui.get(url)
    assert r.status_code == 200
    assert r.headers["content-security-policy"] == CSP
    assert "unsafe-inline" not in CSP and "script-src 'self'" in CSP and "default-src 'none'" in CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"
    assert r.headers["x-frame-options"] == "DENY"
    if r.headers["content-type"].startswith("text/html"):
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", r.text, re.S | re.I)
        assert all('src="/static/' in attrs and not body.strip() for attrs, body in scripts)
        assert not _inline_attributes(r.text)  # no event handlers, no inline style


def _inline_attributes(html: str) -> list[str]:
    """The ``on*=`` and ``style=`` attributes of the page's real tags (not text that looks like one)."""
    found: list[str] = []

    class Attrs(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(f"<{tag} {k}>" for k, _ in attrs if k.startswith("on") or k == "style")

    Attrs().feed(html)
    return found


def test_refusals_carry_the_security_headers_too(ui: Ui) -> None:
    r = ui.client.get("/")
    assert r.status_code == 401 and r.headers["content-security-policy"] == CSP


# -- escaping ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/search?q=Deploy+wiki", "/entries", "/file?path=MEMORY.md", "/search?q=zebras",
                                 "/entries?namespace=default", "/history?path=%3Cscript%3Ex"])
def test_markup_in_a_note_or_a_file_name_is_shown_escaped(ui: Ui, url: str) -> None:
    html = ui.get(url).text
    assert "<script>alert(" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html or "&lt;img src=x onerror=alert(1)&gt;.md" in html


def test_control_and_bidi_characters_in_content_are_shown_escaped(ui: Ui) -> None:
    (ui.root / "MEMORY.md").write_text("# Memory\n\n- Reversed \u202etxt.exe\x1b[2J here.\n", encoding="utf-8")
    html = ui.get("/file?path=MEMORY.md").text
    assert "\u202e" not in html and "\x1b" not in html
    assert "\\u202e" in html and "\\x1b" in html


# -- pages -------------------------------------------------------------------------------------------


def test_search_renders_hits_server_side_with_the_matched_line(ui: Ui) -> None:
    html = ui.get("/search?q=Lisbon").text
    assert "The office is in <mark>Lisbon</mark>, near the river." in html
    line = re.search(r'<span class="line match"><span class="ln">(\d+)</span>[^\n]*Lisbon', html)
    assert line is not None and line.group(1) == "3"
    assert 'href="/file?path=MEMORY.md&amp;hl=3#L3"' in html
    assert re.search(r'<span class="score">\d\.\d\d</span>', html)


def test_search_hits_fragment_is_only_the_hits(ui: Ui) -> None:
    html = ui.get("/search/hits?q=Thursdays").text
    assert "ships on <mark>Thursdays</mark>" in html and "<html" not in html


def test_search_explain_shows_ranks_and_scores(ui: Ui) -> None:
    html = ui.get("/search?q=Lisbon&explain=1").text
    assert "query analysis" in html and "vector_rank" in html and "calibration.coverage" in html


def test_file_view_has_an_anchor_per_line_and_marks_the_asked_lines(ui: Ui) -> None:
    html = ui.get("/file?path=MEMORY.md&hl=3").text
    assert all(f'id="L{n}"' in html for n in (1, 2, 3, 4))
    assert '<tr id="L3" class="marked">' in html and '<tr id="L4">' in html


def test_dashboard_shows_roots_freshness_namespaces_and_skipped_files(tmp_path: Path, short_dir: Path) -> None:
    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, watch=dataclasses.replace(cfg.watch, max_file_bytes=200))

    d, rpc, root = start_daemon(tmp_path, short_dir / "m.sock", {**FILES, "big.md": "- x\n" * 100}, tweak=tweak)
    keys = Keys.fresh()
    app = create_app(short_dir / "m.sock", PORT, keys)
    try:
        with TestClient(app, base_url=BASE) as client:
            html = client.get(f"/?token={keys.token}").text
    finally:
        app.state.ui.close()
        rpc.close()
        d.shutdown()
    assert str(root) in html and "every change seen is searchable" in html
    assert re.search(r">peer:alice</a></td><td class=\"num\">1</td><td class=\"num\">1</td>", html)
    skipped = html.split('id="skipped"')[1].split("</table>")[0]
    assert "big.md" in skipped and "too-large" in skipped
    assert "<progress" in html


def test_entries_list_namespaces_with_forget_and_promote_forms(ui: Ui) -> None:
    html = ui.get("/entries?namespace=peer:alice").text
    assert "Alice prefers green tea over coffee." in html and "The office is in Lisbon" not in html
    assert 'action="/forget"' in html and 'action="/promote"' in html
    assert "edit section" not in html  # "Preferences" is not in write.sections: no form offered that would be refused
    assert 'name="csrf" value="' + ui.keys.csrf + '"' in html


def test_edit_section_is_offered_only_on_writable_sections(ui: Ui) -> None:
    html = ui.get("/entries?namespace=default").text
    focus = html.split("§ Current Focus")[1].split("</tr>")[0]
    notes = html.split("§ Notes")[1].split("</tr>")[0]
    assert "edit section" in focus and "edit section" not in notes
    form = ui.get("/section?path=memory-bank/activeContext.md&section=Notes").text
    assert "not writable" in form and "<textarea" not in form


def test_the_promote_form_carries_the_entry_text_and_a_moved_line_is_refused(ui: Ui) -> None:
    """#38 item 18: the page's promote form names the entry by its text too, so a line a peer moved is refused."""
    html = ui.get("/entries?namespace=peer:alice").text
    form = html.split('action="/promote"')[1].split("</form>")[0]
    assert 'name="text" value="Alice prefers green tea over coffee."' in form
    md = ui.root / "peers/alice/MEMORY.md"
    md.write_text(md.read_text().replace("## Preferences\n\n", "## Preferences\n\n- Alice wrote this later.\n"))
    r = ui.post("/promote", {"path": "peers/alice/MEMORY.md", "line": "5", "to": "default",
                             "text": "Alice prefers green tea over coffee.", "csrf": ui.keys.csrf})
    assert any("the entry on line 5 changed" in f for f in _flash(r.text)), _flash(r.text)
    copied = [p for p in ui.root.rglob("*.md") if p != md and "wrote this later" in p.read_text()]
    assert copied == []  # the entry now on line 5 was not copied


def test_access_shows_what_each_peer_and_group_can_read(ui: Ui) -> None:
    html = ui.get("/access").text  # every namespace's counts; no namespace's files until asked for
    assert "peers/alice/MEMORY.md" not in html and "/access?namespace=peer%3Aalice" in html
    alice = ui.get("/access?namespace=peer:alice").text.split('id="ns-peer:alice"')[1].split("</section>")[0]
    dev = ui.get("/access?namespace=group:dev").text.split('id="ns-group:dev"')[1].split("</section>")[0]
    assert "peers/alice/MEMORY.md" in alice and "MEMORY.md</a>" in alice and "groups/dev" not in alice
    assert "groups/dev/MEMORY.md" in dev and "peers/alice" not in dev


# -- actions -----------------------------------------------------------------------------------------


def test_forget_then_history_then_undo_with_a_form_field_id(ui: Ui) -> None:
    ui.get("/")
    r = ui.post("/forget", _forget_form(ui, csrf=ui.keys.csrf))
    assert r.status_code == 200 and any("removed MEMORY.md:3" in f for f in _flash(r.text))
    assert "Lisbon" not in _memory(ui)
    history = ui.get("/history").text
    ids = re.findall(r'name="id" value="(h-[0-9a-f]+)"', history)
    assert ids and "The office is in Lisbon, near the river." in history
    r = ui.post("/undo", {"id": ids[0], "csrf": ui.keys.csrf})
    assert r.status_code == 200 and any("restored MEMORY.md:3" in f for f in _flash(r.text))
    assert "- The office is in Lisbon, near the river." in _memory(ui)
    assert "undone by" in ui.get("/history").text


def test_undo_with_the_token_in_the_query_and_no_cookie(ui: Ui) -> None:
    """A client that keeps no cookies: the token in the URL, the CSRF token in a header."""
    rpc_forget = ui.app.state.ui.daemon.call("forget", {"path": "MEMORY.md", "line": 3})
    ui.client.cookies.clear()
    r = ui.client.post(f"/undo?token={ui.keys.token}", data={"id": rpc_forget["history_id"]},
                       headers={"x-csrf-token": ui.keys.csrf}, follow_redirects=False)
    assert r.status_code == 303 and f"token={ui.keys.token}" in r.headers["location"]
    assert "- The office is in Lisbon" in _memory(ui)


def test_a_refused_undo_is_shown_and_changes_nothing(ui: Ui) -> None:
    ui.get("/")
    r = ui.post("/undo", {"id": "h-0000000000000000", "csrf": ui.keys.csrf})
    assert r.status_code == 200 and _flash(r.text) and "error" in r.text


def test_promote_and_section_edit(ui: Ui) -> None:
    ui.get("/")
    r = ui.post("/promote", {"path": "peers/alice/MEMORY.md", "line": "5", "to": "default", "csrf": ui.keys.csrf})
    assert r.status_code == 200, r.text
    assert any(f.startswith(("appended", "reinforced", "replaced")) for f in _flash(r.text)), _flash(r.text)
    form = ui.get("/section?path=memory-bank/activeContext.md&section=Current+Focus").text
    assert "- Ship the ui command.</textarea>" in form
    r = ui.post("/section", {"path": "memory-bank/activeContext.md", "section": "Current Focus",
                             "content": "- Write the ui docs.", "csrf": ui.keys.csrf})
    assert any(f.startswith("updated") for f in _flash(r.text)), _flash(r.text)
    text = (ui.root / "memory-bank/activeContext.md").read_text(encoding="utf-8")
    assert "- Write the ui docs." in text and "Ship the ui command" not in text and "## Notes" in text


def test_a_second_promote_says_which_entry_it_reinforced_and_how_to_undo_it(ui: Ui) -> None:
    ui.get("/")
    fields = {"path": "peers/alice/MEMORY.md", "line": "5", "to": "default", "csrf": ui.keys.csrf}
    ui.post("/promote", fields)
    flash = _flash(ui.post("/promote", fields).text)
    done = [f for f in flash if f.startswith("reinforced ")]
    assert done and ' (was: "' in done[0] and re.search(r"undo it from the history \(h-[0-9a-f]{16}\)", done[0]), flash


def test_history_texts_are_shown_as_the_daemon_redacts_them(ui: Ui) -> None:
    (ui.root / "MEMORY.md").write_text("# Memory\n\n- The staging key is AKIAIOSFODNN7EXAMPLE, rotate it.\n",
                                       encoding="utf-8")
    ui.app.state.ui.daemon.call("forget", {"path": "MEMORY.md", "line": 3})
    html = ui.get("/history").text
    assert "AKIAIOSFODNN7EXAMPLE" not in html and "[REDACTED:aws_access_key]" in html


# -- the daemon's answers, kept ----------------------------------------------------------------------


def test_owner_only_refusals_stay_refusals(ui: Ui, monkeypatch: pytest.MonkeyPatch) -> None:
    """A uid the daemon does not take as the owner gets its refusal on the page (403), not a way around it."""
    def denied(method: str, params: Any = None) -> Any:
        raise RpcClientError(ACCESS_DENIED, f"{method} is for the owner only; uid 1001 may not call it")

    monkeypatch.setattr(ui.app.state.ui.daemon, "call", denied)
    for url in ("/history", "/audit"):
        r = ui.get(url)
        assert r.status_code == 403 and "for the owner only" in r.text
    r = ui.post("/undo", {"id": "h-1", "csrf": ui.keys.csrf})
    assert any("for the owner only" in f for f in _flash(r.text))


def test_writes_go_out_as_the_caller_with_no_session_param(ui: Ui, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(method: str, params: Any = None) -> Any:
        calls.append((method, params or {}))
        return {"decision": "removed", "path": "MEMORY.md", "line": 3, "history_id": "h-1"}

    monkeypatch.setattr(ui.app.state.ui.daemon, "call", record)
    ui.get("/")
    ui.post("/forget", _forget_form(ui, csrf=ui.keys.csrf, session="owner"), follow_redirects=False)
    ui.post("/undo", {"id": "h-1", "csrf": ui.keys.csrf, "session": '{"kind": "owner"}'}, follow_redirects=False)
    writes = [(m, p) for m, p in calls if m not in ("status", "stats")]
    assert [m for m, _ in writes] == ["forget", "undo"]
    assert all("session" not in p for _, p in writes)


def test_a_daemon_that_is_not_running_is_a_503_page(short_dir: Path) -> None:
    keys = Keys.fresh()
    app = create_app(short_dir / "none.sock", PORT, keys)
    with TestClient(app, base_url=BASE) as client:
        r = client.get(f"/?token={keys.token}")
    assert r.status_code == 503 and "memoryd is not running" in r.text and "memoryd run" in r.text
