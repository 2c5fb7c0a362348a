"""Each chunk's line vectors on PostgreSQL (indexer/storage/postgres/line_rows.py, schema 6): a site fills
its own chunks' rows and no other site's, the rows go with their chunks, a chunk replaced meanwhile gets
none, a write is fenced by the identity generation, the search reads them once filled, ``status`` counts
the backlog, a database away is the typed outage (and no idle step runs against it), and a schema-5
database migrates.

The embedded backend's tests of the same are tests/indexer/test_chunk_line_vectors.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import StorageUnavailableError
from memoryd.indexer.storage.line_codec import chunk_lines, encode
from memoryd.indexer.storage.postgres import connect, schema
from memoryd.indexer.storage.postgres.backend import PostgresBackend
from memoryd.indexer.storage.postgres.line_rows import PgLineRows
from memoryd.indexer.storage.postgres.store import IdentityChangedError
from tests.helpers import CountingEmbedder, wait_for
from tests.indexer.test_storage_backends import FILTER, storage_config

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

NOTES = "# Notes\n\nMelanie painted a sunset in July.\n\nShe went camping with the kids.\n\n" \
        "Caroline adopted a dog named Rex.\n"
OTHER = "# Other\n\nThe build server runs nightly at two.\n"


def _site(tmp_path: Path, dsn: str, site: str, files: dict[str, str]) -> tuple[MemoryIndex, CountingEmbedder, Path]:
    """Site ``site`` on ``dsn`` with ``files`` in its own root, indexed (line vectors not filled yet)."""
    root = tmp_path / site / "root"
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    emb = CountingEmbedder(HashEmbedder(64))
    idx = open_index(storage_config("postgres", root, tmp_path / site / "data", dsn, site=site), emb)
    assert isinstance(idx.backend, PostgresBackend)
    try:
        reconcile(idx, [root], FILTER)
    except BaseException:
        idx.close()
        raise
    return idx, emb, root


@pytest.fixture
def site_a(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[MemoryIndex, CountingEmbedder, Path]]:
    idx, emb, root = _site(tmp_path, pg_dsn, "a", {"a.md": NOTES, "b.md": "one\n\n\ntwo\nthree\n" * 40})
    yield idx, emb, root
    idx.close()


def _fill(idx: MemoryIndex) -> int:
    steps = 0
    while idx.lines_pending():
        idx.fill_line_vectors(max_lines=8)
        steps += 1
        assert steps < 1000, "the fill never ended"
    return steps


def _rows(dsn: str) -> dict[int, bytes]:
    with psycopg.connect(dsn) as c:
        return {int(i): bytes(b) for i, b in c.execute("SELECT chunk_id, vectors FROM memoryd_line_vectors")}


def _chunks(dsn: str, site: str, rel: str | None = None) -> dict[int, str]:
    """Site ``site``'s chunk texts by id (only file ``rel``'s, when given)."""
    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT c.id, c.text FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                         " JOIN memoryd_roots r ON r.id = f.root_id WHERE r.site = %s AND (%s::text IS NULL"
                         " OR f.path = %s)", (site, rel, rel)).fetchall()
    return {int(i): str(t) for i, t in rows}


def test_a_fill_gives_every_chunk_of_this_site_its_lines_and_none_of_another_sites(
        site_a: Any, tmp_path: Path, pg_dsn: str) -> None:
    a, emb, _ = site_a
    b, _, _ = _site(tmp_path, pg_dsn, "b", {"other.md": OTHER})
    try:
        assert a.line_fill is not None and b.line_fill is not None
        mine, theirs = _chunks(pg_dsn, "a"), _chunks(pg_dsn, "b")
        assert a.line_fill.count() == len(mine) and b.line_fill.count() == len(theirs) > 0
        before = emb.embedded
        assert _fill(a) > 1  # bounded steps, not one call for everything
        assert not a.lines_pending() and a.line_fill.count() == 0
        rows = _rows(pg_dsn)
        assert set(rows) == set(mine)  # site b's chunks are b's to fill
        assert b.line_fill.count() == len(theirs)
        for chunk_id, text in mine.items():
            lines = chunk_lines(text)
            stored = np.frombuffer(rows[chunk_id], dtype=np.float16).reshape(len(lines), -1)
            want = np.asarray(emb.inner.embed_passages(lines), dtype=np.float32)
            np.testing.assert_allclose(stored.astype(np.float32), want, atol=2e-3)
        assert emb.embedded - before <= len({x for t in mine.values() for x in chunk_lines(t)})  # each line once
        _fill(b)
        assert set(_rows(pg_dsn)) == set(mine) | set(theirs)
    finally:
        b.close()


def test_rows_go_with_their_chunks(site_a: Any, pg_dsn: str) -> None:
    idx, _, root = site_a
    _fill(idx)
    b_ids = set(_chunks(pg_dsn, "a", "b.md"))
    (root / "a.md").write_text(NOTES + "\nMelanie also paints pottery.\n", encoding="utf-8")
    idx.index_files([(root, "a.md")])
    assert idx.lines_pending()
    live = set(_chunks(pg_dsn, "a"))
    rows = set(_rows(pg_dsn))
    assert b_ids <= rows <= live  # the untouched file keeps its rows; none outlives its chunk
    assert rows != live  # the edited file's new chunk waits for its lines
    _fill(idx)
    assert set(_rows(pg_dsn)) == live
    idx.remove_file(root, "a.md")
    assert set(_rows(pg_dsn)) == b_ids


def test_a_chunk_whose_text_changed_mid_step_gets_no_row(site_a: Any, pg_dsn: str) -> None:
    idx, _, _ = site_a
    rows = PgLineRows(idx.backend.pg)
    (chunk_id, sha, _text), *_ = rows.next_chunks(100, 0)
    with psycopg.connect(pg_dsn, autocommit=True) as c:  # the chunk now holds another text
        c.execute("UPDATE memoryd_chunks SET sha256 = 'other' WHERE id = %s", (chunk_id,))
    rows.write([(chunk_id, sha, encode(np.ones((2, 64), np.float32)))])
    assert chunk_id not in _rows(pg_dsn)


def test_the_scan_reads_this_sites_pending_chunks_from_the_floor_up(site_a: Any, pg_dsn: str) -> None:
    idx, _, _ = site_a
    rows = PgLineRows(idx.backend.pg)
    ids = [i for i, _, _ in rows.next_chunks(100, 0)]
    assert ids == sorted(ids) and len(ids) >= 2
    assert [i for i, _, _ in rows.next_chunks(100, ids[1])] == ids[1:]
    rows.write([(i, sha, encode(np.ones((1, 64), np.float32))) for i, sha, _ in rows.next_chunks(1, 0)])
    assert [i for i, _, _ in rows.next_chunks(100, 0)] == ids[1:] and rows.count() == len(ids) - 1


def test_a_write_after_a_re_index_elsewhere_is_refused(site_a: Any, pg_dsn: str) -> None:
    idx, _, _ = site_a
    rows = PgLineRows(idx.backend.pg)
    (chunk_id, sha, _text), *_ = rows.next_chunks(1, 0)
    with psycopg.connect(pg_dsn, autocommit=True) as c:  # what another site's re-index does first
        c.execute("UPDATE memoryd_meta SET value = (value::bigint + 1)::text WHERE key = %s", (schema.GENERATION_KEY,))
    with pytest.raises(IdentityChangedError):
        rows.write([(chunk_id, sha, encode(np.ones((2, 64), np.float32)))])
    assert _rows(pg_dsn) == {}


def test_the_search_reads_the_line_vectors_once_filled(site_a: Any) -> None:
    idx, _, _ = site_a
    before = idx.query(Query("Melanie painted a sunset", explain=True))
    assert before.explanations and before.explanations[0]["best_line_cosine"] is None  # not filled in yet
    assert before.query_analysis is not None and before.query_analysis["line_blend"].startswith("skipped")
    _fill(idx)
    after = idx.query(Query("Melanie painted a sunset", explain=True))
    assert after.explanations and after.explanations[0]["best_line_cosine"] > 0.5


def test_status_counts_this_sites_backlog_down_to_zero(site_a: Any, pg_dsn: str) -> None:
    idx, _, _ = site_a
    st = idx.status()
    assert st.line_vectors_pending == len(_chunks(pg_dsn, "a")) > 0
    assert st.to_json()["line_vectors"] == {"pending": st.line_vectors_pending}
    idx.fill_line_vectors(max_lines=8)
    assert 0 < (idx.status().line_vectors_pending or 0) < st.line_vectors_pending
    _fill(idx)
    assert idx.status().line_vectors_pending == 0 and idx.status().to_json()["line_vectors"] == {"pending": 0}


def test_a_database_away_is_the_typed_outage_and_the_fill_resumes(restartable_pg: Any, tmp_path: Path) -> None:
    idx, _, _ = _site(tmp_path, restartable_pg.server.dsn(), "a", {"a.md": NOTES})
    try:
        assert idx.lines_pending()
        restartable_pg.stop()
        with pytest.raises(StorageUnavailableError):
            idx.fill_line_vectors()
        with pytest.raises(StorageUnavailableError):
            idx.query(Query("Melanie", mode="keyword"))
        assert not idx.lines_pending()  # no idle step against a database known away
        assert idx.line_fill is not None and idx.line_fill.pending  # the work is not forgotten
        restartable_pg.start()
        wait_for(lambda: idx.status().storage.to_json()["reachable"], timeout=30, what="a call to find it back")
        assert idx.lines_pending()
        _fill(idx)
        assert idx.status().line_vectors_pending == 0
    finally:
        idx.close()


def test_the_daemons_line_step_logs_an_outage_and_retries(restartable_pg: Any, tmp_path: Path) -> None:
    from memoryd.daemon.work.line_steps import line_steps

    idx, _, _ = _site(tmp_path, restartable_pg.server.dsn(), "a", {"a.md": NOTES})
    try:
        steps = line_steps(idx, lambda: False)
        restartable_pg.stop()
        error = steps.step()
        assert error is not None and ("unreachable" in error or "cannot connect" in error) and steps.retry_in() > 0
    finally:
        restartable_pg.start()
        idx.close()


def test_schema_5_migrates_to_6_and_its_chunks_become_the_backlog(tmp_path: Path, pg_dsn: str) -> None:
    idx, _, root = _site(tmp_path, pg_dsn, "a", {"a.md": NOTES})
    chunks = len(_chunks(pg_dsn, "a"))
    idx.close()
    with psycopg.connect(pg_dsn, autocommit=True) as c, c.transaction():  # back to how schema 5 left it
        c.execute("DROP TABLE memoryd_line_vectors")
        c.execute("UPDATE memoryd_meta SET value = '5' WHERE key = 'schema_version'")
    assert connect.prepare(pg_dsn, "disable") == 5 and schema.SCHEMA_VERSION == 6
    idx = open_index(storage_config("postgres", root, tmp_path / "a" / "data", pg_dsn, site="a"), HashEmbedder(64))
    try:
        assert isinstance(idx.backend, PostgresBackend)
        assert idx.status().line_vectors_pending == chunks > 0
        _fill(idx)
        assert len(_rows(pg_dsn)) == chunks and idx.status().line_vectors_pending == 0
    finally:
        idx.close()
