"""File abstracts on the socket (issue #40, item 4): ``get {abstract: true}`` and ``files {abstracts: true}``.

The abstract shown is the one the idle job made for the file as it is now (keyed by model + the
redacted text, daemon/api/file_abstracts.py): an edited file has none until the job runs again,
and without a model every answer says ``off`` without reading a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.file_abstracts import FileAbstracts
from memoryd.daemon.api.files import MAX_ABSTRACTS_LIMIT, FileMethods
from memoryd.daemon.api.read import ReadMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import InvalidParams
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search.abstracts import AbstractStore

OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())
SECRET = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
A_TEXT = "# Alpha\n\n- The alpha service moved to the new queue in March.\n"
B_TEXT = f"# Beta\n\n- The beta deploy token is {SECRET}\n"


class FakeModel:
    def health(self) -> dict[str, Any]:
        return {"model": "fake-1"}

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        raise AssertionError("a lookup never asks the model")


@pytest.fixture
def env(tmp_path: Path) -> Any:
    root = tmp_path / "root"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.md").write_text(A_TEXT)
    (root / "notes" / "b.md").write_text(B_TEXT)
    (root / "notes" / "c.md").write_text("# Gamma\n\n- Not abstracted yet.\n")
    store = AbstractStore(tmp_path / "abstracts.sqlite")
    store.put("fake-1", A_TEXT, "Alpha's move to the new queue.")
    store.put("fake-1", privacy.redact(B_TEXT, "secrets"), "Beta's deploy.")  # as the job keys it: redacted
    yield root, store
    store.close()


class NoIndex:
    site = None  # get reads files, not the index


def _reads(root: Path, store: AbstractStore | None, model: FakeModel | None) -> ReadMethods:
    roots = RootMap([root])
    return ReadMethods(index=NoIndex(), roots=lambda: roots, worker=None, search=Config().search,  # type: ignore[arg-type]
                       path_filter=PathFilter(("*.md",), ()), max_file_bytes=1 << 20,
                       count_tokens=lambda texts: [len(t.split()) for t in texts], query_vector=lambda q: None,
                       model=lambda: model, abstracts=store)


def _files(root: Path, store: AbstractStore | None, model: FakeModel | None) -> FileMethods:
    roots = RootMap([root])
    return FileMethods(roots=lambda: roots, path_filter=PathFilter(("*.md",), ()),
                       abstracts=FileAbstracts(store, lambda: model, 1 << 20, "secrets"))


def test_get_gives_the_files_abstract_only_when_asked(env: Any) -> None:
    root, store = env
    reads = _reads(root, store, FakeModel())
    got = reads.get({"path": "notes/a.md", "start_line": 1, "end_line": 1, "abstract": True}, OWNER)
    assert got["abstract"] == "Alpha's move to the new queue." and got["abstracts"] == "on"
    assert got["text"] == "# Alpha\n"  # the lines asked for, whatever the abstract covers
    assert reads.get({"path": "notes/b.md", "abstract": True}, OWNER)["abstract"] == "Beta's deploy."
    assert reads.get({"path": "notes/c.md", "abstract": True}, OWNER)["abstract"] is None  # not made yet
    plain = reads.get({"path": "notes/a.md"}, OWNER)
    assert "abstract" not in plain and "abstracts" not in plain
    (root / "notes" / "a.md").write_text(A_TEXT + "- And back in May.\n")  # edited: its old abstract is stale
    assert reads.get({"path": "notes/a.md", "abstract": True}, OWNER)["abstract"] is None


def test_without_a_model_the_answer_is_off(env: Any) -> None:
    root, store = env
    for reads in (_reads(root, None, None), _reads(root, store, None)):
        got = reads.get({"path": "notes/a.md", "abstract": True}, OWNER)
        assert (got["abstract"], got["abstracts"]) == (None, "off")
    listed = _files(root, None, None).files({"abstracts": True}, OWNER)
    assert listed["abstracts"] == "off" and {f["abstract"] for f in listed["files"]} == {None}


def test_files_lists_each_files_abstract_when_asked(env: Any) -> None:
    root, store = env
    files = _files(root, store, FakeModel())
    listed = files.files({"abstracts": True}, OWNER)
    assert listed["abstracts"] == "on"
    assert {f["path"]: f["abstract"] for f in listed["files"]} == {
        "notes/a.md": "Alpha's move to the new queue.", "notes/b.md": "Beta's deploy.", "notes/c.md": None}
    plain = files.files({}, OWNER)
    assert "abstracts" not in plain and all("abstract" not in f for f in plain["files"])
    assert files.files({"abstracts": True, "limit": MAX_ABSTRACTS_LIMIT}, OWNER)["files"]
    with pytest.raises(InvalidParams, match=rf"param 'limit' must be in 1..{MAX_ABSTRACTS_LIMIT} with 'abstracts'"):
        files.files({"abstracts": True, "limit": MAX_ABSTRACTS_LIMIT + 1}, OWNER)
    with pytest.raises(InvalidParams, match="abstracts"):
        files.files({"abstracts": "yes"}, OWNER)


def test_memoryd_get_abstract_prints_it_or_why_there_is_none(tmp_path: Path, short_dir: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from memoryd.daemon.client import cli
    from memoryd.indexer.llm.config import LLMConfig
    from memoryd.indexer.search.abstracts import STORE_NAME
    from tests.fake_chat_server import FakeChatServer
    from tests.helpers import running_daemon

    files = {"notes/a.md": A_TEXT, "notes/c.md": "# Gamma\n\n- Not abstracted yet.\n"}
    with running_daemon(tmp_path / "off", short_dir / "off.sock", files) as (d, _client, _root):
        capsys.readouterr()
        assert cli.main(["get", "--socket", str(d.cfg.socket_path), "--abstract", "notes/a.md"]) == 0
        assert _printed(capsys).startswith("No abstract yet (needs [llm]")
    with FakeChatServer() as chat, running_daemon(tmp_path / "on", short_dir / "on.sock", files, llm=LLMConfig(
            provider="openai", url=chat.url, model="fake-model", retries=0)) as (d, _client, _root):
        store = AbstractStore(d.cfg.data_dir / STORE_NAME)
        store.put("fake-model", A_TEXT, "Alpha's move to the new queue.")
        store.close()
        sock = str(d.cfg.socket_path)
        capsys.readouterr()
        assert cli.main(["get", "--socket", sock, "--abstract", "notes/a.md"]) == 0
        assert _printed(capsys) == "Alpha's move to the new queue."
        assert cli.main(["get", "--socket", sock, "--abstract", "notes/c.md"]) == 0
        assert _printed(capsys).startswith("No abstract yet: the [llm] model writes one at idle time")


def _printed(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's line: the last of stdout (the in-process daemon's log lines go there too)."""
    return capsys.readouterr().out.splitlines()[-1]
