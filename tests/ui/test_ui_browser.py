"""``memoryd ui`` in a real browser: headless Chromium (Debian's ``chromium`` package, which .ci/run
installs) driven by Playwright through ``executable_path`` — ``playwright install`` is never run.

Each test gets a real in-process daemon (hash embedder) and the real uvicorn server on a free
loopback port, in a thread; the browser is one per module, each test in a fresh context (no
cookies). Covered: the token URL and its cookie, search as you type, forget and undo by clicking,
a ``<script>`` in a note and markup in a file name shown and never run, and the security cases —
no token, a rebinding host name (Chromium's ``--host-resolver-rules`` maps it to 127.0.0.1), a POST
without the CSRF token, and a form on another site posting here. Skips, saying why, where Chromium
or Playwright is missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra has it)")

from memoryd.daemon.api.vocabulary import DEFAULT_K  # noqa: E402
from memoryd.daemon.ui.server import build  # noqa: E402
from tests.helpers import start_daemon, wait_for  # noqa: E402
from tests.ui.conftest import CHROMIUM, REBIND, TIMEOUT_MS  # noqa: E402
from tests.write_fixtures import HASH_WRITE  # noqa: E402

NOTE = "- Deploy notes <script>window.__pwned = 1</script> live in the wiki."
HOSTILE_NAME = "<img src=x onerror=window.__pwned=3>.md"
FILES = {
    "MEMORY.md": f"# Memory\n\n- The office is in Lisbon, near the river.\n{NOTE}\n"
                 '- A picture <img src=x onerror="window.__pwned = 2"> of the team.\n',
    HOSTILE_NAME: "# Odd\n\n- Zebras are striped.\n",
}

if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)", allow_module_level=True)




@dataclasses.dataclass
class Site:
    url: str  # with the token
    base: str
    token: str
    csrf: str
    root: Path
    page: Any
    rpc: Any


@pytest.fixture
def site(tmp_path: Path, short_dir: Path, browser: Any) -> Iterator[Site]:
    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    d, rpc, root = start_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak)
    server, sock, url = build(short_dir / "m.sock", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="ui-test-server")
    thread.start()
    context = None
    try:
        wait_for(lambda: server.started, timeout=20, what="the ui server")
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        ui = server.config.app.state.ui
        yield Site(url, url.split("/?")[0], ui.keys.token, ui.keys.csrf, root, context.new_page(), rpc)
    finally:
        if context is not None:
            context.close()
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        server.config.app.state.ui.close()
        rpc.close()
        d.shutdown()


def _memory(site: Site) -> str:
    return (site.root / "MEMORY.md").read_text(encoding="utf-8")


def test_the_token_url_sets_the_cookie_and_leaves_the_address_bar(site: Site) -> None:
    response = site.page.goto(site.url)
    assert response.status == 200
    sync_api.expect(site.page.locator("h1")).to_have_text("Dashboard")
    wait_for(lambda: "token=" not in site.page.url, timeout=10, what="the token to leave the address bar")
    (cookie,) = site.page.context.cookies()
    port = int(site.base.rsplit(":", 1)[1])
    assert cookie["name"] == f"memoryd_ui_{port}" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/" and cookie["value"] != site.token
    assert site.page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
    assert site.page.goto(site.base + "/history").status == 200  # the cookie alone now suffices


def test_the_launcher_page_forwards_the_browser_and_is_removed(site: Site, tmp_path: Path) -> None:
    """#38 item 6: the browser is given a 0600 file:// page, never the token on its command line."""
    from memoryd.daemon.ui.launch import Launcher

    launcher = Launcher({"XDG_RUNTIME_DIR": str(tmp_path)})
    site.page.goto(launcher.write(site.url))
    sync_api.expect(site.page.locator("h1")).to_have_text("Dashboard")
    assert site.page.url.startswith(site.base)
    (cookie,) = site.page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    launcher.remove()


