"""Small per-language tables for :mod:`memoryd.indexer.write.slots`: stop words, verbs, update cues.

A memory entry is usually one clause — subject, verb, value ("The staging DB
*runs* PostgreSQL 16", "用户*偏好*深色主题", "Le client *préfère* le thé"). Telling
the subject from the value needs only the verb, and telling "holds one value"
(prefers, uses, lives in: a new value replaces the old) from "holds many"
(likes, visited, is planning: both stay true) needs only a short list of verbs.
No parser, no model: tables for English, Chinese, Spanish, German, French and
Portuguese, the languages of the labelled set (``tests/security/data/sibling_pairs.jsonl``).
A verb missing here makes a pair *unclear*, and an unclear pair is appended:
a gap in the table costs a duplicate line, never a lost fact.

Tokens are :func:`memoryd.indexer.write.lexical.seq_tokens`: lowercase words,
numbers, single CJK characters. Chinese entries are matched as character runs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from memoryd.indexer.write import stopwords
from memoryd.indexer.write.lexical import (
    _NEGATION_EN,
    _NEGATION_OTHER,
    _NEGATION_ZH,
    _STOP_EN,
    _STOP_ZH,
    _UPDATE_EN,
    _UPDATE_OTHER,
    _UPDATE_ZH,
    CJK,
    negated,
    update_cue,
)


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Stop words per language: English and Chinese as dedup has always read them, plus the four Latin languages'
#: lists (:mod:`memoryd.indexer.write.stopwords`) and a few Chinese prepositions ("到", "从": "moved *to* …").
STOP: dict[str, frozenset[str]] = {
    "en": _STOP_EN | _w("into over per via about up out off what which who whom whose where when how"),
    "zh": _STOP_ZH | frozenset("到从上里中下时我你他她它们"), **stopwords.OTHER}

#: Verbs that hold one value at a time: a new value for the same subject replaces the old one.
SINGLE = {
    "en": _w("""is are was were be prefers prefer preferred uses use used runs run lives live lived leads
        lead led costs cost starts start begins begin ends end opens open closes close meets meet due set defaults
        default called named located based written hosted scheduled needs need requires require pays pay earns earn
        weighs measures manages manage handles handle deploys deploy targets target points expires expire renews
        renew happens happen falls lasts last goes go moved became becomes drives drive commutes commute sleeps
        sleep wakes wake eats eat drinks drink stored stores store"""),
    "es": _w("""es son era fue está están prefiere prefieren usa usan utiliza utilizan vive viven trabaja trabajan
        dirige dirigen cuesta cuestan empieza empiezan comienza comienzan termina terminan abre abren cierra cierran
        corre corren ejecuta llama llamado ubicado alojado programado necesita requiere vence caduca paga gana pesa
        conduce bebe come duerme despierta guarda"""),
    "de": _w("""ist sind war waren nutzt nutzen benutzt benutzen verwendet verwenden bevorzugt bevorzugen wohnt
        wohnen lebt leben arbeitet arbeiten leitet leiten kostet kosten beginnt beginnen startet starten endet enden
        läuft laufen öffnet schließt heißt liegt liegen gehostet geplant braucht benötigt dauert zahlt verdient
        wiegt fährt trinkt isst schläft speichert findet"""),
    "fr": _w("""est sont était étaient préfère préfèrent utilise utilisent habite habitent vit vivent travaille
        travaillent dirige dirigent coûte coûtent commence commencent débute débutent termine terminent ouvre
        ouvrent ferme ferment tourne tournent appelle appelé situé hébergé prévu nécessite faut dure paie gagne pèse
        conduit boit mange dort réveille stocke"""),
    "pt": _w("""é são era foi está estão prefere preferem usa usam utiliza utilizam mora moram vive vivem trabalha
        trabalham lidera lideram dirige custa custam começa começam inicia termina terminam abre abrem fecha fecham
        roda rodam chama chamado localizado hospedado agendado precisa requer dura vence paga ganha pesa dirige bebe
        come dorme acorda guarda"""),
    "zh": _w("""是 为 用 使用 采用 改用 偏好 住在 住 位于 叫 名叫 定于 定在 安排在
        需要 要求 运行 跑在 部署在 负责 领导 带领 主管 管理 花费 价格 售价 开始 结束 截止 到期
        每天 每周 设为 设置为 默认 托管在 存放在 保存在 喝 吃 睡 起床 开车 通勤"""),
}

#: Verbs that hold many values: "likes tea" and "likes coffee" are both true.
MULTI = {
    "en": _w("""takes take took likes like liked loves love loved enjoys enjoy enjoyed visited visit visits owns own
        has have had bought buy buys tried try tries speaks speak reads read collects collect attended attend
        attends planning plans plan planned knows know learned learning learns plays play played watched watch
        watches wants want allergic adopted adopt hates hate dislikes dislike met supports support contains contain
        includes include ate cooked shipped released fixed added wrote built booked joined"""),
    "es": _w("""toma toman gusta gustan cuida cuidan encarga encargan encanta encantan visitó visita tiene tienen
        compró compra probó prueba habla hablan lee leyó colecciona asistió planea planean conoce aprendió aprende
        juega vio quiere quieren alérgico alérgica adoptó odia incluye contiene lanzó publicó arregló añadió
        escribió reservó"""),
    "de": _w("""nimmt nehmen mag mögen liebt lieben besuchte besucht besitzt hat haben kaufte gekauft probierte
        probiert spricht sprechen liest las sammelt plant planen kennt lernte lernt spielt sah will möchte
        allergisch adoptierte hasst enthält umfasst veröffentlichte behob fügte schrieb buchte"""),
    "fr": _w("""prend prennent aime aiment inscrit inscrite valide valident gère gèrent adore adorent visité visite
        possède possèdent acheté achète essayé essaie parle parlent lit lu collectionne assisté prévoit planifie
        connaît appris apprend joue regardé veut veulent allergique adopté déteste contient inclut publié corrigé
        ajouté écrit réservé"""),
    "pt": _w("""toma tomam gosta gostam cuida cuidam adora adoram visitou visita possui possuem tem têm comprou
        compra experimentou experimenta fala falam lê leu coleciona participou planeja planejam conhece aprendeu
        aprende joga viu quer querem alérgico alérgica adotou odeia contém inclui lançou publicou corrigiu adicionou
        escreveu reservou"""),
    "zh": _w("""试用 试用过 用过 喜欢 喜爱 爱 热爱 爱吃 爱喝 去过 到过 养了 养 有 拥有 买了 买过 购买 试过
        尝试 会说 说 读过 在读 看过 收藏 参加 参加了 计划 打算 准备 想 想要 认识 学过 学习 在学
        玩 对 过敏 讨厌 包括 包含 发布了 修复了 添加了 写了 预订了 加入了"""),
}

#: Chinese numerals and measure words between a verb and its object ("喝*一杯*绿茶"): they count, they do not qualify.
_ZH_MEASURE = frozenset("一二两三四五六七八九十几每个杯位本份次条项件种台只张辆家门")
#: Auxiliaries: verbs that carry tense or voice, not a slot ("*was* pushed to", "*wurde* verschoben").
_AUX = {"en": _w("has have had been was were will would is are be being"),
        "es": _w("ha han había sido fue fueron será es son está"),
        "de": _w("wurde wurden wird werden worden hat haben hatte ist sind war"),
        "fr": _w("a ont avait été était sera est sont"),
        "pt": _w("foi foram tem têm tinha sido será é são está")}
#: Units that stand beside a number ("4 pm", "16 GB", "9 h 30"): part of the quantity, not a thing.
_UNITS = _w("""am pm h hr hrs min mins s ms sec secs gb mb kb tb gib mib km m cm mm kg g l ml percent k x
    uhr heures""")
_QUANTITY = re.compile(r"^\d+(?:[.:,]\d+)*$|^[零一二两三四五六七八九十百千万]+$|^v\d+$|^h\d+$|^\d+(?:am|pm|h|k|gb|mb)$")
_NUMBER_WORDS = _w("""zero one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty
    hundred thousand uno dos tres cuatro cinco seis siete ocho nueve diez zwei drei vier fünf sechs sieben acht neun
    zehn un deux trois quatre cinq six sept huit neuf dix um dois três quatro cinco seis sete oito nove dez""")
_CALENDAR = _w("""monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december lunes martes miércoles jueves viernes sábado domingo enero febrero
    marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre montag dienstag mittwoch donnerstag
    freitag samstag sonntag januar februar märz juni juli oktober dezember lundi mardi mercredi jeudi vendredi
    samedi dimanche janvier février mars avril mai juin juillet août septembre octobre novembre décembre segunda
    terça quarta quinta sexta sábado domingo janeiro fevereiro março maio junho julho setembro outubro novembro
    dezembro""")
_CJK_CHAR = re.compile(f"[{CJK}]")


#: Every word a Latin language's tables know, to tell which language a text is in.
_KNOWN = {lang: STOP[lang] | SINGLE[lang] | MULTI[lang] for lang in ("en", "es", "de", "fr", "pt")}
#: Letters that only some of the Latin languages use: each one seen adds to their score.
_LETTERS = {"es": "ñ¿¡", "pt": "ãõ", "fr": "èùœëïî", "de": "äöüß"}
_SHARED_LETTERS = {"ç": ("fr", "pt"), "ê": ("fr", "pt"), "â": ("fr", "pt"), "ô": ("fr", "pt"), "á": ("es", "pt"),
                   "í": ("es", "pt"), "ó": ("es", "pt"), "ú": ("es", "pt"), "é": ("es", "fr", "pt"), "à": ("fr", "pt")}


def language_of(tokens: Sequence[str]) -> str:
    """The table to read ``tokens`` with: ``zh`` for mostly CJK characters, else the Latin language whose
    stop words, verbs and letters occur most (English on a tie)."""
    cjk = sum(bool(_CJK_CHAR.fullmatch(t)) for t in tokens)
    if cjk and cjk * 2 >= len(tokens):
        return "zh"
    score = {lang: float(sum(t in words for t in tokens)) for lang, words in _KNOWN.items()}
    for ch in "".join(tokens):
        for lang, letters in _LETTERS.items():
            score[lang] += 2 * (ch in letters)
        for lang in _SHARED_LETTERS.get(ch, ()):
            score[lang] += 1
    best = max(score.values())
    return "en" if score["en"] == best else max(score, key=lambda k: score[k])


def _markers(lang: str) -> list[tuple[tuple[str, ...], str]]:
    if lang == "zh":
        items = [(tuple(w), "single") for w in SINGLE["zh"]] + [(tuple(w), "multi") for w in MULTI["zh"]]
        return sorted(items, key=lambda m: -len(m[0]))  # the longest word first: 使用 before 用
    words: list[tuple[tuple[str, ...], str]] = [((w,), "single") for w in SINGLE[lang]]
    return words + [((w,), "multi") for w in MULTI[lang]]


_MARKERS = {lang: _markers(lang) for lang in STOP}
_BY_WORD = {lang: {m[0][0]: m[1] for m in _MARKERS[lang]} for lang in STOP if lang != "zh"}
#: English base forms that are nouns as often as verbs ("the *work* laptop", "the *plan*", "a *run*"): a verb only
#: after a pronoun, a modal or an adverb that licenses one, or first in an imperative ("Use tabs …").
_EN_AMBIGUOUS = _w("""prefer use run live work lead cost start begin end open close meet set default need require take
    pay earn manage handle deploy target expire renew happen last go drive commute sleep wake eat drink store like love
    enjoy visit own have buy try speak read collect attend plan know learn play watch want adopt hate dislike support
    contain include""")
_EN_LICENSE = _w("""i we you they he she it who will would can could should must may might do does did don't doesn't
    didn't to always never usually often sometimes also still now no longer only generally typically rarely""")
