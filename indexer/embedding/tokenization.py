"""A ``tokenizer.json`` wrapper that counts tokens and frames model inputs itself.

The tokenizer's own truncation and padding are switched off (all-MiniLM's file
hard-codes both to 128), so that one immutable instance serves both jobs
safely from several threads: counting (no specials, never truncated, for the
chunker) and building model inputs (specials added here, content truncated to
``max_tokens`` in total, padding left to the batcher). The special tokens a
single sequence gets (``<s>`` … ``</s>``, ``[CLS]`` … ``[SEP]``) are learnt
once by encoding a sample with and without them.

A large Unigram (sentencepiece) vocabulary is tokenised by
:class:`memoryd.indexer.embedding.unigram.CompactUnigram` instead of the ``tokenizers``
library: the library's trie for the 250,002-piece multilingual-e5 vocabulary
costs ~290 MB of resident memory, more than the whole model. The compact one
gives the same ids (tests compare them on thousands of texts) in ~35 MB.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from memoryd.indexer.embedding.unigram import CompactUnigram, compact_unigram
from memoryd.indexer.errors import ModelError

_SAMPLE = "hello world"
_PAD_TOKENS = ("<pad>", "[PAD]", "<|pad|>")


class TokenizerAdapter:
    """Counts tokens and encodes model inputs; ``max_tokens`` includes the special tokens."""

    def __init__(self, path: Path, max_tokens: int) -> None:
        tok = _load(path)
        self.path = path
        self._tok = tok
        self.head, self.tail = _special_frame(tok, path)
        self.pad_id = _pad_id(tok)
        self.max_tokens = max_tokens
        self._budget = max_tokens - len(self.head) - len(self.tail)
        if self._budget < 1:
            raise ModelError(f"{path}: max_tokens {max_tokens} leaves no room beside the special tokens")

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        if isinstance(self._tok, CompactUnigram):
            return self._tok.encode_batch(texts)
        encodings = self._tok.encode_batch_fast(list(texts), add_special_tokens=False)
        return [e.ids for e in encodings]


    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, without special tokens and without truncation."""
        return [len(ids) for ids in self._encode(texts)] if texts else []

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Model input ids per text: specials added, content cut to fit ``max_tokens``."""
        if not texts:
            return []
        return [[*self.head, *ids[: self._budget], *self.tail] for ids in self._encode(texts)]


def _load(path: Path) -> Tokenizer | CompactUnigram:
    """The compact Unigram tokenizer where it applies (:func:`compact_unigram`), else the library's."""
    try:
        compact = compact_unigram(path)
        if compact is not None:
            return compact
        tok = Tokenizer.from_file(str(path))
    except ModelError:
        raise
    except Exception as exc:  # tokenizers raises plain Exception subclasses; json its own
        raise ModelError(f"cannot load tokenizer {path}: {exc}") from None
    tok.no_truncation()
    tok.no_padding()
    return tok


def _special_frame(tok: Tokenizer | CompactUnigram, path: Path) -> tuple[list[int], list[int]]:
    plain = tok.encode(_SAMPLE, add_special_tokens=False).ids
    framed = tok.encode(_SAMPLE, add_special_tokens=True).ids
    n = len(plain)
    for start in range(len(framed) - n + 1):
        if framed[start : start + n] == plain:
            return framed[:start], framed[start + n :]
    raise ModelError(f"{path}: cannot tell the special tokens from the text (unsupported post-processor)")


def _pad_id(tok: Tokenizer | CompactUnigram) -> int:
    """The pad token id: ``<pad>`` (XLM-R: 1), ``[PAD]`` (BERT: 0), else 0 (always masked out)."""
    for token in _PAD_TOKENS:
        pid = tok.token_to_id(token)
        if pid is not None:
            return int(pid)
    return 0
