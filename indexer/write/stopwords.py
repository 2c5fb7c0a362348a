"""Stop words of the Latin-script languages the write path reads besides English: Spanish, German, French,
Portuguese.

Dedup counts shared *content* words (:func:`memoryd.indexer.write.lexical.overlap`); with only English stop
words, "el", "la", "de", "en" count as content in a Spanish entry and two different Spanish facts look half
the same. Each text is read with English's list plus the list of the language whose stop words it uses
most (:func:`language_of`); English wins a tie, so an English text is read as before.
"""

from __future__ import annotations

from collections.abc import Iterable


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


OTHER: dict[str, frozenset[str]] = {
    "es": _w("""el la los las un una unos unas de del al en y o u que es son está están era fue ser a con por para
        su sus mi mis se lo le les este esta estos estas ese esa muy también cada todo todos todas"""),
    "de": _w("""der die das den dem des ein eine einen einem einer eines und oder ist sind war waren wird werden zu
        mit von für auf im in am an bei aus nach vor über unter um sein seine ihr ihre mein meine unser unsere es
        sich auch sehr jeden jede jeder alle vom zum zur"""),
    "fr": _w("""le la les l un une des de du d et ou est sont était a à au aux en pour avec dans sur par son sa ses
        mon ma mes notre nos leur leurs ce cet cette ces qui que se s il elle ils elles très aussi chaque tous
        toutes tout"""),
    "pt": _w("""o a os as um uma uns umas de do da dos das em no na nos nas e ou que é são está estão era foi ser
        com por para pelo pela seu sua seus suas meu minha se lhe este esta esse essa muito também cada todo
        todos toda todas ao aos"""),
}


def language_of(words: Iterable[str], english: frozenset[str]) -> str:
    """``en``, or the language of :data:`OTHER` with more stop words among ``words`` (lowercase) than
    English (``english``, its stop words) has."""
    ws = list(words)
    best, score = "en", sum(w in english for w in ws)
    for lang, stop in OTHER.items():
        n = sum(w in stop for w in ws)
        if n > score:
            best, score = lang, n
    return best
