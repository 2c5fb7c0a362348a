"""File abstracts in the UI (issue #40, item 4) over plain HTTP: the file page and the access page's lists
leave them to a second request (the pages stay as fast as before), which shows the abstract, or says
there is none yet and why ("needs [llm]"); content is escaped, and a peer's list is asked as that peer."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

from starlette.testclient import TestClient

from memoryd.daemon.ui.app import create_app
from memoryd.daemon.ui.security import Keys
from memoryd.indexer.llm.config import LLMConfig
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search.abstracts import STORE_NAME, AbstractStore
from tests.fake_chat_server import FakeChatServer
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

PORT = 8379
BASE = f"http://127.0.0.1:{PORT}"
FILES = {"MEMORY.md": "# Memory\n\n- The user prefers short answers.\n",
         "peers/alice/a.md": "# A\n\n- Alice's first note.\n",
         "peers/alice/b.md": "# B\n\n- Alice's second note.\n",
         "agents/coder/notes.md": "# Coder\n\n- The coder agent's note.\n"}
ABSTRACT = "Alice's notes on <script>alert(1)</script> the first day."


@dataclasses.dataclass
class Ui:
    client: TestClient
    keys: Keys

    def get(self, url: str) -> Any:
        return self.client.get(url + ("&" if "?" in url else "?") + f"token={self.keys.token}")


def _ui(tmp_path: Path, sock: Path, llm: LLMConfig | None) -> Iterator[tuple[Ui, Any]]:
    def tweak(cfg: Any) -> Any:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    extra = {"llm": llm} if llm is not None else {}
    with running_daemon(tmp_path, sock, FILES, timeout=30, tweak=tweak, **extra) as (d, _client, _root):
        keys = Keys.fresh()
        app = create_app(sock, PORT, keys)
        try:
            with TestClient(app, base_url=BASE) as client:
                yield Ui(client, keys), d
        finally:
            app.state.ui.close()


@pytest.fixture
def plain(tmp_path: Path, short_dir: Path) -> Iterator[Ui]:
    for ui, _d in _ui(tmp_path, short_dir / "m.sock", None):
        yield ui


@pytest.fixture
def modelled(tmp_path: Path, short_dir: Path) -> Iterator[Ui]:
    with FakeChatServer() as chat:
        for ui, d in _ui(tmp_path, short_dir / "m.sock", LLMConfig(provider="openai", url=chat.url,
                                                                   model="fake-model", retries=0)):
            store = AbstractStore(d.cfg.data_dir / STORE_NAME)  # as the idle job would have made it
            store.put("fake-model", privacy.redact(FILES["peers/alice/a.md"], d.cfg.write.redact_index), ABSTRACT)
            store.close()
            yield ui


def test_without_a_model_the_pages_say_abstracts_need_llm(plain: Ui) -> None:
    page = plain.get("/file?path=MEMORY.md").text
    assert 'id="abstract" data-src="/file/abstract?path=MEMORY.md&amp;part=1"' in page
    part = plain.get("/file/abstract?path=MEMORY.md&part=1")
    assert part.status_code == 200 and "No abstract yet (needs [llm]" in part.text and "<html" not in part.text
    whole = plain.get("/file/abstract?path=MEMORY.md").text  # a browser without script follows the link
    assert "<html" in whole and "No abstract yet (needs [llm]" in whole and 'href="/file?path=MEMORY.md"' in whole
    listed = plain.get("/access?namespace=peer:alice").text
    assert 'data-abstracts="/access/abstracts?namespace=peer%3Aalice&amp;offset=0"' in listed
    got = plain.get("/access/abstracts?namespace=peer:alice").json()
    assert got["abstracts"] == "off" and got["files"] == {"peers/alice/a.md": None, "peers/alice/b.md": None}
    assert got["note"].startswith("No file abstracts yet (needs [llm]")
    assert plain.get("/access/abstracts?namespace=default").status_code == 400  # only a confined session's list
    got = plain.get("/abstracts?path=MEMORY.md&path=peers/alice/a.md").json()  # one get tells it: off
    assert got["abstracts"] == "off" and got["files"] == {"MEMORY.md": None, "peers/alice/a.md": None}


def test_with_a_model_the_abstract_is_shown_escaped_and_only_on_asking(modelled: Ui) -> None:
    page = modelled.get("/file?path=peers/alice/a.md").text
    assert "Alice's notes on" not in unescape(page)  # not on the page's own path: fetched after it
    part = modelled.get("/file/abstract?path=peers/alice/a.md&part=1").text
    assert 'class="label">Abstract</span>' in part and "&lt;script&gt;" in part and "<script>" not in part
    assert ABSTRACT in unescape(part)
    other = modelled.get("/file/abstract?path=peers/alice/b.md&part=1").text
    assert "No abstract yet: the [llm] model writes one at idle time" in other
    got = modelled.get("/access/abstracts?namespace=peer:alice").json()
    assert got == {"abstracts": "on", "files": {"peers/alice/a.md": ABSTRACT, "peers/alice/b.md": None},
                   "note": "1 of 2 files have no abstract yet: the [llm] model writes them at idle time "
                           "(anew after each edit)."}


def test_an_agents_namespace_shows_what_its_agent_session_reads(plain: Ui) -> None:
    """#40 item 7 made agent sessions confined (memoryd mcp --session agent): the page said agents read all."""
    html = _text(plain.get("/access").text)
    assert "Read by session agent --agent coder (an agent run as the owner reads every namespace)" in html
    assert "The agent runs as an owner session" not in html
    listed = _text(plain.get("/access?namespace=agent:coder").text)
    assert "Session agent --agent coder can read 1 file:" in listed and "agents/coder/notes.md" in listed
    assert "peers/alice/a.md" not in listed.split("agent:coder")[-1]
    got = plain.get("/access/abstracts?namespace=agent:coder").json()
    assert list(got["files"]) == ["agents/coder/notes.md"]


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_the_entries_page_names_each_file_once_for_its_abstract(modelled: Ui) -> None:
    html = modelled.get("/entries?namespace=peer:alice").text
    assert html.count('data-abstract-path="peers/alice/a.md"') == 1 and "Alice's notes on" not in unescape(html)
    got = modelled.get("/abstracts?path=peers/alice/a.md&path=peers/alice/b.md&path=nope.md&path=peers/alice/a.md")
    assert got.json() == {"abstracts": "on", "files": {"peers/alice/a.md": ABSTRACT, "peers/alice/b.md": None,
                                                        "nope.md": None},
                          "note": "2 of 3 files have no abstract yet: the [llm] model writes them at idle time "
                                  "(anew after each edit)."}
