"""The index's typed ``status`` (:mod:`memoryd.indexer.storage.index_status`) writes each backend's wire
form key for key, in the order its clients have always seen (the daemon spreads it into ``status``)."""

from __future__ import annotations

import json

from memoryd.indexer.storage.index_status import (
    BacklogProgress,
    CacheStatus,
    EmbeddedStorage,
    IndexStatus,
    LocalCacheStatus,
    ModelStatus,
    SkippedFile,
    VectorIndexStatus,
    skipped_files,
)
from memoryd.indexer.storage.postgres.sites import RootInfo, SiteInfo
from memoryd.indexer.storage.postgres.status import LostRoot, PgFigures, PgStorage, SiteLocks

HEAD = ["files", "chunks", "model", "cache", "index"]


def _embedded() -> IndexStatus:
    return IndexStatus(
        files=2, chunks=5,
        model=ModelStatus("e5", 384, "int8", passages="int8", provider="local", server={"reachable": True}),
        cache=LocalCacheStatus(4, 1, 2, 50, machine=None),
        index=VectorIndexStatus("flat", 5, 1, "hnsw"),
        skipped=skipped_files({"/r/b.md": "too-large", "/r/a.md": "binary"}),
        vectors=BacklogProgress.from_progress({"pending": 3, "per_s": 1.5, "eta_s": None}),
        storage=EmbeddedStorage("/data"))


def _pg(figures: PgFigures | None) -> IndexStatus:
    storage = PgStorage(database="postgresql://h/db", site="laptop", reachable=figures is not None,
                        last_error=None if figures is not None else "refused", since="2026-01-01T00:00:00Z",
                        identity_changed=None, refused=None,
                        locks=SiteLocks(("/r",), (LostRoot("/s", "taken"),)), figures=figures)
    return IndexStatus(files=None if figures is None else 2, chunks=None if figures is None else 5,
                       model=ModelStatus("e5", 384, "int8"), cache=CacheStatus(None, 0, 0, 50),
                       index=VectorIndexStatus("pgvector-hnsw", None, 0, None), skipped=(),
                       vectors=BacklogProgress(0, None, None), storage=storage)


def test_the_embedded_index_writes_storage_last_and_its_full_model_and_cache() -> None:
    out = _embedded().to_json()
    assert list(out) == [*HEAD, "skipped", "vectors", "storage"]
    assert out["model"] == {"id": "e5", "dim": 384, "queries": "int8", "passages": "int8", "provider": "local",
                            "server": {"reachable": True}}
    assert out["cache"] == {"entries": 4, "hits": 1, "misses": 2, "capacity": 50, "machine": None}
    assert out["index"] == {"type": "flat", "vectors": 5, "tombstones": 1, "rebuilding": "hnsw"}
    assert out["skipped"] == [{"path": "/r/a.md", "reason": "binary"}, {"path": "/r/b.md", "reason": "too-large"}]
    assert out["vectors"] == {"pending": 3, "per_s": 1.5, "eta_s": None}
    assert out["storage"] == {"backend": "embedded", "where": "/data", "reachable": True}
    assert json.loads(json.dumps(out)) == out


def test_a_model_without_passages_provider_or_server_writes_none_of_them() -> None:
    assert list(ModelStatus("e5", 384, "exact").to_json()) == ["id", "dim", "queries"]
    assert "server" not in ModelStatus("e5", 384, "exact", passages="exact", provider="local").to_json()


def test_postgres_writes_storage_before_skipped_and_its_figures_in_place() -> None:
    site = SiteInfo("laptop", host="h", roots=[RootInfo("/r", 2)])
    out = _pg(PgFigures(sites=1, all_files=2, all_chunks=5, all_sites=(site,))).to_json()
    assert list(out) == [*HEAD, "storage", "skipped", "vectors"]
    assert list(out["model"]) == ["id", "dim", "queries"] and "machine" not in out["cache"]
    storage = out["storage"]
    assert list(storage) == ["backend", "database", "site", "reachable", "sites", "all_files", "all_chunks",
                             "all_sites", "where", "error", "identity_changed", "refused", "last_error", "since",
                             "locks"]
    assert storage["where"] == storage["database"] == "postgresql://h/db" and storage["error"] is None
    assert storage["all_sites"] == [site.to_json()]
    assert storage["locks"] == {"held": ["/r"], "lost": [{"root": "/s", "why": "taken"}]}
    assert json.loads(json.dumps(out)) == out


def test_postgres_never_read_has_no_figures_and_shows_the_error() -> None:
    out = _pg(None).to_json()
    assert out["files"] is None and out["cache"]["entries"] is None and out["index"]["vectors"] is None
    storage = out["storage"]
    assert "sites" not in storage and "all_sites" not in storage
    assert storage["reachable"] is False and storage["error"] == storage["last_error"] == "refused"


def test_skipped_files_are_typed_and_sorted() -> None:
    assert skipped_files({"b": "x", "a": "y"}) == (SkippedFile("a", "y"), SkippedFile("b", "x"))
