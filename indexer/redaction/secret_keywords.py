"""Passwords and PINs given after a key word, in any language, and in Markdown tables.

The rule is one mechanism for every row of :mod:`memoryd.indexer.redaction.secret_words`:
a key word (``Passwort``, ``contraseña``, ``пароль``, ``비밀번호``, ``密碼``…), how clearly the
text then says that a value follows, and the value's shape
(:func:`memoryd.indexer.redaction.secret_checks.credential_shape`):

* **separator** — a ``:``, ``=``, ``|`` between spaces, a spaced dash, or a copula of the key
  word's own language ("ist", "est", "là", "هي"; a particle such as 는/是/は ending the key word),
  possibly after up to six qualifying words ("Passwort für das WLAN:", "mot de passe de ma boîte
  mail est"): letters with digits or symbols, 4-12 digits, or a quoted word are a credential;
* **direct** — the value right after the key word ("Kennwort Nas!Haus88", "şifrem Mail@5573"):
  letters with digits or symbols; digits only after a PIN word ("PIN 1397");
* **one or two words between** ("Mudei a senha para Banco$9902", "Сменил пароль на Bank$4410"):
  only a value with three character classes; after a PIN word, a number ending the clause
  ("PIN der Karte 4721") that is not a year.

Short Latin key words (``pin``, ``pw``, ``pass``, ``mdp``) are whole words only and verbs too
("pass it to the parser", "pin numpy to 1.26"): they need a separator, and a strong value when
words stand between; ``PIN``/``PUK`` in capitals are the noun, ``PASS:`` a test verdict. A value
followed by ``(``, ``[`` or ``.`` is code (``password = self._get(url)``).

A value shaped like a word of a sentence, a date, a count with its unit, a version or a
placeholder is never a credential, which is what lets "I forgot my password", "change the
password every three months" and "Passwort: liegt im Tresor" through in every language.

The rule is anchored at the key words found by substring search, not run as one regex over
the whole text: an alternation of a few hundred words tried at every position would cost
more than every other rule together.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from memoryd.indexer.redaction import secret_checks as checks
from memoryd.indexer.redaction.secret_words import copulas, copulas_by_word, login_words, password_words, pin_words

_LETTER = f"(?:[^\\W\\d_]|[{checks.COMBINING}])"  # with vowel signs: पासवर्ड, รหัสผ่าน are one word
#: Scripts written without spaces end a value: 密碼是Tw!8823abc，別說 keeps only the ASCII part.
_NO_SPACE_SCRIPTS = "\u0e00-\u0e7f\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_PLAIN = f"[^\\s\"'`“”‘’„«»‹›「」『』|<>()（）\\[\\]{{}}，。、；！？,;{_NO_SPACE_SCRIPTS}]{{1,64}}"
_UNSPACED = re.compile(f"[{_NO_SPACE_SCRIPTS}]")
_QUOTE_OPEN = "\"“„«「『'‘"
_QUOTED = "[\"“„«「『'‘]\\s?[^\"”“«»」』'’\\n]{1,64}?\\s?[\"”“»」』'’]"
_QUALIFIER = "(?!-)[^\\s:=|.,;!?。，、！？；：()（）]{1,24}"  # a word, not a command-line flag
_SPACED_SCRIPT = re.compile(r"[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0900-\u09ff\u0b80-\u0c7f]")


def _norm(word: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", word).lower().replace("\u200c", "").split())


_STEMS = frozenset(_norm(w).rstrip("*") for w in (*password_words(), *pin_words()) if w.endswith("*"))


def _is_short(word: str) -> bool:
    """A Latin word of four letters or fewer (``pin``, ``pw``, ``pass``, ``mdp``): also an ordinary word or verb.

    Stems (``hesl*``, for heslo/hesla) are not: they are only the start of a longer word."""
    return len(word) <= 4 and word.isascii() and word.isalpha() and word not in _STEMS


def _alternation(words: Iterable[str]) -> str:
    """Longest first; short words (:func:`_is_short`) only as whole words, unless a trailing ``*``
    marks a stem (``hesl*``); Latin phrases (``gate code``) not inside another word. Other words may
    follow letters: compounds (``Routerpasswort``) and attached particles (``וסיסמה``, ``وكلمة``)."""
    out = []
    for w in sorted({_norm(w) for w in words}, key=lambda w: (-len(w), w)):
        stem = w.endswith("*")
        w = w.rstrip("*")
        rx = r"\s+".join(re.escape(part) for part in w.split())
        if len(w) <= 4 and w.isascii() and w.isalpha() and not stem:
            rx = f"(?<!\\w){rx}(?!\\w)"
        elif " " in w and w[0].isascii():
            rx = f"(?<![^\\W\\d_]){rx}"  # "gate code", not the end of "surrogate code"
        out.append(rx)
    return "|".join(out)


def _copula_alternation() -> str:
    """Copulas of spaced scripts stand between spaces; 是/は/는 may touch the key word and the value."""
    spaced: list[str] = []
    touching: list[str] = []
    for w in sorted({_norm(w) for w in copulas()}, key=lambda w: (-len(w), w)):
        rx = r"\s+".join(re.escape(part) for part in w.split())
        (spaced if _SPACED_SCRIPT.match(w) else touching).append(rx)
    return (f"\\s+(?P<cop>{'|'.join(spaced)})(?:\\s*:)?(?=\\s)"
            f"|\\s*(?P<tcop>{'|'.join(touching)})(?:\\s*:)?")


_SEPARATOR = f"(?:\\s*(?:[:=]|->|=>)|\\s+\\|(?=\\s)|\\s+[-—–]{{1,2}}(?=\\s)|{_copula_alternation()})"
_GAP = "[ \\t]*(?:\\n[ \\t]*)?"
_KEY = (f"(?:(?P<pin>{_alternation(pin_words())})|(?P<pw>{_alternation(password_words())}))"
        f"(?P<tail>{_LETTER}{{0,20}})")
_VALUE = f"(?P<value>{_QUOTED}|{_PLAIN})"
KEYED = re.compile(_KEY)
#: How clearly the text says a value follows the key word, clearest first. A regex settles for the first
#: separator or word count that matches and never tries the next when the value there is rejected, so
#: the separator form is tried lazily first and then with each larger count of qualifying words.
_SEP_LAZY = re.compile(f"(?P<quals>(?:\\s+{_QUALIFIER}){{0,6}}?){_SEPARATOR}{_GAP}{_VALUE}")
_SEP_EXACT = tuple(re.compile(f"(?P<quals>(?:\\s+{_QUALIFIER}){{{n}}}){_SEPARATOR}{_GAP}{_VALUE}")
                   for n in range(7))
_OTHER_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx + _VALUE + after)) for name, rx, after in (
        ("direct", f"(?:[ \\t]+|(?<=[{_NO_SPACE_SCRIPTS}]))", ""),
        *((("far", f"(?:\\s+{_QUALIFIER}){{{n}}}\\s+", "")) for n in (1, 2)),
        *((("near_pin", f"(?:\\s+{_QUALIFIER}){{{n}}}\\s+", "(?=[ \\t]*(?:$|\\n|[.,;!?。，)]))")) for n in (1, 2, 3)),
    ))
#: Login words ("credentials", "Zugangsdaten", "identifiants") give a ``user / secret`` pair after a separator.
LOGIN = re.compile(
    f"(?:{_alternation(login_words())})(?P<tail>{_LETTER}{{0,20}})(?:\\s+{_QUALIFIER}){{0,6}}?{_SEPARATOR}{_GAP}"
    f"(?P<user>[\\w.@+-]{{1,40}})\\s*/\\s*(?P<value>{_PLAIN})")
_COPULAS = {_norm(w): frozenset(_norm(c) for c in cs) for w, cs in copulas_by_word().items()}
_TOUCHING_COPULAS = tuple(_norm(w) for w in copulas() if not _SPACED_SCRIPT.match(_norm(w)))
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_ACRONYMS = frozenset(("pin", "puk"))
#: A value followed by one of these is code: a call, an index, an attribute (the value was cut at it).
_CODE_AFTER = frozenset("([.")


class _Needles:
    """Finding where key words start, cheaply: most text holds none, and a chunk is scanned per rule.

    ``gates`` are the needles that hold no other needle (``pass`` stands for ``password``, ``passwort``…),
    indexed by first character: a text is searched only for gates whose first character it holds, and
    only when one is present are the needles behind it located.
    """

    def __init__(self, words: Iterable[str]) -> None:
        self.all = tuple(sorted({_norm(w).rstrip("*") for w in words}))
        gates = [n for n in self.all if not any(o != n and o in n for o in self.all)]
        self.behind = {g: tuple(n for n in self.all if g in n) for g in gates}
        self.by_first: dict[str, tuple[str, ...]] = {}
        for g in gates:
            self.by_first[g[0]] = (*self.by_first.get(g[0], ()), g)

    def present(self, low: str) -> list[str]:
        return [g for c in set(low).intersection(self.by_first) for g in self.by_first[c] if g in low]

    def any_present(self, low: str) -> bool:
        return any(g in low for c in set(low).intersection(self.by_first) for g in self.by_first[c])

    def starts(self, low: str) -> list[int]:
        """Every offset in ``low`` where a needle begins, in order (none when no gate is present)."""
        found: set[int] = set()
        for n in {n for g in self.present(low) for n in self.behind[g]}:
            i = low.find(n)
            while i >= 0:
                found.add(i)
                i = low.find(n, i + 1)
        return sorted(found)


PASSWORD_NEEDLES = _Needles((*password_words(), *pin_words()))
LOGIN_NEEDLES = _Needles(login_words())
_ALL_NEEDLES = _Needles((*password_words(), *pin_words(), *login_words()))


def _copula_fits(key: re.Match[str], m: re.Match[str]) -> bool:
    """A copula separates only after a key word of its language: "hasło to Kot123" is Polish, but
    "passphrase is limited to 1024" is not "to" as in Polish."""
    cop = m.group("cop")
    if cop is None:
        return True  # punctuation, or a particle touching the word (是, は, 는): no other language has those
    word = _norm(key.group("pin") or key.group("pw") or "")
    return _norm(cop) in _COPULAS.get(word, frozenset())


def _accepted(form: str, key: re.Match[str], m: re.Match[str], text: str) -> bool:
    """The value's shape is enough for how clearly the text said a value follows (module docstring).

    ``key`` and ``m`` matched the lowercased text; the shape is read from ``text`` as written (case is a class).
    """
    value = text[m.start("value"):m.end("value")]
    if text[m.end("value"):m.end("value") + 1] in _CODE_AFTER or _verdict(key, text):
        return False  # self._get_password(url), SHA224Password(), data["password"]; PASS: test_x
    shape = checks.credential_shape(value)
    if shape == checks.DIGITS and m.end() < len(text) and text[m.end()].isalpha():
        return False  # 2024年, 8位, 4桁: a number glued to its unit is a quantity
    is_pin = key.group("pin") is not None
    short = _is_short(_norm(key.group("pin") or key.group("pw") or "")) and not _acronym(key, text)
    if form == "sep":
        if not _copula_fits(key, m):
            return False
        if short and m.group("quals"):  # "pin the version to 1234", "pass to :py:class:": a verb and its object
            return shape >= checks.STRONG
        return shape >= checks.DIGITS or (value[0] in _QUOTE_OPEN and _quoted_word(value))
    if form == "near_pin":
        return is_pin and not short and shape == checks.DIGITS and not _YEAR.match(value.strip(".,;!?"))
    if form == "far":
        return shape >= checks.STRONG and not short
    if key.group("tail").endswith(_TOUCHING_COPULAS):  # 비밀번호는 7720, 密碼是 Tw!8823
        return shape >= checks.DIGITS
    if shape == checks.DIGITS:
        return is_pin  # PIN 1397; after a password word a bare number is as often a year or a count
    return shape >= (checks.STRONG if short else checks.MIXED)  # "pass it to the parser", "pin numpy2": verbs


def _verdict(key: re.Match[str], text: str) -> bool:
    """``PASS`` in capitals is a test runner's verdict (``PASS: test_login``), not a password."""
    return text[key.start():key.start("tail")] == "PASS"


