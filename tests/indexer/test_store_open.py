"""Opening the store: the integrity check runs after a crash, not after every clean stop."""
from __future__ import annotations

from pathlib import Path

from memoryd.indexer.storage.embedded.store import Store


def test_integrity_check_runs_only_after_an_unclean_close(tmp_path: Path) -> None:
    db = tmp_path / "i.sqlite3"
    first = Store(db)
    assert first.checked  # a new file
    first.close()
    second = Store(db)
    assert not second.checked  # closed cleanly: quick_check skipped
    second.conn.close()  # the process dies without Store.close()
    second._conn = None
    third = Store(db)
    assert third.checked
    third.close()