#: Common Chinese words that begin with a character of the verb tables but are not verbs (用户 "user", 现在 "now").
_ZH_NOT_VERBS = [tuple(w) for w in _w("""用户 使用者 费用 作用 常用 通用 适用 专用 好用 实用 信用
    应用 在线 现在 正在 因为 为了 作为 成为 以为 认为 所有 没有 有些
    有时 有点 对于 对象 说明 爱好 想法 想到 叫做 为什么 存在 实在 在于 吃饭 喝水""")]


def _match(tokens: Sequence[str], i: int, lang: str) -> tuple[int, str] | None:
    """(length, class) of the verb of the table that starts at ``tokens[i]``; None if none does."""
    if lang != "zh":
        cls = _BY_WORD[lang].get(tokens[i])
        if cls and lang == "en" and tokens[i] in _EN_AMBIGUOUS and i > 0 and tokens[i - 1] not in _EN_LICENSE:
            return None
        return (1, cls) if cls else None
    for word, cls in _MARKERS["zh"]:
        if tuple(tokens[i : i + len(word)]) == word:
            return len(word), cls
    return None


def verbal(tokens: Sequence[str], lang: str) -> bool:
    """Only verbs of the tables, update cues and stop words: a region that exchanges the verb
    ("喜欢" → "现在改", "prefers" → "switched to"), not the value."""
    if lang == "zh":
        rest = list(_NEGATION_ZH.sub("", _UPDATE_ZH.sub("", "".join(tokens))))
    else:
        rest = [t for t in strip_cues(" ".join(tokens)).split() if t not in _AUX.get(lang, frozenset())]
    covered = {i + k for i, n, _ in _verbs(rest, lang) for k in range(n)}
    return all(i in covered or light([t], lang) for i, t in enumerate(rest))


