"""Clear errors, never tracebacks (issue #33 item 6): a read-only role, a damaged schema version, NUL
in ``sites``; the service's optional environment file for the DSN; BM25 figures read a moment apart."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.errors import StoreError
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import FILTER, write_corpus


def test_a_read_only_role_gets_a_sentence_not_a_traceback(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
    finally:
        idx.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS memoryd_reader")
        conn.execute("CREATE ROLE memoryd_reader LOGIN")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO memoryd_reader")
    reader = make_conninfo(pg_dsn, user="memoryd_reader")
    try:
        with pytest.raises(StoreError) as err:
            open_index(storage_config("postgres", root, tmp_path / "data", reader, site="r"), HashEmbedder(64))
        text = str(err.value)
        assert "read-only" in text and "search --offline" in text and "permission denied" in text
        assert "INSERT" not in text.split("(", 1)[1].split(")", 1)[0]  # the server's words, not memoryd's SQL
        ro = open_index(storage_config("postgres", root, tmp_path / "data", reader, site="r"), HashEmbedder(64),
                        read_only=True)  # what such a role is for
        try:
            assert ro.query(Query("Neovim", mode="keyword")).hits
        finally:
            ro.close()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM memoryd_reader")
            conn.execute(f"REVOKE ALL ON DATABASE {conninfo_to_dict(pg_dsn)['dbname']} FROM memoryd_reader")
            conn.execute("DROP ROLE memoryd_reader")


@pytest.mark.parametrize("value", ["abc", "3.0", "", "٣"])
def test_a_schema_version_that_is_no_number_is_named(pg_dsn: str, tmp_path: Path, value: str) -> None:
    root = write_corpus(tmp_path / "root")
    cfg = storage_config("postgres", root, tmp_path / "data", pg_dsn)
    open_index(cfg, HashEmbedder(64)).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memoryd_meta SET value = %s WHERE key = 'schema_version'", (value,))
    for read_only in (False, True):
        with pytest.raises(StoreError, match=r"schema_version is .*not a version number"):
            open_index(cfg, HashEmbedder(64), read_only=read_only)


def test_nul_or_control_characters_in_sites_are_refused_as_params() -> None:
    from memoryd.daemon.api.requests import _sites
    from memoryd.daemon.rpc.errors import InvalidParams

    for bad in (["a\x00b"], ["ok", "\x1b[31m"], ["x" * 1025]):
        with pytest.raises(InvalidParams, match="printable site ids"):
            _sites({"sites": bad})
    assert _sites({"sites": ["self", "laptop:/home/me/.local/state/memoryd"]}) == (
        "self", "laptop:/home/me/.local/state/memoryd")


def test_a_nul_site_matches_nothing_in_the_index(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
        assert idx.query(Query("Neovim", mode="keyword", sites=("a\x00b",))).hits == []  # type: ignore[call-arg]
    finally:
        idx.close()


def test_the_service_unit_reads_an_optional_environment_file() -> None:
    from memoryd.daemon.client.cli_setup import unit_text

    text = unit_text("memoryd.service", "/opt/memoryd/bin/memoryd")
    assert "\nEnvironmentFile=-%E/memoryd/env\nExecStart=/opt/memoryd/bin/memoryd run" in text
    assert text.index("[Service]") < text.index("EnvironmentFile=")


def test_bm25_survives_figures_read_a_moment_apart(pg_dsn: str, tmp_path: Path) -> None:
    """The table's totals are remembered for 2 s, a new term's frequency is read at once: a term
    written meanwhile to more chunks than the remembered total made BM25's IDF a log of a negative
    number (an internal error on the search)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "one.md").write_text("# One\n\nThe office is in Lisbon.\n", encoding="utf-8")
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
        assert idx.query(Query("Lisbon", mode="keyword")).hits  # the totals (1 chunk) are remembered now
        for i in range(3):
            (root / f"z{i}.md").write_text(f"# Z{i}\n\nThe zeppelin {i} lands at noon.\n", encoding="utf-8")
        reconcile(idx, [root], FILTER)
        hits = idx.query(Query("zeppelin", mode="keyword", k=10)).hits
        assert {h.path for h in hits} == {"z0.md", "z1.md", "z2.md"}
    finally:
        idx.close()


def test_the_same_file_on_two_sites_is_two_hits_not_one_merged(pg_dsn: str, tmp_path: Path) -> None:
    """The keyword oddity of the issue (a term in 9 of ~18 chunks, 4 hits with k = 50): two sites whose
    root has the same path (the default root, on two machines) hold the same files; their chunks
    rank side by side, and hits "of one file" that touch were merged into one (up to 3 chunks a hit),
    across sites. Each site's chunk is its own hit now, and says its site."""
    root = tmp_path / "root"
    root.mkdir()
    for i in range(3):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nThe kestrel {i} nests under the bridge.\n", encoding="utf-8")
    for site in ("a", "c"):
        idx = open_index(storage_config("postgres", root, tmp_path / f"data-{site}", pg_dsn, site=site),
                         HashEmbedder(64))
        try:
            reconcile(idx, [root], FILTER)
        finally:
            idx.close()
    idx = open_index(storage_config("postgres", root, tmp_path / "data-a", pg_dsn, site="a"), HashEmbedder(64))
    try:
        hits = idx.query(Query("kestrel", mode="keyword", k=50)).hits
    finally:
        idx.close()
    assert sorted((h.site, h.path) for h in hits) == [(s, f"n{i}.md") for s in ("a", "c") for i in range(3)]
    assert all(h.absorbed == () for h in hits)
