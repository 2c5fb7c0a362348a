"""Lexical and structural features of two memory entries: what cosine cannot see.

Embedding cosine says "same topic"; it does not say "same value". A conflicting
update ("prefers Vim" → "prefers Neovim", "every Tuesday" → "every Thursday",
"drinks coffee" → "no longer drinks coffee") scores as high as a paraphrase.
This module extracts cheap signals that tell them apart, in English and
Chinese, without a parser:

* **values** — numbers (digits, English number words, Chinese numerals before a
  measure word), weekdays and months (canonical across languages: ``周四`` =
  ``Thursday``), versions, names and identifiers (capitalised, mixed-case or
  with digits), and Latin words inside Chinese text;
* **swap** — the two texts are the same frame with one or two content slots
  exchanged ("prefers *tea*" → "prefers *coffee*", "经理是*陈明*" → "经理是*赵磊*");
  a slot exchanged for a synonym ("*prefers* tea" → "*likes* tea", "*喜欢*" → "*偏爱*";
  :mod:`memoryd.indexer.write.paraphrase`) is a rewording, not a changed value;
* **negation** — ``not``/``never``/``no longer`` …, ``不``/``没``/``别`` … (the common
  ``不``-words that negate nothing are ignored);
* **update cues** in the new text only — ``now``, ``switched``, ``改为``, ``换成`` …;
* **kind** — ``latin``, ``cjk`` or ``cross``: with multilingual models cosine
  scales differ per kind, so thresholds are chosen per kind;
* **agreement** — what the two texts literally share: the overlap of their
  content words (Latin words minus stop words, crudely stemmed; Chinese
  character bigrams) and the values of one side missing from the other. Cosine
  alone cannot tell "same fact" from "same topic" (an unrelated Chinese pair
  scores 0.85–0.90), so a reinforce or a replace also needs these.

Pure and deterministic; see ``tests/data/calibration.jsonl`` for what it is tuned on.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher

from memoryd.indexer.markdown.mdlines import fold
from memoryd.indexer.write import stopwords
from memoryd.indexer.write.paraphrase import synonymous

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{CJK}]")
#: A letter of any alphabet but the CJK ideographs ("ü", "é", "ñ" are letters: German, French, Spanish words
#: stay whole), and what may follow it inside a word.
_LETTER = f"[^\\W\\d_{CJK}]"
_WORD_CHAR = f"(?:[^\\W{CJK}]|[+#])"
_WORD = re.compile(f"{_LETTER}(?:{_WORD_CHAR}|\\.)*{_WORD_CHAR}|{_LETTER}")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_SEQ_TOKEN = re.compile(f"{_LETTER}{_WORD_CHAR}*|\\d+(?:[.:]\\d+)*|[{CJK}]")



def _words(text: str) -> list[str]:
    return text.split()


_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    _words("zero one two three four five six seven eight nine ten eleven twelve"))}
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_NUMERAL_CHARS = "零一二两三四五六七八九十百"
_ZH_NUMERAL = re.compile(f"([{_ZH_NUMERAL_CHARS}]+)(?=[个位次天周月年日号人台点分秒小倍遍条项名本份岁])")
_MONTHS = {m: str(i) for i, m in enumerate(
    _words("january february march april may june july august september october november december"), 1)}
_WEEKDAYS = {"monday": "mon", "tuesday": "tue", "wednesday": "wed", "thursday": "thu", "friday": "fri",
             "saturday": "sat", "sunday": "sun"}
#: A title in book-title marks or corner quotes (《三体》, 「千と千尋」): a name, whatever its script.
_TITLE = re.compile(r"[《「『]([^》」』]{1,40})[》」』]")
_ZH_WEEKDAY = re.compile(r"(?:周|星期|礼拜)([一二三四五六日天])")
_ZH_WEEKDAY_MAP = dict(zip("一二三四五六日天", ["mon", "tue", "wed", "thu", "fri", "sat", "sun", "sun"], strict=True))

# Capitalised words that start sentences or are plain English, never values.
_COMMON_CAPITALISED = frozenset(_words("""
a an the this that these those it its we our us i my me you your he she his her they their them user users
team project always never do don't please use when if in on at for to of by with from and or but all every
each no not any some there here what which who how after before during new old current now also only
"""))
# Words and characters too light to make a "swap" (in/on, 的/了 …).
_STOP_EN = frozenset(_words("""
a an the this that these those is are was were be been being am do does did to of in on at by for with from
and or but as it its their they them we our us you your he she his her i my me so than then there here
has have had will would should can could may might must just very really also only any each every all s
"""))
_STOP_ZH = frozenset("的了在是把被和与及都也就才会要使之个着过吧呢啊吗地得所以而且并")

_NEGATION_EN = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|cannot|can't|won't|isn't|aren't|wasn't|weren't|don't|doesn't"
    r"|didn't|shouldn't|mustn't|no\s+longer|stop(?:ped)?)\b", re.IGNORECASE)
_NEGATION_ZH = re.compile(r"不再|不|没|别|无需|勿|未|停止|禁止")
_NOT_NEGATION_ZH = re.compile(r"不同|不错|不过|不断|不少|不仅|不管|不久|不论|不如|不得不|要不|无论")
_UPDATE_EN = re.compile(
    r"\b(?:now|no\s+longer|any\s?more|switched|switching|changed|moved|instead|upgraded|downgraded|updated"
    r"|replaced|migrated|became|from\s+now\s+on|has\s+become|going\s+forward|postponed|rescheduled|pushed\s+(?:back\s+)?to"
    r"|delayed|brought\s+forward|renamed|stopped|quit|gave\s+up|rather\s+than|instead\s+of)\b", re.IGNORECASE)
_UPDATE_ZH = re.compile(r"改为|改成|改由|改用|改喝|改到|换成|换为|换了|不再|现在|已经|已升级|升级到|升级为|调整为"
                        r"|变为|变成|搬到|迁移到|从此|今后|以后|延期|推迟|提前到|戒掉|戒了|改名")

#: Update cues and negations of Spanish, German, French and Portuguese (memoryd.indexer.write.predicates).
_UPDATE_OTHER = re.compile(
    r"\b(?:ahora|ya\s+no|en\s+lugar\s+de|en\s+vez\s+de|desde\s+ahora|cambió|se\s+mudó|pasó\s+a|jetzt|nun|nicht\s+mehr"
    r"|stattdessen|gewechselt|umgezogen|geändert|ab\s+sofort|neuerdings|désormais|maintenant|ne\s+\w+\s+plus"
    r"|à\s+la\s+place|a\s+changé|a\s+déménagé|est\s+passée?|agora|não\s+\w+\s+mais|em\s+vez\s+de|mudou"
    r"|passou\s+a|a\s+partir\s+de\s+agora|pospuesto|aplazado|aplazada|retrasado|adelantado|dejó\s+de|verschoben|verlegt"
    r"|aufgehört|repoussée?|reportée?|avancée?|arrêté|remarcad[oa]|adiad[oa]|parou\s+de|deixou\s+de)\b", re.IGNORECASE)
_NEGATION_OTHER = re.compile(r"\b(?:nicht|kein|keine|keinen|nie|niemals|jamais|não|nunca|ya\s+no)\b"
                             r"|\bn(?:e\s+|['’])\S+\s+(?:pas|plus|jamais)\b",
                             re.IGNORECASE)

@dataclass(frozen=True)
class Features:
    """The lexical facts about one (existing, new) pair that the dedup rule uses."""

    kind: str  # "latin" | "cjk" | "cross"
    same_text: bool  # equal after folding case, width, punctuation and spaces
    values_old: frozenset[str]
    values_new: frozenset[str]
    swap: bool
    negation_flip: bool
    update_cue: bool
    overlap: float = 0.0  # shared content tokens / the smaller side's (0..1)
    missing_old: frozenset[str] = frozenset()  # values of the old text the new one does not mention
    missing_new: frozenset[str] = frozenset()  # values of the new text the old one does not mention
    residue: int = 0  # the longest slot each side fills with different content tokens (see :func:`residue`)

    @property
    def entities_agree(self) -> bool:
        """Every value named on either side is named on the other (an empty side agrees with nothing)."""
        return not self.missing_old and not self.missing_new

    @property
    def substituted(self) -> bool:
        """Each side has a value the other lacks: a value was exchanged (Vim → Neovim, 45 → 60)."""
        return bool(self.values_old - self.values_new) and bool(self.values_new - self.values_old)

    @property
    def changed(self) -> bool:
        """Some signal says the new entry updates the old one rather than restating it."""
        return self.substituted or self.swap or self.negation_flip or self.update_cue

    def signals(self) -> list[str]:
        """The names of the signals that fired (for the decision's reason)."""
        names = ("substituted", "swap", "negation_flip", "update_cue")
        return [n for n in names if getattr(self, n)]


def script_of(text: str) -> str:
    """``cjk`` when the text has at least as many CJK characters as Latin words, else ``latin``.

    A CJK character carries about as much as a short word, so "前端部署在 Cloudflare
    Pages 上" is Chinese and "The user's name is 张伟" is English.
    """
    cjk = len(_CJK_CHAR.findall(text))
    return "cjk" if cjk and cjk >= len(_WORD.findall(text)) else "latin"


def pair_kind(old: str, new: str) -> str:
    a, b = script_of(old), script_of(new)
    return a if a == b else "cross"


@functools.lru_cache(maxsize=4096)
def values(text: str) -> frozenset[str]:
    """Canonical values named in ``text`` (see the module docstring). Cached: one write compares its text
    with every candidate, and an import or a dry run compares the same entries again and again."""
    text = unicodedata.normalize("NFKC", text)
    out = {_canon_number(n) for n in _NUMBER.findall(text)}
    out |= {str(_zh_number(m.group(1))) for m in _ZH_NUMERAL.finditer(text)}
    out |= {"weekday:" + _ZH_WEEKDAY_MAP[m.group(1)] for m in _ZH_WEEKDAY.finditer(text)}
    out |= {"title:" + fold(m.group(1)) for m in _TITLE.finditer(text) if fold(m.group(1))}
    in_cjk = script_of(text) == "cjk"
    words = list(_WORD.finditer(text))
    for i, m in enumerate(words):
        nxt = words[i + 1].group() if i + 1 < len(words) else ""
        out |= _word_values(m.group(), text[m.end() : m.end() + 2], first=i == 0 or _starts_sentence(text, m.start()),
                            next_capitalised=nxt[:1].isupper(), in_cjk=in_cjk)
    return frozenset(out)


def _starts_sentence(text: str, pos: int) -> bool:
    before = text[:pos].rstrip()
    return not before or before[-1] in ".!?;:。！？；：\n"


def _word_values(word: str, after: str, *, first: bool, next_capitalised: bool, in_cjk: bool) -> set[str]:
    low = word.lower().rstrip(".")
    base = low[:-1] if low.endswith("s") and low[:-1] in _WEEKDAYS else low
    if base in _WEEKDAYS:
        return {"weekday:" + _WEEKDAYS[base]}
    if low in _MONTHS and (word[0].isupper() or in_cjk):
        return {_MONTHS[low]}
    if low in _NUMBER_WORDS:
        return {_NUMBER_WORDS[low]}
    if in_cjk:
        return {low}
    marked = any(c.isupper() for c in word[1:]) or any(c.isdigit() for c in word)
    if marked:
        return {low}
    if not word[0].isupper() or low in _COMMON_CAPITALISED:
        return set()
    # A capitalised sentence opener is usually a plain word ("Standups are ..."), unless it
    # starts a multi-word name ("Alice Chen") or is possessive ("Bob's").
    if first and not (next_capitalised or after[:1] in ("'", "’")):
        return set()
    return {low}


def _canon_number(n: str) -> str:
    if ":" in n:  # a time: "9:00" is "9", "9:30" stays
        h, _, m = n.partition(":")
        return str(int(h)) if m.strip("0:") == "" else f"{int(h)}:{m}"
    return n.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+", n) else n


def _zh_number(s: str) -> int:
    """Chinese numerals up to the hundreds (十二 = 12, 二十 = 20, 一百零五 = 105)."""
    total, digit = 0, 0
    for ch in s:
        if ch in "百十":
            total += (digit or 1) * (100 if ch == "百" else 10)
            digit = 0
        else:
            digit = _ZH_DIGITS.get(ch, 0)
    return total + digit


def seq_tokens(text: str) -> list[str]:
    """Latin words (possessive dropped), numbers and single CJK characters, in order, lowercase."""
    return list(_seq_tokens(text))


@functools.lru_cache(maxsize=4096)
def _seq_tokens(text: str) -> tuple[str, ...]:
    text = re.sub(r"['’]s\b", "", unicodedata.normalize("NFKC", text))
    return tuple(t.lower() for t in _SEQ_TOKEN.findall(text))


def _light(tokens: list[str]) -> bool:
    return all(t in _STOP_EN or t in _STOP_ZH for t in tokens)


def _numeric_equal(a: list[str], b: list[str]) -> bool:
    """``三`` and ``3``, ``十二`` and ``12``: the same number written two ways is not a swap."""
    def num(tokens: list[str]) -> int | None:
        s = "".join(tokens)
        if s.isdigit():
            return int(s)
        return _zh_number(s) if s and all(c in _ZH_NUMERAL_CHARS for c in s) else None
    na, nb = num(a), num(b)
    return na is not None and na == nb


def swapped(old: str, new: str, min_frame: float = 0.6, max_slots: int = 2) -> bool:
    """Same frame (≥ ``min_frame`` of the tokens aligned) with 1..``max_slots`` content slots exchanged,
    at least one of them for a word of another sense: a slot exchanged for a synonym
    (:mod:`memoryd.indexer.write.paraphrase`: "prefers" → "likes", "喜欢" → "偏爱") restates, it changes
    no value, but still counts toward ``max_slots`` (so the table never turns a reworded sentence into a swap).
    """
    a, b = seq_tokens(old), seq_tokens(new)
    if not a or not b:
        return False
    sm = SequenceMatcher(a=a, b=b, autojunk=False)
    matched = sum(size for _, _, size in sm.get_matching_blocks())
    slots = synonyms = 0
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "replace":
            continue
        sa, sb = a[i1:i2], b[j1:j2]
        if _light(sa) or _light(sb) or _numeric_equal(sa, sb):
            continue
        if _same_sense(a, b, i1, i2, j1, j2):
            synonyms += 1
            matched += min(len(sa), len(sb))  # a synonym is part of the frame
        else:
            slots += 1
    if matched / max(len(a), len(b)) < min_frame:
        return False
    return slots >= 1 and slots + synonyms <= max_slots


_STOP = _STOP_EN | _STOP_ZH
_CONTEXT = 2  # equal tokens either side a slot may borrow to complete a word ("喜[爱]" / "喜[欢]")


def _same_sense(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> bool:
    """Whether slot ``a[i1:i2]`` / ``b[j1:j2]`` exchanges synonyms, alone or with up to :data:`_CONTEXT`
    equal neighbours on each side: a character alignment may split a Chinese word ("喜爱" / "喜欢"
    differ in one character)."""
    for left in range(_CONTEXT + 1):
        if i1 - left < 0 or j1 - left < 0 or a[i1 - left : i1] != b[j1 - left : j1]:
            break
        for right in range(_CONTEXT + 1):
            if i2 + right > len(a) or j2 + right > len(b) or a[i2 : i2 + right] != b[j2 : j2 + right]:
                break
            if synonymous(a[i1 - left : i2 + right], b[j1 - left : j2 + right], _STOP):
                return True
    return False


def residue(old: str, new: str) -> int:
    """The longest run of content tokens that both texts fill differently in the same place.

    "用户每天早上*都要喝一杯咖啡*" / "用户每天早上*上班前会去散步*" share a frame
    and a lot of words, yet say different things: 5 characters each side are
    exchanged. Paraphrases reword in short pieces (≤ 2 characters, ≤ 4 words on
    the labelled sets), so a long exchanged run is evidence of another fact.
    Counted in :func:`seq_tokens` (a Chinese character or a Latin word), stop words skipped; a
    slot exchanged for a synonym (:mod:`memoryd.indexer.write.paraphrase`) counts 0.
    """
    a, b = seq_tokens(old), seq_tokens(new)
    longest = 0
    for op, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "replace" and not _same_sense(a, b, i1, i2, j1, j2):
            na = sum(not _light([t]) for t in a[i1:i2])
            nb = sum(not _light([t]) for t in b[j1:j2])
            longest = max(longest, min(na, nb))
    return longest


def negated(text: str) -> bool:
    if _NEGATION_EN.search(text) or _NEGATION_OTHER.search(text):
        return True
    return bool(_NEGATION_ZH.search(_NOT_NEGATION_ZH.sub("", text)))


def update_cue(text: str) -> bool:
    return bool(_UPDATE_EN.search(text) or _UPDATE_ZH.search(text) or _UPDATE_OTHER.search(text))


_CONTENT_WORD = re.compile(f"{_LETTER}(?:{_WORD_CHAR}|[.-])*{_WORD_CHAR}|{_LETTER}|\\d+(?:[.:]\\d+)*")
_CJK_RUN = re.compile(f"[{CJK}]+")
_SUFFIXES = ("ing", "ed", "es", "s")


@functools.lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    """A crude suffix strip, enough for "deploys"/"deployed"/"deploying" to meet."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stop_words_of(words: list[str]) -> frozenset[str]:
    """English stop words, plus those of the Spanish, German, French or Portuguese list when ``words``
    use that language's more (:mod:`memoryd.indexer.write.stopwords`)."""
    return _STOP_EN | stopwords.OTHER.get(stopwords.language_of(words, _STOP_EN), frozenset())


def content_tokens(text: str) -> frozenset[str]:
    """Stemmed Latin content words and numbers, and Chinese character bigrams without stop characters;
    a word with letters beyond ASCII ("läuft", "catalán") is one word."""
    text = unicodedata.normalize("NFKC", text).lower()
    words = _CONTENT_WORD.findall(text)
    stop = stop_words_of(words)
    out = {_stem(w) for w in words if w not in stop}
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            out.add(run)
        out |= {a + b for a, b in itertools.pairwise(run) if a not in _STOP_ZH and b not in _STOP_ZH}
    return frozenset(out)


def content_sequence(text: str) -> tuple[str, ...]:
    """The content words of ``text`` in order (stemmed, stop words and punctuation dropped; Chinese as
    single characters less stop characters): two entries with the same sequence say the same thing."""
    toks = seq_tokens(text)
    stop = stop_words_of(toks) | _STOP_ZH
    return tuple(_stem(t) for t in toks if t not in stop)


def overlap(old: str, new: str) -> float:
    """Shared content tokens over the smaller side's count: 1.0 when one text's words are all in the other."""
    a, b = content_tokens(old), content_tokens(new)
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def missing_values(text: str, vals: frozenset[str], other: str) -> frozenset[str]:
    """The values of ``text`` that ``other`` neither names as values nor spells out literally.

    Literal presence counts because :func:`values` skips a capitalised sentence
    opener ("Go files are …"), which is still the same name.
    """
    words = set(_CONTENT_WORD.findall(unicodedata.normalize("NFKC", other).lower()))
    other_vals = values(other)
    return frozenset(v for v in vals if v not in other_vals and v not in words)


def features(old: str, new: str) -> Features:
    """The features of ``new`` (a memory being written) against ``old`` (an existing entry)."""
    v_old, v_new = values(old), values(new)
    return Features(
        kind=pair_kind(old, new),
        same_text=fold(old) == fold(new),
        values_old=v_old,
        values_new=v_new,
        swap=swapped(old, new),
        negation_flip=negated(old) != negated(new),
        update_cue=update_cue(new) and not update_cue(old),
        overlap=overlap(old, new),
        missing_old=missing_values(old, v_old, new),
        missing_new=missing_values(new, v_new, old),
        residue=residue(old, new),
    )
