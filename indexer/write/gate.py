"""The quality gate (README, "Writing memories"): is this worth remembering at all?

Noise is rejected before anything else runs: content too short, assistant
filler ("Sure, let me…", "好的，我来…"), bare code, paths or JSON, and
speculation ("maybe…", "可能…"). Every rule lives in :data:`RULES`, one reviewed
table in English and Chinese, each with the reason a caller sees.

Rules match a *check form* of the content — Unicode NFKC (so ``ｍａｙｂｅ`` is
``maybe``), invisible characters removed (so ``ma\u200bybe`` is ``maybe``), Markdown
decoration stripped (so ``- **Maybe** …`` is ``Maybe …``) — while what gets
written is :func:`normalise`'s form: the user's own characters, on one line.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.write.lexical import script_of

MIN_CJK_CHARS = 10
MIN_OTHER_CHARS = 20

# Zero-width space, word joiner, BOM: never meaningful inside one memory line.
_DROP = dict.fromkeys(map(ord, "\u200b\u2060\ufeff\u00ad\u180e"))
# Also dropped for matching only: ZWJ/ZWNJ (needed in emoji and Persian, so kept when writing).
_DROP_CHECK = _DROP | dict.fromkeys(map(ord, "\u200c\u200d\u034f"))
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SPACES = re.compile(r"\s+")
_LEADING_MARKER = re.compile(r"^(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")


@dataclass(frozen=True)
class GateRule:
    """One rule: ``pattern`` searched in the check form (or, ``on_text``, in the text to be written)."""

    name: str
    pattern: re.Pattern[str]
    reason: str
    on_text: bool = False


@dataclass(frozen=True)
class GateResult:
    """``passed`` with the entry text to write, or the failing rule and its reason."""

    passed: bool
    content: str
    rule: str = ""
    reason: str = ""


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


RULES: tuple[GateRule, ...] = (
    GateRule("markup", _rx(r"<!--|-->|USER_BLOCK_(?:START|END)|MACHINE_BLOCK_(?:START|END)|^#{1,6}\s|```|^---|^==="),
             "contains Markdown structure (a heading, code fence, rule or block marker), not a fact", on_text=True),
    GateRule("filler", _rx(r"^(?:ok(?:ay)?|sure|got it|understood|i see|noted|thanks?|thank you|no problem"
                           r"|of course|certainly|let me|let's)\b"),
             "assistant filler (acknowledgement), not a fact"),
    GateRule("filler", _rx(r"^(?:i'?ll|i will|i'm going to|i am going to|i'd be happy|i can help)\b"),
             "assistant filler (announces an action), not a fact"),
    GateRule("filler", _rx(r"^(?:here'?s|here is|here are|this is|as an ai)\b"),
             "assistant filler (presents an answer), not a fact"),
    GateRule("filler", _rx(r"^(?:好的|好嘞|收到|明白了?|了解|没问题|当然|谢谢|感谢"
                           r"|我来|让我|我会|我将|我先|这是|以下是|下面是)"),
             "assistant filler, not a fact (助手的客套话，不是事实)"),
    GateRule("code", _rx(r"^(?:~|\.{1,2})?[/\\][\w./\\-]*$|^[a-z]:\\[\w.\\ -]*$|^[\w.-]+\.(?:py|js|ts|md|json|ya?ml"
                         r"|toml|sh|go|rs|java|c|h|cpp|txt|log)$"),
             "a bare file path, not a fact"),
    GateRule("code", re.compile(r"^(?:import\s+[\w.]+|from\s+[\w.]+\s+import\s|#include\s|using\s+namespace\s"
                                r"|package\s+[\w.]+;|(?:def|class|fn|func|function)\s+\w+\s*[(:{<]"
                                r"|(?:const|let|var)\s+\w+\s*=|SELECT\s.+\sFROM\s|INSERT\s+INTO\s|\$\s|>>>\s)"),
             "bare code, not a fact"),
    GateRule("code", _rx(r"^[\[({]"), "starts like JSON, an array or a code expression, not a fact"),
    GateRule("code", _rx(r"^(?:https?|ftp)://\S+$"), "a bare URL, not a fact"),
    GateRule("code", _rx(r"^[\x21-\x7e]+$"), "a single token (identifier, hash, command), not a fact"),
    GateRule("speculative", _rx(r"^(?:maybe|perhaps|possibly|probably|i think|i guess|i believe|i suppose"
                                r"|not sure|it seems|seems like|might be|could be)\b"),
             "speculative: only facts are remembered"),
    GateRule("speculative", _rx(r"^(?:可能|也许|或许|大概|好像|似乎|估计|应该是|不确定|说不定|我觉得|我猜)"),
             "speculative: only facts are remembered (推测性内容)"),
)


def normalise(content: str) -> str:
    """The entry as it will be written: NFC, one line, invisible characters and a list marker removed."""
    text = unicodedata.normalize("NFC", content).translate(_DROP)
    text = _SPACES.sub(" ", text).strip()
    return _LEADING_MARKER.sub("", text, count=1).strip()


def check_form(text: str) -> str:
    """The form rules match: NFKC, every invisible character removed, Markdown decoration stripped."""
    text = unicodedata.normalize("NFKC", text).translate(_DROP_CHECK)
    return clean_line(_SPACES.sub(" ", text)).lstrip(" \"'“‘「『*_~>")


def quality_gate(content: str) -> GateResult:
    """Apply every rule in order; the first that matches rejects."""
    if _CONTROL.search(content):
        return GateResult(False, "", "control_chars",
                          "contains control, bidirectional-override or unpaired surrogate characters")
    text = normalise(content)
    probe = check_form(text)
    if not probe:
        return GateResult(False, text, "empty", "empty after removing whitespace and Markdown decoration")
    too_short = _too_short(probe)
    if too_short:
        return GateResult(False, text, "too_short", too_short)
    for rule in RULES:
        if rule.pattern.search(text if rule.on_text else probe):
            return GateResult(False, text, rule.name, rule.reason)
    if _mostly_symbols(probe):
        return GateResult(False, text, "code", "mostly symbols or code, not a fact")
    return GateResult(True, text)


def _too_short(probe: str) -> str:
    chars = len(probe.replace(" ", ""))
    if script_of(probe) == "cjk":
        if chars < MIN_CJK_CHARS:
            return f"too short: {chars} characters (Chinese/Japanese content needs at least {MIN_CJK_CHARS})"
        return ""
    if len(probe) < MIN_OTHER_CHARS:
        return f"too short: {len(probe)} characters (needs at least {MIN_OTHER_CHARS})"
    return ""


def _mostly_symbols(probe: str) -> bool:
    """Under half of the non-space characters are letters (any script): code, hashes, ASCII art."""
    chars = [c for c in probe if not c.isspace()]
    letters = sum(1 for c in chars if c.isalpha())
    return letters * 2 < len(chars)
