"""Latin look-alikes folded to Latin, for the privacy filter's matching only.

A key name spelled with Cyrillic or Greek letters that look Latin
(``раssword=…`` with Cyrillic ``р`` and ``а``, ``ѕеcret``, ``кеу``) reads as
"password" to a person and to many tools, but not to an ASCII pattern. This
module folds such letters to the Latin letter they imitate — a small subset of
Unicode's confusables data (UTS #39) covering the Cyrillic and Greek letters
that pass for Latin ones — so the rules see ``password``.

Only words that are *disguised* are folded: a word holding a Latin letter as
well as a look-alike (mixed script), or made of look-alikes alone (``кеу``,
``рԝԁ``). An ordinary Cyrillic or Greek word almost always holds a letter with
no Latin twin (``пароль``, ``ключ``) and is left alone, so Russian text is
matched as written. Every replacement is one character for one, so offsets
into the folded text are offsets into the original: what is stored never
changes, only what the rules look at.
"""

from __future__ import annotations

import re

#: Look-alike → the Latin letter it imitates (Cyrillic, then Greek, then Latin letters outside ASCII).
LATIN_LOOKALIKES: dict[str, str] = {
    **dict(zip("аеорсухіјѕһԁԛԝӏүѵ", "aeopcyxijshdqwlyv", strict=True)),
    **dict(zip("АВЕКМНОРСТХУІЈЅԚԜҮӀ", "ABEKMHOPCTXYIJSQWYI", strict=True)),
    **dict(zip("кт", "kt", strict=True)),  # small-capital shapes: к and т pass for k and t in many fonts
    **dict(zip("οαινκρυχτ", "oaivkpuxt", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
    **dict(zip("ıɑɡ", "iag", strict=True)),
}
_TABLE = str.maketrans(LATIN_LOOKALIKES)
_ANY_LOOKALIKE = re.compile(f"[{''.join(LATIN_LOOKALIKES)}]")
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters: digits and "_" split ``арі_кеу`` into its parts
_ASCII_LETTER = re.compile(r"[A-Za-z]")


def fold_lookalikes(text: str) -> str:
    """``text`` with each disguised word's look-alikes made Latin; same length, same offsets."""
    if text.isascii() or not _ANY_LOOKALIKE.search(text):
        return text  # the usual case: one scan in C
    return _WORD.sub(_fold_word, text)


def _fold_word(m: re.Match[str]) -> str:
    word = m.group()
    folded = word.translate(_TABLE)
    if folded == word:
        return word
    if _ASCII_LETTER.search(word) or folded.isascii():
        return folded  # mixed script, or look-alikes only: a disguise
    return word  # an ordinary Cyrillic/Greek word: it has letters with no Latin twin