def _acronym(key: re.Match[str], text: str) -> bool:
    """``PIN`` or ``PUK`` in capitals is the noun, whatever follows; ``pin`` may be the verb (pin numpy to 1.26)."""
    word = text[key.start():key.start("tail")]
    return word.isupper() and word.lower() in _ACRONYMS


def _quoted_word(value: str) -> bool:
    """A quoted single word given as the value (« lavande », "sunflower"), not a quoted phrase."""
    inner = value.strip("\"“”„«»「」『』'‘’ ")
    return (len(inner) >= 4 and inner.isalpha() and not _UNSPACED.search(inner)  # 「请输入密码」 is a phrase
            and not checks.PLACEHOLDER.match(inner) and not checks.is_prose_word(inner))


def present(low: str) -> bool:
    """Whether ``low`` holds any key word at all (the rule's cheap gate)."""
    return _ALL_NEEDLES.any_present(low)


def _value_after(key: re.Match[str], low: str, text: str) -> re.Match[str] | None:
    """The first form (clearest first) whose value after ``key`` is accepted."""
    pos = key.end()
    m = _SEP_LAZY.match(low, pos)
    if m is not None:
        if _accepted("sep", key, m, text):
            return m
        for pattern in _SEP_EXACT[len(m.group("quals").split()) + 1:]:
            m = pattern.match(low, pos)
            if m is not None and _accepted("sep", key, m, text):
                return m
    for form, pattern in _OTHER_FORMS:
        if form == "near_pin" and key.group("pin") is None:
            break
        m = pattern.match(low, pos)
        if m is not None and _accepted(form, key, m, text):
            return m
    return None


