"""A forgotten secret: the ``forget`` answer redacts it, and ``purge`` (owner only, audited) takes it out of the
history for good; through a real in-process daemon's socket (#38, 20). A data dir others can write stops the
start (#38, 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.private import UnsafeDataDir
from memoryd.daemon.rpc.errors import ACCESS_DENIED, WRITE_CONFLICT
from tests.helpers import running_daemon

SECRET = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1"
FILES = {"MEMORY.md": f"# Memory\n\n- The bot key is {SECRET} for now.\n- Tea at four.\n"}


def test_forget_redacts_the_entry_it_echoes_and_purge_removes_it_from_the_history(tmp_path: Path,
                                                                                   short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "m.sock", FILES) as (d, client, _root):
        out = client.call("forget", {"path": "MEMORY.md", "line": 3})
        assert SECRET not in str(out["previous"]) and "REDACTED" in out["previous"]
        assert SECRET in d.history.path.read_text()  # kept exactly, so that undo works, until purged
        with pytest.raises(RpcClientError) as denied:
            client.call("purge", {"id": out["history_id"], "session": {"kind": "direct", "peer": "alice"}})
        assert denied.value.code == ACCESS_DENIED
        done = client.call("purge", {"id": out["history_id"]})
        assert done["decision"] == "purged" and done["entry"]["path"] == "MEMORY.md"
        assert SECRET not in d.history.path.read_text()
        with pytest.raises(RpcClientError) as refused:
            client.call("undo", {"id": out["history_id"]})
        assert refused.value.code == WRITE_CONFLICT
        audit = client.call("audit", {"tail": 10})["entries"]
        assert any(e.get("action") == "purge" and e.get("decision") == "purged" for e in audit)


def test_a_data_dir_others_can_write_stops_the_start(tmp_path: Path, short_dir: Path) -> None:
    (tmp_path / "data").mkdir()
    os.chmod(tmp_path / "data", 0o777)
    with pytest.raises(UnsafeDataDir, match=f"chmod 700 {tmp_path / 'data'}"), \
            running_daemon(tmp_path, short_dir / "m.sock", FILES):
        pass
