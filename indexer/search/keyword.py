"""Text analysis for the keyword leg: chunk text → FTS5 terms, user query → MATCH.

The ``chunks_fts`` table is ``fts5(terms, tokenize="unicode61 remove_diacritics 2")``
and indexes only the whitespace-separated terms made here, because FTS5's own
tokenizers cannot stem English, drop a reviewed stop list, or find Chinese words
without spaces. Documents and queries go through the very same transformation:

- Markdown noise is dropped: link and image URLs (their text is kept), HTML
  tags and entities, list markers and task boxes; ``**``, ``#``, backticks and
  the like are punctuation anyway. Bare URLs keep their words (domain and path
  are useful keywords); ``http``/``https`` are stop words.
- Other words: NFKC, casefold, then Snowball English stemming. A word holding
  a digit is kept verbatim, so markers such as ``zebracorn123456789`` match
  exactly and never a near miss. Words joined by ``.``, ``-`` or ``_``
  (``v1.2``, ``gpt-4``, ``snake_case``) stay one term, each part normalised on
  its own; unicode61 splits the term into adjacent tokens, so the compound is
  matched as a phrase and each part still matches alone.
- Apostrophes: ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m`` are dropped
  (``Caroline's`` → ``carolin``); ``n't`` becomes the base word plus ``not``.
- Stop words: a compact English list. Negations (``no``, ``not``, ``nor``,
  ``never``) are kept: memory facts hinge on them ("does not eat meat") and
  BM25's IDF already keeps a common word's weight low.
- CJK (Han, kana, Hangul), no segmenter: a document gets every character and
  every overlapping bigram of each run; a query run of 1 character gives that
  character, of 2 the bigram, of 3 or more its bigrams. So 1-, 2- and longer
  Chinese words all match, and BM25 ranks chunks holding more bigrams higher.
- A query is the OR of its distinct terms (at most ``MAX_QUERY_TERMS``), each
  a double-quoted FTS5 string, so no input can form FTS5 syntax.

Pure and thread-safe: the only state is bounded LRU memo caches (Snowball costs
~50 µs a word, a memo hit ~0.3 µs) and one stemmer behind a lock, since Snowball
stemmer objects keep per-call state.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache

import snowballstemmer

FTS5_TOKENIZE = "unicode61 remove_diacritics 2"
#: Part of the index identity: bump it when the analysis changes, so every chunk's terms are rebuilt.
ANALYZER_VERSION = "1"
"""The tokenizer option the ``chunks_fts`` table must use for these terms."""

MAX_QUERY_TERMS = 256
"""Distinct terms kept from one query. A Chinese sentence yields a term per character
pair, so a pasted dialogue easily has ~200: a cap of 64 cost MADial-zh a third of its R@1,
while query time grows with the cap (every term's postings are read)."""

MAX_QUERY_CHARS = 65_536
"""Characters of a query that are analysed (its end): a bound on the work of one query."""

# Reviewed from the usual English lists; the negations no/not/nor/neither/never are left out on
# purpose (see the module docstring), and so is "may" (a month).
_STOP_WORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
        "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "either",
        "etc", "every", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
        "here", "hers", "herself", "him", "himself", "his", "how", "however", "i", "if", "in", "into",
        "is", "it", "its", "itself", "just", "me", "might", "more", "most", "must", "my", "myself",
        "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours",
        "ourselves", "out", "over", "own", "per", "same", "shall", "she", "should", "so", "some",
        "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
        "these", "they", "this", "those", "through", "thus", "to", "too", "under", "until", "up",
        "upon", "very", "was", "we", "were", "what", "whatever", "when", "whenever", "where", "whereas",
        "whether", "which", "while", "who", "whoever", "whom", "whose", "why", "will", "with", "within",
        "would", "yet", "you", "your", "yours", "yourself", "yourselves", "d", "ll", "m", "re", "s",
        "t", "ve", "http", "https",
    ]
)
_NEGATIONS = frozenset(
    [
        "aint", "arent", "cannot", "cant", "couldnt", "didnt", "doesnt", "dont", "hadnt", "hasnt",
        "havent", "isnt", "mightnt", "mustnt", "neednt", "shant", "shouldnt", "wasnt", "werent", "wont",
        "wouldnt",
    ]
)
# "can't" loses "n't" to leave "ca"; these bases are the words they stand for.
_NT_BASES = {"ca": "can", "wo": "will", "sha": "shall", "ai": ""}

# Han, kana and Hangul letters; CJK punctuation and the katakana middle dot are left out
# so that they split runs.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3041-\u3096\u3099-\u309f\u30a1-\u30fa"
    "\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7a3\ud7b0-\ud7ff\uf900-\ufaff\U00020000-\U0003ffff"
)
# The BMP blocks that hold combining marks outside CJK (tests check none is missed).
_MARK_BLOCKS = ((0x0300, 0x1DFF), (0x20D0, 0x20FF), (0x2CEF, 0x2DFF), (0xA66F, 0xABFF), (0xFB1E, 0xFE2F))


def _mark_class() -> str:
    """Regex class body of the combining marks, which Python's ``\\w`` does not match.

    Without them an Indic or Arabic word would fall apart at every vowel sign.
    """
    marks = [
        c for lo, hi in _MARK_BLOCKS for c in range(lo, hi + 1) if unicodedata.category(chr(c))[0] == "M"
    ]
    return "".join(re.escape(chr(c)) for c in marks)


