"""Upgrading memoryd on a shared PostgreSQL database whose chunks were made with other settings.

The "old" settings here differ from the new ones in ``write.redact_index`` (part of the
identity, as a REDACT_VERSION bump is); the corpus holds no secret, so both make the same
chunk texts and the shared embedding cache can serve every vector after a re-index.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import StoreError
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.storage.postgres import schema
from memoryd.indexer.storage.postgres.identity import REINDEX_COMMAND
from memoryd.indexer.storage.postgres.store import IdentityChangedError
from tests.helpers import CountingEmbedder
from tests.indexer.test_storage_backends import CORPUS, storage_config
from tests.postgres.test_pg_backend import write_corpus

FILTER = PathFilter(("*.md",), (".git/*",))
INNER = HashEmbedder(64)


def site_config(pg_dsn: str, tmp_path: Path, site: str, redact: str) -> Any:
    """One site's config: its own root (the shared corpus) and data dir, ``redact`` as its index setting."""
    root = write_corpus(tmp_path / site / "memory")
    cfg = storage_config("postgres", root, tmp_path / site / "data", pg_dsn, site=site)
    return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, redact_index=redact))


def indexed(cfg: Any, emb: CountingEmbedder | None = None, reindex: bool = False) -> MemoryIndex:
    """Open ``cfg``'s site and reconcile its roots."""
    idx = open_index(cfg, emb or CountingEmbedder(INNER), reindex=reindex)
    reconcile(idx, list(cfg.effective_roots), FILTER)
    return idx


def old_database(pg_dsn: str, tmp_path: Path) -> tuple[Any, Any]:
    """Two sites (a, b) indexed with the old settings; returns their configs with the new settings."""
    for site in ("a", "b"):
        indexed(site_config(pg_dsn, tmp_path, site, "off")).close()
    return site_config(pg_dsn, tmp_path, "a", "secrets"), site_config(pg_dsn, tmp_path, "b", "secrets")


def test_the_refusal_names_the_command_and_what_it_does_to_other_sites(pg_dsn: str, tmp_path: Path) -> None:
    new_a, _ = old_database(pg_dsn, tmp_path)
    with pytest.raises(StoreError, match="redact=off/v") as exc:
        open_index(new_a, HashEmbedder(64))
    assert REINDEX_COMMAND in str(exc.value) and "drops every site's chunks" in str(exc.value)


def test_reindex_drops_every_site_keeps_the_cache_and_embeds_nothing_cached(pg_dsn: str, tmp_path: Path) -> None:
    new_a, new_b = old_database(pg_dsn, tmp_path)
    emb = CountingEmbedder(INNER)
    a = indexed(new_a, emb, reindex=True)
    try:
        reset = a.backend.reset
        assert reset is not None and reset[0] == 2 * len(CORPUS) and reset[1] > 0 and reset[2] == 1
        assert emb.calls == 0 and a.status().files == len(CORPUS)  # every vector came from the cache
        assert a.status().storage.to_json()["all_files"] == len(CORPUS)  # site b's rows went too
        with psycopg.connect(pg_dsn) as c:
            meta = dict(c.execute("SELECT key, value FROM memoryd_meta").fetchall())
        assert json.loads(meta["identity"])["redact"].startswith("secrets/")
        assert meta[schema.GENERATION_KEY] == "1"
    finally:
        a.close()
    b_emb = CountingEmbedder(INNER)
    b = indexed(new_b, b_emb)  # an upgraded site b starts without being refused, and re-embeds nothing
    try:
        assert b_emb.calls == 0 and b.status().files == len(CORPUS)
    finally:
        b.close()


def test_a_site_with_the_new_settings_gets_its_roots_back_without_a_restart(pg_dsn: str, tmp_path: Path) -> None:
    new_a, new_b = old_database(pg_dsn, tmp_path)
    indexed(new_a, reindex=True).close()
    b = indexed(new_b)  # running with the new settings when another re-index happens (a later upgrade)
    try:
        a = open_index(new_a, CountingEmbedder(INNER), reindex=True)
        a.backend.pg.reset_all_sites(json.dumps(a.identity(), sort_keys=True), drop_cache=False)
        a.close()
        assert b.status().files == 0
        assert not b.take_reconcile_wanted()  # nothing has told b yet
        b.save()  # the daemon's snapshot (every 30 s) checks the generation
        assert b.take_reconcile_wanted() and not b.take_reconcile_wanted()  # once: the scheduler asks for it
        stats = reconcile(b, list(new_b.effective_roots), FILTER)  # the daemon's next sweep, same process
        assert stats.files_indexed == len(CORPUS) and stats.embedded == 0
        assert b.status().files == len(CORPUS) and b.backend.identity_changed is None and not b.backend.lost_roots()
    finally:
        b.close()


