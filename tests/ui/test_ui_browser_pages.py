"""#42 item 2 in headless Chromium (the pattern of tests/ui/test_ui_browser.py): a 20,000-line file paged by
clicking, an edit-section form without markers whose refusal stays on the form and whose save keeps
them, weaker matches folded away, whole-word marks while typing, and no 404 (the favicon) on any page."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra has it)")

from memoryd.daemon.ui.server import build  # noqa: E402
from memoryd.daemon.ui.state import Settings  # noqa: E402
from tests.helpers import start_daemon, wait_for  # noqa: E402
from tests.ui.conftest import CHROMIUM, TIMEOUT_MS  # noqa: E402
from tests.write_fixtures import HASH_WRITE  # noqa: E402

LONG = 20_000
MARKED = "- Ship the ui command. <!-- memoryd: importance=4 reinforced=2 -->"
FILES = {
    "notes/long.md": "# Long\n\n" + "".join(f"- line {n} about the cache layer\n" for n in range(3, LONG + 1)),
    "memory-bank/activeContext.md": f"# Active Context\n\n## Current Focus\n\n{MARKED}\n- Keep it small.\n\n"
                                    "## Notes\n\n- They said there is the cache.\n",
}
SECTION = "/section?path=memory-bank/activeContext.md&section=Current+Focus"

if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)", allow_module_level=True)




@dataclasses.dataclass
class Site:
    base: str
    root: Path
    page: Any
    missing: list[str]  # URLs the browser got a 404 for
    data_dir: Path


def _site(tmp_path: Path, sock: Path, browser: Any, settings: Settings | None = None,
          files: dict[str, str] = FILES, **config: Any) -> Iterator[Site]:
    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    d, rpc, root = start_daemon(tmp_path, sock, files, timeout=60, tweak=tweak, **config)
    server, lsock, url = build(sock, 0, settings=settings)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [lsock]}, name="ui-test-server")
    thread.start()
    context = None
    try:
        wait_for(lambda: server.started, timeout=20, what="the ui server")
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        missing: list[str] = []
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        page.goto(url)
        yield Site(url.split("/?")[0], root, page, missing, d.cfg.data_dir)
    finally:
        if context is not None:
            context.close()
        server.should_exit = True
        thread.join(timeout=20)
        lsock.close()
        server.config.app.state.ui.close()
        rpc.close()
        d.shutdown()


@pytest.fixture
def site(tmp_path: Path, short_dir: Path, browser: Any) -> Iterator[Site]:
    yield from _site(tmp_path, short_dir / "m.sock", browser)


def test_a_20k_line_file_pages_by_clicking(site: Site) -> None:
    site.page.goto(site.base + "/file?path=notes/long.md")
    sync_api.expect(site.page.locator("table.file tr")).to_have_count(500)
    site.page.locator("nav.pager a[rel=next]").first.click()
    sync_api.expect(site.page.locator("tr#L501")).to_be_visible()
    sync_api.expect(site.page.locator("tr#L500")).to_have_count(0)
    site.page.locator("nav.pager a[rel=last]").first.click()
    sync_api.expect(site.page.locator(f"tr#L{LONG}")).to_contain_text(f"line {LONG} about")
    assert site.missing == []


def test_the_section_form_hides_markers_keeps_refusals_there_and_saves_them(site: Site) -> None:
    site.page.goto(site.base + SECTION)
    box = site.page.locator("textarea[name=content]")
    assert "memoryd:" not in box.input_value() and "- Ship the ui command." in box.input_value()
    box.fill("# A top heading\n- my careful words")
    site.page.get_by_role("button", name="Replace the section's body").click()
    sync_api.expect(site.page.locator(".flash.error")).to_contain_text("heading")
    sync_api.expect(site.page.locator("h1")).to_contain_text("Edit section")  # not the dashboard
    assert "my careful words" in box.input_value()
    box.fill("- Ship the ui command.\n- Keep it small.\n- Write the docs.")
    site.page.get_by_role("button", name="Replace the section's body").click()
    sync_api.expect(site.page.locator(".flash.ok")).to_contain_text("updated")
    text = (site.root / "memory-bank/activeContext.md").read_text()
    assert MARKED in text and "- Write the docs." in text
    sync_api.expect(site.page.locator("table.file")).not_to_contain_text("memoryd:")


def test_edit_is_offered_only_on_writable_sections(site: Site) -> None:
    site.page.goto(site.base + "/entries?namespace=default")
    sync_api.expect(site.page.locator("a.edit-section")).to_have_count(1)
    sync_api.expect(site.page.locator("tr.group", has=site.page.locator("a.edit-section"))) \
        .to_contain_text("Current Focus")


def test_typing_marks_whole_words_only(site: Site) -> None:
    site.page.goto(site.base + "/search")
    site.page.locator("#q").press_sequentially("the cache", delay=30)
    site.page.locator(".hit mark").first.wait_for()
    marks = {m.lower() for m in site.page.locator(".hit mark").all_inner_texts()}
    assert marks == {"cache"}, marks


def test_weaker_matches_are_folded(tmp_path: Path, short_dir: Path, browser: Any) -> None:
    for s in _site(tmp_path, short_dir / "m.sock", browser, Settings(min_score=1.0)):
        s.page.goto(s.base + "/search?q=cache+layer")
        weaker = s.page.locator("details.weaker")
        sync_api.expect(weaker).to_have_count(1)
        sync_api.expect(weaker.locator(".hit").first).to_be_hidden()  # folded until opened
        weaker.locator("summary").click()
        sync_api.expect(weaker.locator(".hit").first).to_be_visible()


def test_without_a_model_the_file_page_says_abstracts_need_llm(site: Site) -> None:
    site.page.goto(site.base + "/file?path=memory-bank/activeContext.md")
    sync_api.expect(site.page.locator("#abstract")).to_contain_text("No abstract yet (needs [llm]")


def test_abstracts_are_filled_in_after_the_page_is_shown(tmp_path: Path, short_dir: Path, browser: Any) -> None:
    from memoryd.indexer.llm.config import LLMConfig
    from memoryd.indexer.redaction import privacy
    from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
    from tests.fake_chat_server import FakeChatServer

    files = {**FILES, "peers/alice/a.md": "# A\n\n- Alice's first note.\n",
             "peers/alice/b.md": "# B\n\n- Alice's second note.\n"}
    abstract = "Alice's first note, <b>in short</b>."
    with FakeChatServer() as chat:
        llm = LLMConfig(provider="openai", url=chat.url, model="fake-model", retries=0)
        for s in _site(tmp_path, short_dir / "m.sock", browser, files=files, llm=llm):
            store = AbstractStore(s.data_dir / STORE_NAME)  # what the idle job would have made
            store.put("fake-model", privacy.redact(files["peers/alice/a.md"], "secrets"), abstract)
            store.close()
            s.page.goto(s.base + "/file?path=peers/alice/a.md")
            sync_api.expect(s.page.locator("#abstract")).to_have_text(f"Abstract {abstract}")  # as text, escaped
            s.page.goto(s.base + "/file?path=peers/alice/b.md")
            sync_api.expect(s.page.locator("#abstract")).to_contain_text("No abstract yet: the [llm] model")
            s.page.goto(s.base + "/access?namespace=peer:alice")
            items = s.page.locator("ul.files li")
            sync_api.expect(items.first.locator(".abstract")).to_have_text(abstract)
            sync_api.expect(items.nth(1).locator(".abstract")).to_have_count(0)
            sync_api.expect(s.page.locator(".abstracts-note")).to_have_text(
                "1 of 2 files have no abstract yet: the [llm] model writes them at idle time (anew after each edit).")
            s.page.goto(s.base + "/entries?namespace=peer:alice")
            sync_api.expect(s.page.locator("tr.group .abstract").first).to_have_text(abstract)
            assert s.missing == []


def test_no_page_asks_for_something_missing(site: Site) -> None:
    for path in ("/", "/search", "/entries", "/history", "/audit", "/access", SECTION):
        site.page.goto(site.base + path)
        site.page.wait_for_load_state("load")
    site.page.goto(site.base + "/favicon.ico")
    assert site.missing == []