_MARKS = _mark_class()
_LETTER = rf"[^\W_{_CJK}]"
_PIECE = rf"{_LETTER}+(?:[{_MARKS}]{_LETTER}*)*"
# Two stages, because one precise regex over a whole chunk costs twice as much: a cheap
# single-class scan cuts the text at characters no term can hold, then each (mostly
# repeated, so memoised) piece gets the precise split into CJK runs and words.
_RAW = re.compile(rf"[\w'\u2019.\-{_MARKS}{_CJK}]+")
_TOKEN = re.compile(rf"([{_CJK}]+)|({_PIECE}(?:['._\-]{_PIECE})*)")
_CONNECTOR = re.compile(r"([._\-])")
_CONTRACTION = re.compile(r"(.+?)'(?:s|re|ve|ll|d|m)")

# Titles are bounded by quotes and URLs by whitespace, so no input makes these scan far.
_LINK_URL = re.compile(r"\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_HTML = re.compile(
    r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"  # a tag
    r"|&(?:[A-Za-z]{2,8}|#\d{1,7}|#x[0-9A-Fa-f]{1,6});"  # an entity
)
# Anchored on a literal "\n" rather than a MULTILINE "^", which the regex engine tries at every
# position (a quarter of the analysis time).
_LIST_MARKER = re.compile(r"\n[ \t>]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_MEMO_MAX_CHARS = 40  # longer pieces (CJK clauses, hashes, blobs) rarely repeat; keep words cached

_RunTerms = Callable[[str], list[str]]

_STEMMER = snowballstemmer.stemmer("english")
_STEM_LOCK = threading.Lock()


def document_terms(text: str) -> str:
    """The string to store in ``chunks_fts.terms`` for ``text`` (a chunk's Markdown).

    Terms are separated by single spaces and repeat as often as they occur, so
    that BM25 sees true term frequencies. Any ``str`` is accepted (NUL bytes and
    lone surrogates are dropped); the result may be empty.
    """
    return " ".join(
        [
            term
            for raw in _RAW.findall(_strip_markdown(text))
            for term in (
                _document_piece_terms(raw)
                if len(raw) <= _MEMO_MAX_CHARS
                else _piece_terms(raw, _document_run_terms)
            )
        ]
    )


def query_terms(query: str) -> list[str]:
    """The analysed terms of ``query``: distinct, in first-seen order, at most ``MAX_QUERY_TERMS``.

    Past the cap the terms seen last win: a long query is most often a pasted
    conversation, whose latest turn matters most. Only the last
    ``MAX_QUERY_CHARS`` characters are read, bounding the work per query.
    """
    found = [
        term
        for raw in _RAW.findall(_strip_markdown(query[-MAX_QUERY_CHARS:]))
        for term in _piece_terms(raw, _query_run_terms)
    ]
    distinct = list(dict.fromkeys(found))
    if len(distinct) <= MAX_QUERY_TERMS:
        return distinct
    latest = set(list(dict.fromkeys(reversed(found)))[:MAX_QUERY_TERMS])
    return [term for term in distinct if term in latest]


def match_any(terms: Sequence[str]) -> str:
    """The FTS5 ``MATCH`` expression for the OR of ``terms``, each quoted so no input forms FTS5 syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _strip_markdown(text: str) -> str:
    """``text`` with link URLs, HTML tags and entities, list markers and task boxes blanked out."""
    if "](" in text:
        text = _LINK_URL.sub("]", text)
    if "<" in text or "&" in text:
        text = _HTML.sub(" ", text)
    return _LIST_MARKER.sub("\n", "\n" + text)


@lru_cache(maxsize=1 << 15)
def _document_piece_terms(raw: str) -> tuple[str, ...]:
    return tuple(_piece_terms(raw, _document_run_terms))


def _piece_terms(raw: str, run_terms: _RunTerms) -> list[str]:
    """Terms of one piece of text cut out by ``_RAW``; CJK runs expand through ``run_terms``."""
    out: list[str] = []
    for cjk, word in _TOKEN.findall(_fold(raw)):
        if not word:
            out.extend(run_terms(cjk))
        elif len(word) <= _MEMO_MAX_CHARS:
            out.extend(_analyse_word(word))
        else:
            out.extend(_analyse_word.__wrapped__(word))
    return out


def _fold(raw: str) -> str:
    """NFKC and casefold (fullwidth and compatibility letters become plain lowercase)."""
    if raw.isascii():
        return raw.lower()
    text = unicodedata.normalize("NFKC", raw).casefold()
    # Casefolding can un-normalise (a letter with a combining mark); rare, so check first.
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text.replace("\u2019", "'").replace("\u02bc", "'")


def _document_run_terms(run: str) -> list[str]:
    return [*run, *(run[i : i + 2] for i in range(len(run) - 1))]


def _query_run_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@lru_cache(maxsize=1 << 14)
def _analyse_word(word: str) -> tuple[str, ...]:
    """Terms for one casefolded word token (letters/digits, maybe joined by ``'._-``)."""
    if "'" in word:
        return _analyse_apostrophes(word)
    if word in _NEGATIONS:
        return ("not",)
    if not _CONNECTOR.search(word):
        return () if word in _STOP_WORDS else (_normalise_part(word),)
    pieces = _CONNECTOR.split(word)  # part, connector, part, ...
    pieces[::2] = [_normalise_part(part) for part in pieces[::2]]
    return ("".join(pieces),)


def _analyse_apostrophes(word: str) -> tuple[str, ...]:
    if word.endswith("n't"):
        base = _NT_BASES.get(word[:-3], word[:-3])
        return (*_analyse_word(base), "not") if base else ("not",)
    match = _CONTRACTION.fullmatch(word)
    if match:
        word = match.group(1)
    return _analyse_word(word.replace("'", ""))


@lru_cache(maxsize=1 << 14)
def _normalise_part(part: str) -> str:
    """Stem an alphabetic part; keep one holding a digit (an id, code or number) verbatim."""
    if not part.isalpha():
        return part
    with _STEM_LOCK:
        return str(_STEMMER.stemWord(part))