def test_a_site_with_the_old_settings_stops_writing_and_says_so(pg_dsn: str, tmp_path: Path) -> None:
    old_b = site_config(pg_dsn, tmp_path, "b", "off")
    b = indexed(old_b)
    try:
        new_a = site_config(pg_dsn, tmp_path, "a", "secrets")
        indexed(new_a, reindex=True).close()
        root = next(iter(old_b.effective_roots))
        (root / "late.md").write_text("# Late\n\nWritten the old way after the upgrade.\n", encoding="utf-8")
        stats = b.index_files([(root, "late.md")])
        assert stats.files_indexed == 0 and b.status().files == 0  # nothing written the old way
        why = b.status().storage.to_json()["identity_changed"]
        assert why is not None and "redact=secrets/v" in why and "upgrade memoryd" in why
        assert {Path(r["root"]) for r in b.status().storage.to_json()["locks"]["lost"]} == {root}
    finally:
        b.close()


def test_a_write_already_past_its_check_is_refused_inside_its_transaction(pg_dsn: str, tmp_path: Path) -> None:
    old_b = site_config(pg_dsn, tmp_path, "b", "off")
    b = indexed(old_b)
    try:
        indexed(site_config(pg_dsn, tmp_path, "a", "secrets"), reindex=True).close()
        root_id = b.backend.pg.root_id(next(iter(old_b.effective_roots)))
        with pytest.raises(IdentityChangedError, match="re-indexed with other settings"):
            b.backend.pg.replace_file(root_id, "x.md", 1, 1, "0" * 64, "", [])  # as if its verify came just before
    finally:
        b.close()


def test_the_command_re_indexes_this_sites_roots_from_the_cache(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from memoryd.daemon.client.cli import main

    _, new_b = old_database(pg_dsn, tmp_path)
    root = next(iter(new_b.effective_roots))
    toml = tmp_path / "memoryd.toml"
    toml.write_text(f'[embedding]\nprovider = "hash"\n[watch]\nroots = ["{root}"]\n'
                    f'[storage]\nbackend = "postgres"\nsslmode = "disable"\nsite = "b"\n', encoding="utf-8")
    monkeypatch.setenv("MEMORYD_PG_DSN", pg_dsn)
    argv = ["migrate-storage", "--reindex", "--config", str(toml), "--data-dir", str(tmp_path / "b" / "data")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"dropped {2 * len(CORPUS)} files" in err and "embedded 0" in err and f"{len(CORPUS)} files" in err
    assert main(argv) == 0  # nothing left to drop: the run only reconciles
    assert "dropped" not in capsys.readouterr().err


def test_bench_reuse_of_an_old_database_says_what_to_do_and_reindex_repairs_it(pg_dsn: str, tmp_path: Path) -> None:
    import argparse
    import importlib
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))  # the bench scripts import their siblings as scripts do
    scale_pg = importlib.import_module("scale_pg")
    new_a, _ = old_database(pg_dsn, tmp_path)
    root = next(iter(new_a.effective_roots))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
    args = argparse.Namespace(reuse=tmp_path / "kept", reindex=False)
    with pytest.raises(SystemExit, match="add --reindex to re-index it in place"):
        scale_pg.reindex_kept(new_a, CountingEmbedder(INNER), root, files, args)
    emb = CountingEmbedder(INNER)
    scale_pg.reindex_kept(new_a, emb, root, files, argparse.Namespace(reuse=args.reuse, reindex=True))
    again = open_index(new_a, emb)  # opens: the database now has this memoryd's settings
    try:
        assert again.status().files == len(CORPUS) and emb.calls == 0
    finally:
        again.close()
