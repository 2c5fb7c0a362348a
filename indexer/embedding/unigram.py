"""A small-memory Unigram (sentencepiece) tokenizer that gives the ``tokenizers`` library's ids.

Why: the library keeps a Unigram vocabulary in a trie with a hash map per node;
for multilingual-e5's 250,002 pieces that is ~290 MB of resident memory, more
than the model itself and half of the daemon's. Here the vocabulary is one
dict (piece -> id, ~35 MB) and the Viterbi search runs in Python; only the
parts that are fiddly to reproduce — the precompiled normaliser and the
Metaspace pre-tokenizer — still run in the library, on a copy of the
``tokenizer.json`` whose vocabulary is cut to a single piece.

Exactly the library's algorithm (``Unigram::encode_optimized``, fused unknowns):
for every start position, the pieces that begin there in increasing length,
a candidate replacing the best path to its end only when strictly better; a
position no one-character piece covers gets the unknown piece at
``min(score) - 10``; consecutive unknowns are fused, and every piece string is
mapped back through the vocabulary. Added tokens (``<s>``, ``<mask>``, ...)
are split out of the raw text first, as the library does. Only used where all
of that is what the file asks for (:func:`compact_unigram`); anything else goes
to the library. Cost: ~5 ms of CPU per 400-token passage (the model takes
~50 ms for it); a query's ~0.1 ms.
"""

from __future__ import annotations

import functools
import json
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.indexer.errors import ModelError

MIN_VOCAB = 50_000  # below this the library's trie is small: keep the library
_UNK_PENALTY = 10.0  # tokenizers' K_UNK_PENALTY


@dataclass(frozen=True)
class Encoded:
    """What :meth:`CompactUnigram.encode` returns: the ``ids`` attribute of a library Encoding."""

    ids: list[int]


def compact_unigram(path: Path) -> CompactUnigram | None:
    """A :class:`CompactUnigram` for ``path``, or None when the file is not a plain large Unigram model."""
    parts = _parts(path)  # the parsed JSON (~100 MB of small objects) is gone once this returns
    return None if parts is None else CompactUnigram(parts)


@dataclass(frozen=True)
class _Parts:
    """What the tokenizer keeps of a ``tokenizer.json``, in a few large objects."""

    pieces: str  # every piece, in id order, joined by NUL
    scores: array[float]
    unk_id: int
    added: dict[str, int]
    front: str  # the JSON of a tokenizer with the file's normaliser and pre-tokenizer and a one-piece vocabulary
    head: list[int]
    tail: list[int]


