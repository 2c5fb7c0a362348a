"""The compact Unigram tokenizer gives exactly the ``tokenizers`` library's ids for the e5 vocabulary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from memoryd.indexer.embedding.calibration_texts import PASSAGES, QUERIES
from memoryd.indexer.embedding.e5_model import e5_tokenizer_path
from memoryd.indexer.embedding.tokenization import TokenizerAdapter
from memoryd.indexer.embedding.unigram import CompactUnigram, compact_unigram

DATA = Path(__file__).resolve().parents[1] / "data" / "calibration.jsonl"
EDGES = [
    "", " ", "   ", "\t\n", "<s>", "a<s>b", "<mask>", "x <mask> y</s>", "<pad><unk>", "hello   world",
    "Ｈｅｌｌｏ　ｗｏｒｌｄ ＜s＞",  # NFKC turns the full-width brackets into a real "<s>" piece
    "🤖 emoji 😀😀", "ﬁ ligature ① ㍿", "ab\x00cd", "e\u0301 é", "\u200b\u200bzero width", "zzzzqqqxxjjj" * 5,
    "用户喜欢使用深色模式，并且每天早上写日记。", "テスト 검증 пример مثال", "a" * 300, "ǅ ẞ İ",
]


@pytest.fixture(scope="module")
def pair() -> tuple[CompactUnigram, Tokenizer]:
    compact = compact_unigram(e5_tokenizer_path())
    assert compact is not None
    return compact, Tokenizer.from_file(str(e5_tokenizer_path()))


def _texts() -> list[str]:
    texts = [*EDGES, *QUERIES, *PASSAGES]
    for line in DATA.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts += [row["existing"], row["new"]]
    rnd = random.Random(7)
    alphabet = "ab <>/s媽😀 \u0301\u00a0Ａ①ﬁ\t\n."
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))) for _ in range(2000)]
    return texts


def test_same_ids_as_the_library(pair: tuple[CompactUnigram, Tokenizer]) -> None:
    compact, library = pair
    texts = _texts()
    expected = [e.ids for e in library.encode_batch(texts, add_special_tokens=False)]
    got = compact.encode_batch(texts)
    wrong = [(t, g, e) for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not wrong, wrong[:5]
    assert compact.encode_batch(texts) == got  # a second pass answers from the word memo: the same ids
    assert compact.encode("hello world").ids == library.encode("hello world").ids  # specials framed the same


def test_adapter_uses_it_for_e5_and_the_library_for_small_vocabularies(tmp_path: Path) -> None:
    e5 = TokenizerAdapter(e5_tokenizer_path(), 512)
    assert isinstance(e5._tok, CompactUnigram)
    assert (e5.head, e5.tail, e5.pad_id) == ([0], [2], 1)
    small = tmp_path / "small.json"
    spec = json.loads(e5_tokenizer_path().read_text(encoding="utf-8"))
    spec["model"]["vocab"] = spec["model"]["vocab"][:1000]
    small.write_text(json.dumps(spec), encoding="utf-8")
    assert compact_unigram(small) is None
    assert not isinstance(TokenizerAdapter(small, 64)._tok, CompactUnigram)
