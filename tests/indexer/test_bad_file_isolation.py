"""One bad file never stops the others (issue 27, item 4).

Whatever one file's bytes make a per-file stage do (decoding, the chunker and its
Markdown parser, the secret filter, keys and keyword terms, the model), that file
is skipped with the reason (``status().skipped`` and one ``file.skipped`` log
line) and the rest of its batch commits; once the file is fixed it is indexed and
leaves the list. Errors that are not the file's doing (memory, the disk, the
storage, memoryd's own typed errors, Ctrl-C) still propagate.

Three kinds of test: a property test (hypothesis) that feeds the real pipeline
hostile bytes next to a normal file; one 10 MB line; and a stage made to raise
for one marked file (monkeypatched), since the real stages no longer raise on any
input known today.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import ConfigError, DiskFullError, ModelError
from memoryd.indexer.ingestion import files as files_mod
from memoryd.indexer.ingestion import ingest
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search import keyword
from memoryd.indexer.search.query import Query
from memoryd.indexer.types import Embedder
from tests.helpers import make_config
from tests.write_fixtures import start_write_daemon

FILTER = PathFilter(("*.md",), (".git/*",))
POISON = "zzpoisonzz"  # the marked file's word: a patched stage raises on text holding it


class PoisonError(ValueError):
    """What a patched stage raises for the marked file (a stand-in for any bug a text can trigger)."""


@dataclasses.dataclass
class Env:
    root: Path
    idx: MemoryIndex

    def write(self, rel: str, data: bytes | str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)

    def index(self, *rels: str) -> Any:
        return self.idx.index_files([(self.root, rel) for rel in rels])

    def finds(self, word: str) -> list[str]:
        return [h["path"] for h in self.idx.query(Query(word, k=5, mode="keyword")).to_json()["hits"]]

    def skipped(self) -> dict[str, str]:
        prefix = f"{self.root}/"
        return {s.path.removeprefix(prefix): s.reason for s in self.idx.status().skipped}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    root = tmp_path / "root"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    yield Env(root, idx)
    idx.close()


# -- the property: any bytes, next to a normal file -------------------------------------------------------

ESCAPES = ["%E9", "%C3%28", "%FF", "%C3%A9", "%25", "%2525E9", "%", "%%", "%G1", "%E2%82", "%F0%9F%98%80", "%00",
           "%0A", "%ED%A0%80", "%C0%AF"]
MARKUP = ["https://example.com/", "caf", "-menu-2024-final-version.pdf", "?token=", "&password=", "AKIA", "ghp_",
          "`", "# ", "## ", "\n", "- ", "```\n", "---\n", "> ", "| a | b |\n", "[x](", ")", "<!--", "-->", " "]
BAD_UTF8 = [b"\xe9", b"\xc3\x28", b"\xff", b"\xfe", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe2\x82",
            b"\xf0\x9f\x98", b"\x80", b"\xef\xbb\xbf"]
CONTROLS = [chr(c) for c in (*range(32), 0x7F, 0x85, 0x2028, 0x2029, 0xFEFF, 0x200B, 0x202E)]


def _percent_text() -> st.SearchStrategy[bytes]:
    piece = st.sampled_from(ESCAPES) | st.sampled_from(MARKUP) | st.text(max_size=12)
    return st.lists(piece, max_size=40).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))


def _broken_utf8() -> st.SearchStrategy[bytes]:
    piece = st.sampled_from(BAD_UTF8) | st.text(max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass"))
    return st.lists(piece, max_size=40).map(b"".join)


def _utf16() -> st.SearchStrategy[bytes]:
    """UTF-16 either way round, with or without a BOM, sometimes cut mid-unit or holding lone surrogates."""
    bom = st.sampled_from([b"", codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE])
    body = st.tuples(st.text(max_size=60), st.sampled_from(["utf-16-le", "utf-16-be"])).map(
        lambda te: te[0].encode(te[1], "surrogatepass"))
    tail = st.sampled_from([b"", b"\x00", b"\x00\xd8", b"\xd8\x00", b"\x00\xdc\x41\x00", b"\xff"])
    return st.tuples(bom, body, tail).map(b"".join)


def _controls() -> st.SearchStrategy[bytes]:
    piece = st.sampled_from(CONTROLS) | st.sampled_from(MARKUP) | st.text(max_size=8)
    return st.lists(piece, max_size=40).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))


hostile_bytes = st.one_of(st.binary(max_size=3000), _percent_text(), _broken_utf8(), _utf16(), _controls())

QUIET = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # a large failing example


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Env:
    root = tmp_path / "root"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    if backend == "postgres":
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(
            cfg.storage, backend="postgres", dsn=request.getfixturevalue("pg_dsn"), sslmode="disable"))
    return Env(root, open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir)))


@QUIET
@pytest.mark.parametrize(("backend", "examples"), [("embedded", 200), ("postgres", 15)])
def test_no_bytes_in_one_file_ever_fail_its_batch(backend: str, examples: int, tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    env = _open(backend, tmp_path, request)
    try:
        _property(env, examples)
    finally:
        env.idx.close()


def _property(env: Env, examples: int) -> None:
    serial = itertools.count()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(hostile_bytes)
    def one(data: bytes) -> None:
        word = f"kiwi{next(serial)}x"
        env.write("bad.md", data)
        env.write("good.md", f"# Fruit\n\n- The {word} tastes sweet.\n")
        stats = env.index("bad.md", "good.md")  # must not raise
        assert env.finds(word) == ["good.md"]
        assert stats.files_indexed + stats.files_unchanged + stats.files_skipped == 2
        assert ("bad.md" in env.skipped()) == (stats.files_skipped == 1)

    one()
    assert env.idx.status().files >= 1


@pytest.mark.slow  # ~9 s on 2 cores: the chunker and the secret filter over 10 MB
def test_a_ten_megabyte_line_does_not_stop_the_batch(env: Env) -> None:
    unit = "https://example.com/caf%E9-menu-2024-final-version.pdf?q=%C3%28%FF "
    line = (unit * (9_990_000 // len(unit))).encode()
    assert 9_900_000 < len(line) < 10_000_000  # under watch.max_file_bytes: it goes through every stage
    env.write("long.md", b"# One long line\n\n" + line + b"\n")
    env.write("good.md", "# Fruit\n\n- The papaya is ripe.\n")
    stats = env.index("long.md", "good.md")
    assert env.finds("papaya") == ["good.md"]
    assert stats.files_indexed + stats.files_skipped == 2


@pytest.mark.parametrize("backend", ["embedded", "postgres"])
def test_a_nul_in_utf16_text_is_binary_on_every_backend(backend: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    """UTF-16 skips the byte-level NUL check; a NUL character would reach PostgreSQL, whose text type refuses it."""
    env = _open(backend, tmp_path, request)
    try:
        env.write("a.md", "# A\n\n- The apricot jam.\n")
        env.write("nul16.md", "# N\n\n- quince\x00paste\n".encode("utf-16"))
        env.write("z.md", "# Z\n\n- The zucchini bread.\n")
        env.index("a.md", "nul16.md", "z.md")
        assert env.finds("apricot") == ["a.md"] and env.finds("zucchini") == ["z.md"]
        assert env.skipped()["nul16.md"].startswith("binary")
    finally:
        env.idx.close()


# -- one stage made to raise for one file -----------------------------------------------------------------

def _raising(real: Callable[..., Any], exc: BaseException | None = None) -> Callable[..., Any]:
    """``real``, except that a call whose text arguments hold POISON raises ``exc`` (PoisonError by default)."""
    def patched(*args: Any, **kwargs: Any) -> Any:
        texts = [a for a in (*args, *kwargs.values()) if isinstance(a, str | bytes)]
        texts += [t for a in args if isinstance(a, list) for t in a if isinstance(t, str)]
        if any((POISON in t) if isinstance(t, str) else (POISON.encode() in t) for t in texts):
            raise exc if exc is not None else PoisonError("boom at byte 17")
        return real(*args, **kwargs)
    return patched


class PoisonedEmbedder:
    """The hash embedder, except that the model 'fails' on a passage holding POISON (or on every one)."""

    def __init__(self, inner: Embedder, fail_all: bool = False) -> None:
        self.inner, self.fail_all = inner, fail_all
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_all or any(POISON in t for t in texts):
            raise PoisonError("the model choked")
        return np.asarray(self.inner.embed_passages(texts))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


STAGES: dict[str, Callable[[pytest.MonkeyPatch, Env], None]] = {
    "read": lambda mp, env: mp.setattr(files_mod, "decode_text", _raising(files_mod.decode_text)),
    "chunker": lambda mp, env: mp.setattr(ingest, "chunk_markdown", _raising(ingest.chunk_markdown)),
    "secret filter": lambda mp, env: mp.setattr(privacy, "redact", _raising(privacy.redact)),
    "keys and terms": lambda mp, env: mp.setattr(keyword, "document_terms", _raising(keyword.document_terms)),
    "embedding": lambda mp, env: mp.setattr(env.idx.vector_fill, "passages", PoisonedEmbedder(env.idx.embedder)),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_raising_on_one_file_skips_only_that_file_until_it_is_fixed(
        stage: str, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    STAGES[stage](monkeypatch, env)
    env.write("a.md", "# A\n\n- The apricot jam.\n")
    env.write("bad.md", f"# B\n\n- The {POISON} blueberry pie.\n")
    env.write("z.md", "# Z\n\n- The zucchini bread.\n")
    with structlog.testing.capture_logs() as logs:
        stats = env.index("a.md", "bad.md", "z.md")
        env.index("bad.md")  # still bad: listed again, not logged again
    assert env.finds("apricot") == ["a.md"] and env.finds("zucchini") == ["z.md"]
    assert env.finds("blueberry") == [] and stats.files_indexed == 2 and stats.files_skipped == 1
    reason = env.skipped()["bad.md"]
    assert reason.startswith(f"prepare-failed: {stage}: PoisonError: ") and ("choked" in reason or "boom" in reason)
    skips = [e for e in logs if e["event"] == "file.skipped"]
    assert [e["log_level"] for e in skips] == ["warning", "debug"] and {e["path"] for e in skips} == {"bad.md"}
    assert isinstance(skips[0]["exc_info"], PoisonError)  # a traceback, once

    env.write("bad.md", "# B\n\n- The blueberry pie.\n")  # fixed
    fixed = env.index("bad.md")
    assert fixed.files_indexed == 1 and env.finds("blueberry") == ["bad.md"] and env.skipped() == {}


def test_a_file_that_fails_after_being_indexed_keeps_its_last_good_chunks(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.write("a.md", "# A\n\n- The apricot jam.\n")
    env.index("a.md")
    monkeypatch.setattr(ingest, "chunk_markdown", _raising(ingest.chunk_markdown))
    env.write("a.md", f"# A\n\n- The apricot jam, {POISON}.\n")
    env.index("a.md")
    assert env.finds("apricot") == ["a.md"] and env.skipped()["a.md"].startswith("prepare-failed: chunker")


def test_a_cold_start_indexes_every_other_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    for i in range(30):
        (root / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 3}" / f"n{i}.md").write_text(f"# Note {i}\n\n- The fig{i}x note.\n")
    (root / "d1" / "bad.md").write_text(f"# Bad\n\n- {POISON} https://example.com/caf%E9.pdf\n")
    monkeypatch.setattr(privacy, "redact", _raising(privacy.redact))
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        stats = reconcile(idx, [root], FILTER)
        assert stats.files_indexed == 30 and stats.files_skipped == 1
        assert idx.status().files == 30
        assert [s.path for s in idx.status().skipped] == [f"{root}/d1/bad.md"]
        (root / "d1" / "bad.md").unlink()  # a skipped file that is deleted leaves the list at the next sweep
        reconcile(idx, [root], FILTER)
        assert idx.status().skipped == ()
    finally:
        idx.close()


def test_when_the_model_fails_on_every_file_the_error_is_the_models(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env.idx.vector_fill, "passages", PoisonedEmbedder(env.idx.embedder, fail_all=True))
    env.write("a.md", "# A\n\n- The apricot jam.\n")
    env.write("z.md", "# Z\n\n- The zucchini bread.\n")
    with pytest.raises(PoisonError):
        env.index("a.md", "z.md")
    assert env.skipped() == {}


@pytest.mark.parametrize("exc", [
    MemoryError(), KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device"),
    DiskFullError("the data directory is full"), ModelError("tokenizer gone"), ConfigError("chunking.max_tokens"),
], ids=lambda e: type(e).__name__)
def test_errors_that_are_not_the_files_fault_still_propagate(
        exc: BaseException, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "chunk_markdown", _raising(ingest.chunk_markdown, exc))
    env.write("a.md", "# A\n\n- The apricot jam.\n")
    env.write("bad.md", f"# B\n\n- The {POISON} pie.\n")
    with pytest.raises(type(exc)):
        env.index("a.md", "bad.md")
    assert env.skipped() == {}


def test_the_reason_never_repeats_a_secret_from_the_exception(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    monkeypatch.setattr(ingest, "chunk_markdown", _raising(ingest.chunk_markdown, PoisonError(f"bad token {key}")))
    env.write("bad.md", f"# B\n\n- {POISON}\n")
    env.index("bad.md")
    reason = env.skipped()["bad.md"]
    assert key not in reason and reason.startswith("prepare-failed: chunker: PoisonError: bad token")


# -- through the daemon: the start-up reconcile and ``remember`` ----------------------------------------

def test_the_daemon_starts_and_remembers_around_a_bad_file(tmp_path: Path, short_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad file in the root at start-up is listed, the rest indexed; a ``remember`` whose own file then
    fails to index still reaches the disk and answers (the file is listed, not a -32603)."""
    monkeypatch.setattr(privacy, "redact", _raising(privacy.redact))
    (tmp_path / "root" / "notes").mkdir(parents=True)
    (tmp_path / "root" / "notes" / "bad.md").write_text(f"# Bad\n\n- {POISON} https://example.com/caf%E9.pdf\n")
    wd = start_write_daemon(tmp_path, short_dir)
    try:
        skipped = {s["path"]: s["reason"] for s in wd.client.call("status")["skipped"]}
        assert skipped[f"{wd.root}/notes/bad.md"].startswith("prepare-failed: secret filter: PoisonError")
        assert wd.client.call("search", {"query": "Lisbon", "mode": "keyword"})["hits"][0]["path"] == "MEMORY.md"

        ok = wd.client.call("remember", {"content": "The user prefers oolong tea in the morning."})
        assert ok["decision"] == "appended"
        hits = wd.client.call("search", {"query": "oolong", "mode": "keyword"})["hits"]
        assert [h["path"] for h in hits] == [ok["path"]]

        res = wd.client.call("remember", {"content": f"Staging deploys run on Thursdays after the {POISON} review."})
        assert res["decision"] == "appended" and POISON in (wd.root / res["path"]).read_text()
        skipped = {s["path"]: s["reason"] for s in wd.client.call("status")["skipped"]}
        assert skipped[f"{wd.root}/{res['path']}"].startswith("prepare-failed: secret filter")
    finally:
        wd.close()
