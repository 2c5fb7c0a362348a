"""Reconcile's housekeeping: temp files a killed write left in the user's folders."""
from __future__ import annotations

from pathlib import Path

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from tests.helpers import make_config


def test_reconcile_removes_temp_files_a_killed_write_left(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2023-05-01.md").write_text("# Day\n\n- Something happened.\n")
    stale = root / "memory" / ".2023-05-01.md.k3j4l5.memoryd-tmp"
    stale.write_text("half a write")
    editors = root / "memory" / ".2023-05-01.md.swp"  # not ours: left alone
    editors.write_text("vim")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ("*.swp", ".*")))
        assert not stale.exists() and editors.exists()
        assert idx.status().files == 1
    finally:
        idx.close()
