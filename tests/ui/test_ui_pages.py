"""#42 item 2 over plain HTTP: long files in pages, edit only where writable, markers hidden yet kept,
refusals on the page acted on, weaker matches folded, whole-word marks, favicon, one ETA, one 503
instruction, the audit page's word on reads, entries in pages."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

from starlette.testclient import TestClient

from memoryd.daemon.ui import views
from memoryd.daemon.ui.app import create_app
from memoryd.daemon.ui.security import Keys
from memoryd.daemon.ui.state import Settings, environment
from tests.helpers import start_daemon
from tests.write_fixtures import HASH_WRITE

PORT = 8378
BASE = f"http://127.0.0.1:{PORT}"
LONG = 20_000
MARKED = "- Ship the ui command. <!-- memoryd: importance=4 reinforced=2 -->"
FILES = {
    "notes/long.md": "# Long\n\n" + "".join(f"- line {n} about the cache layer\n" for n in range(3, LONG + 1)),
    "memory-bank/activeContext.md": f"# Active Context\n\n## Current Focus\n\n{MARKED}\n- Keep it small.\n\n"
                                    "## Notes\n\n- They said there is the cache.\n",
    "peers/alice/a.md": "# A\n\n- Alice's first note.\n",
    "peers/alice/b.md": "# B\n\n- Alice's second note.\n",
}


@dataclasses.dataclass
class Page:
    client: TestClient
    keys: Keys
    root: Path

    def get(self, url: str, **kw: Any) -> Any:
        return self.client.get(url + ("&" if "?" in url else "?") + f"token={self.keys.token}", **kw)

    def post(self, url: str, data: dict[str, str], **kw: Any) -> Any:
        return self.client.post(url, data={**data, "csrf": self.keys.csrf}, **kw)


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Path, Path]]:
    tmp, short = tmp_path, short_dir

    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    d, rpc, root = start_daemon(tmp, short / "m.sock", FILES, timeout=60, tweak=tweak)
    try:
        yield short / "m.sock", root
    finally:
        rpc.close()
        d.shutdown()


def _page(sock: Path, root: Path, settings: Settings | None = None) -> Iterator[Page]:
    keys = Keys.fresh()
    app = create_app(sock, PORT, keys, settings=settings)
    try:
        with TestClient(app, base_url=BASE) as client:
            client.get(f"/?token={keys.token}")  # the cookie, as the browser gets it
            yield Page(client, keys, root)
    finally:
        app.state.ui.close()


@pytest.fixture
def page(daemon: tuple[Path, Path]) -> Iterator[Page]:
    yield from _page(*daemon)


def _flash(html: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'class="flash [a-z]+"[^>]*>([^<]*)<', html)]


def test_a_20k_line_file_comes_in_pages(page: Page) -> None:
    first = page.get("/file?path=notes/long.md")
    assert first.status_code == 200
    assert 'id="L1"' in first.text and f'id="L{views.FILE_PAGE}"' in first.text
    assert f'id="L{views.FILE_PAGE + 1}"' not in first.text
    assert len(first.content) < 200_000  # the whole file was 3 MB of HTML
    assert f"from={views.FILE_PAGE + 1}" in first.text and f"{LONG} lines" in first.text
    deep = page.get("/file?" + urlencode({"path": "notes/long.md", "hl": "15000"}))  # a hit's link
    assert 'id="L15000" class="marked"' in deep.text and 'id="L14501"' in deep.text
    assert 'id="L14500"' not in deep.text and 'id="L15001"' not in deep.text
    last = page.get("/file?" + urlencode({"path": "notes/long.md", "from": 19_999}))
    assert f'id="L{LONG}"' in last.text and 'rel="next"' not in last.text


def test_markers_are_never_shown_and_saving_keeps_them(page: Page) -> None:
    path = "memory-bank/activeContext.md"
    assert "memoryd:" not in page.get(f"/file?path={path}").text
    form = page.get("/section?" + urlencode({"path": path, "section": "Current Focus"})).text
    body = unescape(form.split("<textarea")[1].split(">", 1)[1].split("</textarea>")[0])
    assert "memoryd:" not in body and "<!--" not in body and "- Ship the ui command." in body
    r = page.post("/section", {"path": path, "section": "Current Focus", "content": body + "\n- Write the docs."})
    assert r.status_code == 200, r.text
    text = (page.root / path).read_text()
    assert MARKED in text and "- Write the docs." in text  # the untouched entry keeps importance and count


def test_edit_is_offered_only_where_writable(page: Page) -> None:
    html = page.get("/entries?namespace=default").text
    focus, notes = html.split("§ Current Focus")[1].split("</tr>")[0], html.split("§ Notes")[1].split("</tr>")[0]
    assert "edit section" in focus and "edit section" not in notes
    form = page.get("/section?path=memory-bank/activeContext.md&section=Notes").text
    assert "not writable" in form and "<textarea" not in form


def test_a_refused_edit_is_shown_on_its_form_with_what_was_typed(page: Page) -> None:
    here = "/section?" + urlencode({"path": "memory-bank/activeContext.md", "section": "Current Focus"})
    r = page.post("/section", {"path": "memory-bank/activeContext.md", "section": "Current Focus",
                               "content": "# A top heading\n- my careful words", "back": here},
                  follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(here + "&flash=")
    shown = page.client.get(r.headers["location"])
    assert any("heading" in f for f in _flash(shown.text)), _flash(shown.text)
    assert "my careful words" in shown.text  # the draft, to fix and send again
    assert "Ship the ui command" in (page.root / "memory-bank/activeContext.md").read_text()


def test_a_refusal_without_a_back_field_returns_to_the_referring_page(page: Page) -> None:
    r = page.post("/forget", {"path": "notes/long.md", "line": "3", "text": "not what line 3 says"},
                  headers={"Referer": f"{BASE}/entries?namespace=default&flash=old"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/entries?namespace=default&flash="), r.headers["location"]


def test_entries_come_in_pages_with_a_way_back(page: Page) -> None:
    first = page.get("/entries").text
    nxt = unescape(re.search(r'href="(/entries\?[^"]*cursor=[^"]*)" rel="next"', first).group(1))
    second = page.get(nxt).text
    assert 'rel="first"' in second and 'rel="first"' not in first
    assert second.count('class="entry"') == 100


def test_a_sessions_files_come_in_pages(page: Page, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.daemon.ui import routes

    monkeypatch.setattr(routes, "ACCESS_FILES", 1)
    first = page.get("/access?namespace=peer:alice").text
    assert "peers/alice/a.md" in first and "peers/alice/b.md" not in first
    nxt = unescape(re.search(r'href="([^"]*offset=1[^"]*)" rel="next"', first).group(1))
    second = page.get(nxt.split("#")[0]).text
    assert "peers/alice/b.md" in second and "peers/alice/a.md" not in second and 'rel="first"' in second


def test_weaker_matches_fold_under_the_abstention_score(daemon: tuple[Path, Path]) -> None:
    for floor, folded in ((1.0, True), (0.0, False)):
        for p in _page(*daemon, settings=Settings(min_score=floor)):
            html = p.get("/search?q=cache+layer").text
            assert ('<details class="weaker">' in html) is folded
            if folded:
                assert "hits" not in html.split('<details class="weaker">')[0].split("</p>")[-1]


def test_search_marks_whole_content_words(page: Page) -> None:
    html = page.get("/search?" + urlencode({"q": "the cache", "mode": "keyword"})).text
    assert "<mark>cache</mark>" in html
    assert "<mark>the</mark>" not in html.lower() and "<mark>The</mark>y" not in html


def test_the_favicon_is_there(page: Page) -> None:
    r = page.get("/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    assert page.get("/static/favicon.svg").status_code == 200
    assert 'rel="icon"' in page.get("/").text


def test_the_audit_page_says_reads_are_logged(page: Page) -> None:
    html = page.get("/audit").text
    assert "Reads are logged too" in html and "not logged" not in html


def test_the_503_page_says_how_to_start_once(short_dir: Path) -> None:
    keys = Keys.fresh()
    app = create_app(short_dir / "none.sock", PORT, keys)
    with TestClient(app, base_url=BASE) as client:
        r = client.get(f"/?token={keys.token}")
    app.state.ui.close()
    assert r.status_code == 503
    assert r.text.count("memoryd run") == 1, r.text


def test_the_dashboard_says_the_time_left_once() -> None:
    status = {"chunks": 100, "vectors": {"pending": 40, "per_s": 2.0, "eta_s": 20.0}, "pending": 0, "roots": []}
    html = environment().get_template("dashboard.html").render(d=views.dashboard(status, None), csrf="",
                                                                flash=None, path="/", nav="dashboard")
    assert html.count("left") == 1, html