def _verbs(tokens: Sequence[str], lang: str) -> tuple[tuple[int, int, str], ...]:
    """(start, length, class) of each verb of the tables in ``tokens``, left to right; the characters of a
    listed non-verb word (用户, 因为) are skipped whole. Cached: every region of a pair asks again."""
    return _verbs_of(tuple(tokens), lang)


@functools.lru_cache(maxsize=8192)
def _verbs_of(tokens: tuple[str, ...], lang: str) -> tuple[tuple[int, int, str], ...]:
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        if lang == "zh":
            skip = next((len(w) for w in _ZH_NOT_VERBS if tuple(tokens[i : i + len(w)]) == w), 0)
            if skip:
                i += skip
                continue
        m = _match(tokens, i, lang)
        if m:
            out.append((i, m[0], m[1]))
            i += m[0]
        else:
            i += 1
    return tuple(out)


def predicate_at(tokens: Sequence[str], lang: str) -> int | None:
    """Index of the first verb of the table in ``tokens`` (the subject ends there); None when there is none.

    A verb as the very first token is an imperative or a headline ("Use tabs …", "喜欢 …"): the
    subject is empty, the predicate starts at 0."""
    found = _verbs(tokens, lang)
    return found[0][0] if found else None


def governor(tokens: Sequence[str], at: int, pred: int | None, lang: str) -> tuple[str, bool]:
    """The class (``single`` / ``multi``) of the nearest verb of the tables ending before ``tokens[at]``,
    from the predicate on, and whether only stop words lie between it and ``at``; ``("", False)`` when the
    region is not after a verb, or an unlisted verb ("rolled", "funciona") stands between."""
    if pred is None or at <= pred:
        return "", False
    before = [(start + n, cls) for start, n, cls in _verbs(tokens, lang) if start + n <= at]
    if not before:
        return "", False
    end, cls = before[-1]
    between = [t for t in tokens[end:at] if not (lang == "zh" and t in _ZH_MEASURE)]
    parts = [i for i, t in enumerate(between) if _participle(t, lang)]
    if parts:
        # "is executed *by* Jenkins", "est hébergé *chez* OVH": the participle governs what follows its
        # preposition, and a tool, host or agent of a passive is one at a time
        last = parts[-1]
        return ("single", True) if cls == "single" and light(between[last + 1 :], lang) and last + 1 < len(
            between) else ("", False)
    return cls, light(between, lang)


