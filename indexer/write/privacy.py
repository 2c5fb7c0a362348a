"""The privacy filter: secrets and internal addresses never enter memory.

One reviewed table, :data:`RULES`: API keys (OpenAI/Anthropic ``sk-…``, AWS
``AKIA…``, GitHub ``ghp_…``, Slack ``xox…``, Google ``AIza…``, Stripe), JWTs,
PEM private keys, ``password=``/``token:``/``密码是`` assignments, credentials in
URLs and connection strings, card and Chinese ID numbers (checksums verified),
private-range IPs and internal host names. Each rule has a *kind*: ``secret``
(always rejected, redacted at index time by default) or ``network`` (rejected
on write; redacted at index time only with ``write.redact_index = "all"``,
since a personal note about the NAS at 192.168.1.10 is often the point).

Two uses:

* :func:`check` decides whether content may be written. It scans the text and
  its folded form (NFKC, invisible characters removed), so ``ｓｋ-…`` or a key
  split by zero-width spaces is still caught.
* :func:`redact` replaces matches (only the value of ``key = value`` forms) by
  ``[REDACTED:rule]`` — for log lines, and
  for chunk text before it reaches the keyword index, the cache or a hit. The
  number of lines is kept, so chunk line spans stay true.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

SECRET, NETWORK = "secret", "network"
#: Bump when RULES change what is redacted: part of the index identity once redaction is wired into indexing.
REDACT_VERSION = "1"
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u034f"))
_PLACEHOLDER = re.compile(r"^(?:<[^>]*>|\*+|x{3,}|\.{3}|…|\$\{[^}]*\}|\{\{[^}]*\}\}|%\w+%|\$\w+|null|none|nil|true"
                          r"|false|redacted|\[redacted[^\]]*\]|required|optional|empty|your[_-]\w+)$", re.IGNORECASE)


@dataclass(frozen=True)
class SecretRule:
    """``pattern`` (checked by ``valid``) is only run when one of ``needles`` is in the lowercased text.

    The needles make the usual case — a chunk with no secret at all — cost a few
    substring searches at index time instead of every regex.
    """

    name: str
    kind: str
    pattern: re.Pattern[str]
    reason: str
    valid: Callable[[re.Match[str]], bool] | None = None
    needles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    rule: str
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class PrivacyResult:
    passed: bool
    rule: str = ""
    reason: str = ""


def _value_not_placeholder(m: re.Match[str]) -> bool:
    return not _PLACEHOLDER.match(m.group("value").strip("\"'`"))


def _value_secret_looking(m: re.Match[str]) -> bool:
    """For "password is X": X has a digit, a symbol or mixed case (not "password is stored in the vault")."""
    v = m.group("value").rstrip(".,;:!?。，")
    mixed = any(c.isupper() for c in v[1:]) and any(c.islower() for c in v)
    return _value_not_placeholder(m) and (any(c.isdigit() for c in v) or not v.isalnum() or mixed)


def _private_ipv4(m: re.Match[str]) -> bool:
    o = [int(x) for x in m.groups()[:4]]
    if any(x > 255 for x in o):
        return False
    return (o[0] == 10 or (o[0] == 172 and 16 <= o[1] <= 31) or (o[0] == 192 and o[1] == 168)
            or (o[0] == 169 and o[1] == 254) or (o[0] == 100 and 64 <= o[1] <= 127))


def _luhn(m: re.Match[str]) -> bool:
    digits = [int(c) for c in m.group() if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return total % 10 == 0


def _cn_id(m: re.Match[str]) -> bool:
    s = m.group().upper()
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], weights, strict=True)) % 11]
    return s[17] == check and 1900 <= int(s[6:10]) <= 2100 and 1 <= int(s[10:12]) <= 12


_KEY_NAMES = (r"passwords?|passwd|passphrase|pwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key|apikey"
              r"|access[_-]?key(?:[_-]?id)?|auth[_-]?token|access[_-]?token|refresh[_-]?token|bearer|token"
              r"|private[_-]?key|credentials?|aws_secret_access_key|account[_-]?key|shared[_-]?access[_-]?key")

_KEY_NEEDLES = ("pass", "pwd", "secret", "key", "token", "bearer", "credential")
_DIGITS = tuple("0123456789")

RULES: tuple[SecretRule, ...] = (
    SecretRule("private_key", SECRET, re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*)", re.DOTALL),
        "contains a PEM private key", needles=("private key",)),
    SecretRule("api_key", SECRET, re.compile(r"\bsk-(?:proj-|ant-(?:api\d\d-)?|live-|test-)?[A-Za-z0-9_-]{20,}"),
               "contains an API key (sk-…)", needles=("sk-",)),
    SecretRule("aws_access_key", SECRET, re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
               "contains an AWS access key id",
               needles=("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa")),
    SecretRule("github_token", SECRET, re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
               "contains a GitHub token", needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    SecretRule("slack_token", SECRET, re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
               "contains a Slack token", needles=("xox",)),
    SecretRule("google_api_key", SECRET, re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
               "contains a Google API key", needles=("aiza",)),
    SecretRule("stripe_key", SECRET, re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
               "contains a Stripe secret key", needles=("_live_", "_test_")),
    SecretRule("jwt", SECRET, re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
               "contains a JSON Web Token", needles=("eyj",)),
    SecretRule("url_credentials", SECRET, re.compile(
        r"\b[a-z][a-z0-9+.-]*://(?P<value>[^\s/:@]+:[^\s/@]+|[A-Za-z0-9_-]{20,})@", re.IGNORECASE),
        "contains credentials inside a URL or connection string", _value_not_placeholder, needles=("://",)),
    SecretRule("credential_assignment", SECRET, re.compile(
        rf"(?<![\w-])(?:{_KEY_NAMES})[\"']?\s*(?:[:=]|=>|：)\s*(?P<value>\"[^\"\n]{{3,}}\"|'[^'\n]{{3,}}'"
        r"|[^\s\"',;]{4,})", re.IGNORECASE),
        "contains a password/token/key assignment", _value_not_placeholder, needles=_KEY_NEEDLES),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"(?:密码|口令|密钥|秘钥|私钥|令牌|验证码|token)\s*(?:是|为|[:：=])\s*(?P<value>[^\s，。；,;]{4,})",
        re.IGNORECASE), "contains a password/token/key (密码/密钥)", _value_not_placeholder,
        needles=("密码", "口令", "密钥", "秘钥", "私钥", "令牌", "验证码", "token")),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"\b(?:password|passphrase|passcode|pin)\s+(?:is|was)\s*[:=]?\s*(?P<value>\S{4,})", re.IGNORECASE),
        "contains a password", _value_secret_looking, needles=("pass", "pin")),
    SecretRule("card_number", SECRET, re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])"),
               "contains a payment card number", _luhn, needles=_DIGITS),
    SecretRule("national_id", SECRET, re.compile(r"(?<!\d)\d{17}[\dXx](?![\dA-Za-z])"),
               "contains a national ID number", _cn_id, needles=_DIGITS),
    SecretRule("private_ip", NETWORK, re.compile(
        r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d]|\.\d)"),
        "contains a private-range IP address", _private_ipv4,
        needles=("10.", "172.", "192.168.", "169.254.", "100.")),
    SecretRule("private_ip", NETWORK, re.compile(
        r"(?<![\w:])(?:f[cd][0-9a-f]{2}|fe80):[0-9a-f:]*:[0-9a-f]*", re.IGNORECASE),
        "contains a private IPv6 address", needles=("fc", "fd", "fe80")),
    SecretRule("internal_host", NETWORK, re.compile(
        r"\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:internal|corp|intranet|lan|local|localdomain)\b(?!\.\w)",
        re.IGNORECASE), "contains an internal host name",
        needles=(".internal", ".corp", ".intranet", ".lan", ".local")),
)


def fold(text: str) -> str:
    """NFKC with invisible characters removed: what evasion attempts look like once undone."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def find(text: str, kinds: tuple[str, ...] = (SECRET, NETWORK)) -> list[Finding]:
    """Every match in ``text`` (offsets into ``text``), earliest first, overlaps removed."""
    hits = []
    low = text.lower()
    for rule in RULES:
        if rule.kind not in kinds or not any(n in low for n in rule.needles):
            continue
        for m in rule.pattern.finditer(text):
            if m.end() > m.start() and (rule.valid is None or rule.valid(m)):
                start, end = m.span("value") if "value" in rule.pattern.groupindex else m.span()
                hits.append(Finding(rule.name, rule.kind, start, end))
    hits.sort(key=lambda f: (f.start, -f.end))
    out: list[Finding] = []
    for f in hits:
        if not out or f.start >= out[-1].end:
            out.append(f)
    return out


def check(content: str) -> PrivacyResult:
    """Reject content holding anything in :data:`RULES` (in its own or its folded form)."""
    for text in (content, fold(content)):
        found = find(text)
        if found:
            rule = next(r for r in RULES if r.name == found[0].rule)
            return PrivacyResult(False, rule.name, rule.reason)
    return PrivacyResult(True)


def redact(text: str, level: str = "all") -> str:
    """``text`` with matches replaced by ``[REDACTED:rule]``; ``level`` "off", "secrets" or "all".

    Newlines inside a match are kept (after the marker), so the line count is unchanged.
    """
    if level == "off":
        return text
    kinds = (SECRET,) if level == "secrets" else (SECRET, NETWORK)
    found = find(text, kinds)
    if not found:
        return text
    parts, pos = [], 0
    for f in found:
        parts += [text[pos : f.start], f"[REDACTED:{f.rule}]", "\n" * text.count("\n", f.start, f.end)]
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


def redact_for_log(content: str) -> str:
    """A log-safe preview: the folded form (evasions undone) with everything redacted, cut at 120 chars."""
    return redact(fold(content), "all")[:120]