def _parts(path: Path) -> _Parts | None:
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"cannot load tokenizer {path}: {exc}") from None
    if not _supported(spec):
        return None
    model = spec["model"]
    pieces = [piece for piece, _ in model["vocab"]]
    if any("\0" in piece for piece in pieces):
        return None
    added = {t["content"]: int(t["id"]) for t in spec.get("added_tokens") or []}
    first_ids: dict[str, int] = {}
    for name in added:
        if name in pieces:
            first_ids[name] = pieces.index(name)
    head, tail = _template(spec.get("post_processor"), added, first_ids)
    light = dict(spec, model={"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}, added_tokens=[],
                 post_processor=None, decoder=None, truncation=None, padding=None)
    return _Parts("\0".join(pieces), array("d", (float(score) for _, score in model["vocab"])), int(model["unk_id"]),
                  added, json.dumps(light), head, tail)


def _supported(spec: Any) -> bool:
    if not isinstance(spec, dict):
        return False
    model = spec.get("model") or {}
    post = spec.get("post_processor")
    plain_added = all(not (t.get("lstrip") or t.get("rstrip") or t.get("single_word") or t.get("normalized"))
                      for t in spec.get("added_tokens") or [])
    return (model.get("type") == "Unigram" and not model.get("byte_fallback")
            and isinstance(model.get("unk_id"), int) and len(model.get("vocab") or ()) >= MIN_VOCAB
            and plain_added and (post is None or post.get("type") == "TemplateProcessing"))


WORD_MEMO = 32768  # words whose ids are kept


class CompactUnigram:
    """Thread-safe after construction (its only mutable state is the word memo, a thread-safe LRU).

    Words repeat: chunking a folder counts every line's tokens, and the same few thousand
    words make up most of them. Each word's ids are kept (``WORD_MEMO`` words, a few MB),
    which made counting ~4x faster on generated notes (the pure-Python Viterbi was 85 %
    of keyword-first indexing); the ids are the same either way.
    """

    def __init__(self, parts: _Parts) -> None:
        from tokenizers import Tokenizer

        self._ids: dict[str, int] = {}
        for i, piece in enumerate(parts.pieces.split("\0")):  # fresh strings, packed together
            self._ids.setdefault(piece, i)  # the library maps a repeated piece to its first id
        self._scores = parts.scores
        self._unk = parts.unk_id
        self._unk_score = min(parts.scores) - _UNK_PENALTY
        self._max_len = max(len(piece) for piece in self._ids)
        self._added = parts.added
        self._split = (re.compile("|".join(re.escape(t) for t in sorted(parts.added, key=len, reverse=True)))
                       if parts.added else None)
        front = Tokenizer.from_str(parts.front)
        self._normalizer = front.normalizer
        self._pre_tokenizer = front.pre_tokenizer
        self._head, self._tail = parts.head, parts.tail
        self._word_ids = functools.lru_cache(maxsize=WORD_MEMO)(self._ids_of_word)

    def token_to_id(self, token: str) -> int | None:
        return self._added.get(token, self._ids.get(token))

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoded:
        ids = self.encode_one(text)
        return Encoded([*self._head, *ids, *self._tail] if add_special_tokens else ids)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode_one(t) for t in texts]

    def encode_one(self, text: str) -> list[int]:
        """Ids without special tokens (the library's ``encode(text, add_special_tokens=False).ids``)."""
        out: list[int] = []
        pos = 0
        if self._split is not None:
            for m in self._split.finditer(text):
                self._encode_segment(text[pos:m.start()], out)
                out.append(self._added[m.group()])
                pos = m.end()
        self._encode_segment(text[pos:], out)
        return out

    def _encode_segment(self, text: str, out: list[int]) -> None:
        if not text:
            return
        normalized = self._normalizer.normalize_str(text) if self._normalizer is not None else text
        pre = self._pre_tokenizer
        words = [w for w, _ in pre.pre_tokenize_str(normalized)] if pre is not None else [normalized]
        for word in words:
            if word:
                out.extend(self._word_ids(word))

    def _ids_of_word(self, word: str) -> tuple[int, ...]:
        return tuple(self._ids.get(p, self._unk) for p in self._viterbi(word))

    def _viterbi(self, word: str) -> list[str]:
        """The best segmentation of ``word`` (non-empty) as piece strings, unknown runs fused."""
        n = len(word)
        ids, scores, unk, max_len = self._ids, self._scores, self._unk, self._max_len
        best = [0.0] * (n + 1)
        start = [-1] * (n + 1)
        node = [0] * (n + 1)
        start[0] = 0
        for i in range(n):
            base = best[i]
            single = False
            for j in range(i + 1, min(n, i + max_len) + 1):
                tid = ids.get(word[i:j])
                if tid is None:
                    continue
                cand = scores[tid] + base
                if start[j] < 0 or cand > best[j]:
                    best[j], start[j], node[j] = cand, i, tid
                if j == i + 1:
                    single = True
            if not single:
                cand = self._unk_score + base
                if start[i + 1] < 0 or cand > best[i + 1]:
                    best[i + 1], start[i + 1], node[i + 1] = cand, i, unk
        pieces: list[str] = []
        fused: list[str] = []
        end = n
        while end > 0:
            begin = start[end]
            if node[end] == unk:
                fused.append(word[begin:end])
            else:
                if fused:
                    pieces.append("".join(reversed(fused)))
                    fused = []
                pieces.append(word[begin:end])
            end = begin
        if fused:
            pieces.append("".join(reversed(fused)))
        pieces.reverse()
        return pieces


def _template(post: Any, added: dict[str, int], ids: dict[str, int]) -> tuple[list[int], list[int]]:
    """Special ids before and after a single sequence, from a TemplateProcessing post-processor."""
    if not post:
        return [], []
    head: list[int] = []
    tail: list[int] = []
    seen_sequence = False
    for item in post.get("single", []):
        if "Sequence" in item:
            seen_sequence = True
            continue
        name = item["SpecialToken"]["id"]
        token_ids = post.get("special_tokens", {}).get(name, {}).get("ids")
        if token_ids is None:
            token_ids = [added.get(name, ids.get(name, 0))]
        (tail if seen_sequence else head).extend(int(t) for t in token_ids)
    return head, tail