def keyed_values(text: str, low: str) -> list[tuple[int, int]]:
    """Spans of passwords and PINs given after a key word (``low``: ``text`` lowercased, same offsets)."""
    spans: list[tuple[int, int]] = []
    end = -1
    for i in PASSWORD_NEEDLES.starts(low):
        key = KEYED.match(low, i) if i >= end else None
        m = _value_after(key, low, text) if key is not None else None
        if m is not None:
            spans.append(m.span("value"))
            end = m.end()
    end = -1
    for i in LOGIN_NEEDLES.starts(low):
        m = LOGIN.match(low, i) if i >= end else None
        if m is not None and checks.credential_shape(text[m.start("value"):m.end("value")]) >= checks.MIXED:
            spans.append(m.span("value"))
            end = m.end()
    return spans


# --- Markdown tables -----------------------------------------------------------------------------------------------

_DELIMITER = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{2,}:?[ \t]*\|)+(?:[ \t]*:?-{2,}:?[ \t]*)?[ \t]*$")
_KEY_CELL = re.compile(f"(?:{_alternation((*password_words(), *pin_words()))})")
TABLE_GATE = re.compile(r"\|[ \t]*:?-{2,}|-{2,}:?[ \t]*\|")


def _cells(line: str, offset: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each cell's stripped text in a table row (offsets into the whole text)."""
    body_start = len(line) - len(line.lstrip())
    inner = line[body_start:]
    start = offset + body_start
    if inner.startswith("|"):
        inner, start = inner[1:], start + 1
    inner = inner.rstrip()
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    out: list[tuple[int, int]] = []
    pos = 0
    for part in re.split(r"(?<!\\)\|", inner):
        lead = len(part) - len(part.lstrip())
        out.append((start + pos + lead, start + pos + len(part.rstrip())))
        pos += len(part) + 1
    return out


def table_values(text: str, low: str = "") -> list[tuple[int, int]]:
    """Cells under a password/PIN column header ("| user | password |") holding a credential-shaped value."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    spans: list[tuple[int, int]] = []
    i = 1
    while i < len(lines):
        if not _DELIMITER.match(lines[i]) or "|" not in lines[i - 1]:
            i += 1
            continue
        header = _cells(lines[i - 1], offsets[i - 1])
        columns = [c for c, (s, e) in enumerate(header) if _KEY_CELL.search(text[s:e].lower())]
        i += 1
        while i < len(lines) and "|" in lines[i] and not _DELIMITER.match(lines[i]):  # each row read once
            row = _cells(lines[i], offsets[i])
            spans += [row[c] for c in columns if c < len(row) and _cell_is_credential(text[row[c][0]:row[c][1]])]
            i += 1
    return spans


def _cell_is_credential(cell: str) -> bool:
    return bool(cell) and " " not in cell.strip("`") and checks.credential_shape(cell.strip("`")) >= checks.DIGITS