def test_search_as_you_type_shows_the_matched_line_highlighted(site: Site) -> None:
    site.page.goto(site.url)
    site.page.goto(site.base + "/search")
    site.page.locator("#q").press_sequentially("Lisbon", delay=40)
    match = site.page.locator(".hit .line.match").filter(has_text="The office is in Lisbon")
    sync_api.expect(match).to_have_count(1)
    sync_api.expect(match.locator("mark")).to_have_text("Lisbon")
    # the calibrated score, two decimals: every content word of the query matched (keyword-only model: 0.99)
    sync_api.expect(site.page.locator(".hit .score").first).to_have_text(re.compile(r"^(0\.9\d|1\.00)$"))
    assert site.page.url.endswith(f"/search?q=Lisbon&mode=hybrid&k={DEFAULT_K}")
    site.page.locator(".hit a.where").first.click()
    site.page.wait_for_url("**/file?**#L3")
    sync_api.expect(site.page.locator("tr#L3")).to_have_class("marked")
    sync_api.expect(site.page.locator("tr#L3")).to_contain_text("The office is in Lisbon")


def test_search_explain_opens_per_hit(site: Site) -> None:
    site.page.goto(site.url)
    site.page.goto(site.base + "/search?q=Lisbon&explain=1")
    site.page.locator(".hit details.explain summary").first.click()
    sync_api.expect(site.page.locator(".hit details.explain").first).to_contain_text("vector_rank")


def test_forget_then_undo_by_clicking(site: Site) -> None:
    site.page.goto(site.url)
    site.page.goto(site.base + "/entries")
    row = site.page.locator("tr.entry").filter(has_text="The office is in Lisbon")
    row.get_by_role("button", name="forget").click()
    sync_api.expect(site.page.locator(".flash.ok")).to_contain_text("removed MEMORY.md:3")
    assert "Lisbon" not in _memory(site)
    sync_api.expect(site.page.locator("tr.entry").filter(has_text="The office is in Lisbon")).to_have_count(0)

    site.page.locator("nav a", has_text="History").click()
    record = site.page.locator("li.record").filter(has_text="The office is in Lisbon")
    record.get_by_role("button", name="undo").click()
    sync_api.expect(site.page.locator(".flash.ok")).to_contain_text("restored MEMORY.md:3")
    assert "- The office is in Lisbon, near the river." in _memory(site)
    sync_api.expect(site.page.locator("li.record.undone").filter(has_text="Lisbon")).to_have_count(1)


@pytest.mark.parametrize("path", ["/entries", "/search?q=Deploy+wiki+picture", "/file?path=MEMORY.md",
                                  "/search?q=Zebras"])
def test_markup_in_a_note_or_a_file_name_is_shown_never_run(site: Site, path: str) -> None:
    dialogs: list[str] = []
    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    site.page.on("dialog", on_dialog)
    site.page.goto(site.url)
    site.page.goto(site.base + path)
    site.page.wait_for_load_state("load")
    assert site.page.evaluate("window.__pwned") is None
    assert site.page.locator("main script, main img").count() == 0
    text = site.page.locator("main").inner_text()
    assert "<script>window.__pwned = 1</script>" in text or HOSTILE_NAME in text
    assert not dialogs


def test_no_token_is_401_and_a_rebinding_host_is_403(site: Site) -> None:
    assert site.page.goto(site.base + "/").status == 401
    assert site.page.goto(site.base + "/search?q=Lisbon").status == 401
    port = site.base.rsplit(":", 1)[1]
    rebound = site.page.goto(f"http://{REBIND}:{port}/?token={site.token}")
    assert rebound.status == 403 and "Host refused" in site.page.content()
    assert site.page.goto(f"http://localhost:{port}/?token={site.token}").status == 200


def test_a_post_without_the_csrf_token_is_403(site: Site) -> None:
    site.page.goto(site.url)
    before = _memory(site)
    status = site.page.evaluate("""async () => {
        const body = new URLSearchParams({path: "MEMORY.md", line: "3"});
        const r = await fetch("/forget", {method: "POST", body, credentials: "same-origin"});
        return r.status;
    }""")
    assert status == 403
    assert _memory(site) == before


def test_a_form_on_another_site_cannot_post_here(site: Site) -> None:
    site.page.goto(site.url)  # the victim's browser holds the cookie
    before = _memory(site)
    attacker = (f'<form method="post" action="{site.base}/forget">'
                f'<input name="csrf" value="{site.csrf}"><input name="path" value="MEMORY.md">'
                '<input name="line" value="3"><button id="go">win a prize</button></form>')
    site.page.route("http://attacker.test/**", lambda route: route.fulfill(body=attacker, content_type="text/html"))
    site.page.goto("http://attacker.test/")
    with site.page.expect_response(f"{site.base}/forget") as answer:
        site.page.click("#go")
    assert answer.value.status == 403
    assert _memory(site) == before