_PARTICIPLE = {"en": ("ed", "ing"), "es": ("ado", "ada", "ido", "ida", "ando", "iendo"),
               "fr": ("é", "ée", "és", "ées", "ant"), "pt": ("ado", "ada", "ido", "ida", "ando", "endo"),
               "de": ("iert", "t")}


def _participle(token: str, lang: str) -> bool:
    """An unlisted verb form after the listed one ("is *rolled* out", "está *configurado*"): the listed
    verb is only an auxiliary, the slot is the unlisted verb's."""
    if lang == "de":
        return token.startswith("ge") and token.endswith("t") and len(token) > 5
    return len(token) > 4 and token.endswith(_PARTICIPLE.get(lang, ()))


def has_multi(tokens: Sequence[str], lang: str) -> bool:
    """A verb that holds many values anywhere in the clause (German puts it last: "… gegen Nüsse *allergisch*")."""
    return any(cls == "multi" for _, _, cls in _verbs(tokens, lang))


def light(tokens: Sequence[str], lang: str) -> bool:
    """Only stop words of English, Chinese or ``lang``."""
    stop = _LIGHT.get(lang, _LIGHT["en"])
    return all(t in stop for t in tokens)


_LIGHT = {lang: STOP["en"] | STOP["zh"] | STOP[lang] for lang in STOP}


def is_cue_or_negation(tokens: Sequence[str], lang: str) -> bool:
    """Tokens that one side adds and that change no slot: an update cue, a negation, stop words."""
    if lang == "zh":
        rest = _NEGATION_ZH.sub("", _UPDATE_ZH.sub("", "".join(tokens)))
        return light(list(rest), lang)
    text = " ".join(tokens)
    if update_cue(text) or negated(text):
        return light(strip_cues(text).split(), lang)
    return light(tokens, lang)


def strip_cues(text: str) -> str:
    """``text`` without its update cues and negations (every language's patterns)."""
    for pattern in (_UPDATE_EN, _UPDATE_OTHER, _NEGATION_EN, _NEGATION_OTHER):
        text = pattern.sub(" ", text)
    return text


def is_quantity(token: str) -> bool:
    """A number, a time, a version, a Chinese numeral, a number word, a weekday or a month: the value of a
    slot (when, how many, which version), never a kind of thing."""
    return bool(_QUANTITY.match(token)) or token in _NUMBER_WORDS or token in _UNITS or is_weekday_or_month(token)


def is_weekday_or_month(token: str) -> bool:
    return token in _CALENDAR or (token.endswith("s") and token[:-1] in _CALENDAR)
