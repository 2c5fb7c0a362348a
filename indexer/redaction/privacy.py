"""The privacy filter: one secret detector for writes, the index and log lines.

One reviewed table, :data:`RULES`, built from three parts:

* provider token formats (:mod:`memoryd.indexer.redaction.secret_formats`: OpenAI/Anthropic
  ``sk-…``, AWS, GitHub, GitLab, Slack, Google, Stripe, Hugging Face, Groq, xAI,
  npm, SendGrid, Twilio, …), each also matched when split by spaces;
* credentials in context: ``password=``/``token:`` assignments, passwords and
  PINs in English, Chinese and Japanese prose, password/PIN key words in 38 languages
  followed by a value shaped like a credential (:mod:`memoryd.indexer.redaction.secret_keywords`),
  password columns of Markdown tables, ``user:secret@host``, passwords on command lines,
  credentials in URLs, an AWS secret key near the word "secret", PEM private
  keys, JWTs, and base64 text that decodes to any of these;
* personal data with a checksum or a strict shape: payment cards (Luhn and
  issuer prefix, any separator), Chinese ID numbers, Chinese mobile numbers,
  US social security numbers and IBANs (mod-97).

Each rule has a *kind*: ``secret`` (always rejected, redacted at index time by
default) or ``network`` (private IPs and internal host names: rejected on
write; redacted at index time only with ``write.redact_index = "all"``, since
a personal note about the NAS at 192.168.1.10 is often the point).

Token rules never start with ``\\b``: CJK letters and ``_`` are word characters
to Python's ``re``, so ``密钥sk-proj-…`` or ``key_sk-…`` has no word boundary
before the key. Every rule uses an explicit ASCII look-around instead.

Matching runs on the *folded* text (:func:`fold`: NFKC, zero-width and
soft-hyphen characters removed, Unicode dashes made ``-``, Cyrillic/Greek
look-alikes in disguised words made Latin by
:mod:`memoryd.indexer.redaction.confusables`), so full-width ``ｓｋ－…``,
``ｐａｓｓｗｏｒｄ:``, ``раssword=`` with Cyrillic letters and keys split by
invisible characters are caught. :func:`scan`
maps what it finds back to offsets in the original text, so :func:`redact`
replaces only the secret and leaves the rest of a chunk exactly as written
(full-width punctuation, line breaks and all).
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from memoryd.indexer.redaction import secret_checks as checks
from memoryd.indexer.redaction import secret_keywords as keywords
from memoryd.indexer.redaction.confusables import fold_lookalikes
from memoryd.indexer.redaction.secret_formats import FORMATS, PATTERNS, TokenFormat

SECRET, NETWORK = "secret", "network"
#: Bump when RULES change what is redacted: part of the index identity, so existing indexes re-redact.
REDACT_VERSION = "5"

#: Every format character (Unicode category Cf: zero-width, soft hyphen, bidi marks and embeddings, word
#: joiner, ...) plus the combining grapheme joiner: none is visible, so any of them can split a key unseen.
_INVISIBLE: dict[int, str | None] = {
    c: None for c in (*range(0x20000), *range(0xE0000, 0xE0080))  # the planes that hold Cf characters
    if unicodedata.category(chr(c)) == "Cf" or c == 0x034F}
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58"), "-")
_FOLD_TABLE: dict[int, str | None] = {**_INVISIBLE, **_DASHES}
_NOT_ALNUM_BEFORE = "(?<![A-Za-z0-9])"
_NOT_ALNUM_AFTER = "(?![A-Za-z0-9])"
_MAX_TOKEN = 1024  # no provider's key is longer; a bound keeps a failed match from scanning a whole file

@dataclass(frozen=True)
class SecretRule:
    """``pattern`` (checked by ``valid``) is only run when one of ``needles`` is in the lowercased text.

    The needles make the usual case — a chunk with no secret at all — cost a few
    substring searches at index time instead of every regex. A rule with ``gate``
    instead runs when that (cheap) pattern is found. ``lower`` marks a case-insensitive
    pattern written in lowercase, run without IGNORECASE on the lowercased text:
    ``re`` cannot skip ahead through case-insensitive alternations (5-8x slower).
    """

    name: str
    kind: str
    pattern: re.Pattern[str]
    reason: str
    valid: Callable[[re.Match[str]], bool] | None = None
    needles: tuple[str, ...] = ()
    #: For encoded runs: the readable text the match decodes to (or None); a match counts when that text,
    #: scanned again (at most :data:`_MAX_DECODE_DEPTH` levels deep), holds a secret.
    decode: Callable[[str], str | None] | None = None
    #: Instead of ``pattern.finditer``: the spans of every secret in the text (already checked). For rules
    #: that are not one regex: key words in many languages, Markdown table columns.
    locate: Callable[[str, str], list[tuple[int, int]]] | None = None
    #: Instead of ``needles``/``gate``: a cheap test on the lowercased text (for hundreds of needles).
    when: Callable[[str], bool] | None = None
    gate: re.Pattern[str] | None = None
    lower: bool = False  # an IGNORECASE pattern written in lowercase: run case-sensitively on the lowercased text


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


# --- decoders ---------------------------------------------------------------------------------------------------

#: How many encodings deep a decoded run is scanned again (base64 of hex of …). Each level is one more full
#: scan, so the bound keeps ``%2525…`` (one level per two characters) from recursing once per escape.
_MAX_DECODE_DEPTH = 3
#: Percent-decoding rounds inside one level: ``%2525…2D`` is the same secret escaped several times over.
_MAX_UNQUOTE_ROUNDS = 4


def _url_decoded(run: str) -> str | None:
    """``run`` percent-decoded until it stops changing (a few rounds at most).

    Escapes that are not UTF-8 (``caf%E9`` in Latin-1) become U+FFFD instead of raising: an ordinary
    URL must never stop the filter, and a secret beside such an escape is still decoded and seen.
    """
    if "%" not in run:
        return None
    text = run
    for _ in range(_MAX_UNQUOTE_ROUNDS):
        decoded = urllib.parse.unquote(text, errors="replace")
        if decoded == text:
            break
        text = decoded
    return text


# --- the table --------------------------------------------------------------------------------------------------


def _token_rules(f: TokenFormat) -> tuple[SecretRule, ...]:
    """A catalogue row as written, and split by spaces into pieces of 3+ characters.

    Every piece after the first must hold a digit or a capital, so the split form stops
    at the words that follow a key ("… MnOp3456 is the key") instead of swallowing them.
    Lengths are bounded (:data:`_MAX_TOKEN`, 64 a piece) so that a long run of prefixes
    (``sk-sk-sk-…``, file content is untrusted) costs linear time, not quadratic.
    """
    count = f"{{{f.min_len},{f.max_len or _MAX_TOKEN}}}"
    literal = re.match(r"(?:[A-Za-z0-9_-]|\\.)*", f.prefix)
    needles = f.needles or ((literal.group() if literal else "").replace("\\", "").lower(),)
    if not f.gate and not all(needles):
        raise ValueError(f"token format {f.name!r}: prefix {f.prefix!r} has no literal start; give needles")
    strict = re.compile(f"{_NOT_ALNUM_BEFORE}{f.prefix}[{f.body}]{count}{_NOT_ALNUM_AFTER}")
    piece = f"[{f.body}]{{3,64}}"
    more = f" (?=[{f.body}]{{0,64}}[0-9A-Z]){piece}"
    split = re.compile(f"{_NOT_ALNUM_BEFORE}{f.prefix} ?(?P<body>{piece}(?:{more}){{1,24}}){_NOT_ALNUM_AFTER}")
    gate = re.compile(f.gate) if f.gate else None
    return (SecretRule(f.name, SECRET, strict, f.reason, needles=needles, gate=gate),
            SecretRule(f.name, SECRET, split, f.reason, _split_fits(f), needles=needles, gate=gate))


def _split_fits(f: TokenFormat) -> Callable[[re.Match[str]], bool]:
    def fits(m: re.Match[str]) -> bool:
        n = len(m.group("body").replace(" ", ""))
        return n >= f.min_len and (f.max_len is None or n <= f.max_len) and checks.random_pieces(m)
    return fits


_KEY_NAMES = (r"passwords?|passwd|passphrase|pwd|secret|client[_-]?secret|secret[_-]?key|api[_-]?key|apikey"
              r"|access[_-]?key(?:[_-]?id)?|auth[_-]?token|access[_-]?token|refresh[_-]?token|bearer|token"
              r"|private[_-]?key|credentials?|aws_secret_access_key|account[_-]?key|shared[_-]?access[_-]?key")
_KEY_NEEDLES = ("pass", "pwd", "secret", "key", "token", "bearer", "credential")
_DIGIT_RUN = re.compile(r"[0-9]{3}")
#: AWS secret keys (40) and base64 worth decoding (24+) both need a long base64 run; one scan answers for both.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24}")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{32}")
#: ``user:secret@host`` without a scheme needs a ``:`` and an ``@`` close together.
_AT_PAIR = re.compile(r":[^\s:@/]{3,64}@")
#: Cards, ID, mobile and social security numbers all hold 11+ digits and separators in a row.
_NUMBER_RUN = re.compile(r"[0-9][0-9 .\-/_\u00a0]{9,}[0-9]")
_CJK_PASSWORD_WORDS = (r"密码|口令|密钥|秘钥|私钥|令牌|验证码|支付密码|PIN码|pin码"
                       r"|密碼|密鑰|秘鑰|祕鑰|私鑰|權杖|驗證碼|支付密碼|PIN碼|pin碼|通行碼")
_JA_PASSWORD_WORDS = (r"パスワード|暗証番号|パスコード|合言葉|PINコード|ピン番号|秘密鍵|シークレットキー|シークレット"
                      r"|アクセスキー|APIキー|トークン")
#: 是/为/叫做/改成了…: "is", "is called", "was changed to" (``token`` is followed only by these: ``token = …`` is code).
_CJK_IS = r"是|为|為|叫做|叫作|叫|(?:设为|设置为|设成|改成|改为|换成|变成|設為|設定為|設成|改為|換成|變成)了?"
_ASCII_VALUE = r"[A-Za-z0-9!@#$%^&*_+\-~?.=/]{4,64}+"
#: After the value: a counter (8 位, 4 桁) or a particle saying where/how (KeePassで, ~/.ssh/id_rsa に) is no password.
_COUNTERS = (r"(?!\s*[年月日号位個个次天时時分秒字文桁回%])"
             r"(?!\s*(?:で(?!す|し)|に(?!変|設|し|な)|を|から|へ|中|里|上|内))")

_CONTEXT_RULES: tuple[SecretRule, ...] = (
    SecretRule("private_key", SECRET, re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*)", re.DOTALL),
        "contains a PEM private key", needles=("private key",)),
    SecretRule("url_credentials", SECRET, re.compile(
        r"(?<![A-Za-z0-9])[a-z][a-z0-9+.-]{0,31}://(?P<value>[^\s/:@]*:[^\s/@]+|[A-Za-z0-9_-]{20,})@", re.IGNORECASE),
        "contains credentials inside a URL or connection string", checks.url_password_given, needles=("://",),
        lower=True),
    SecretRule("credential_assignment", SECRET, re.compile(
        rf"(?P<name>password|passwd|secret|token|(?<![A-Za-z0-9])(?:{_KEY_NAMES}))[\"']?\s*"
        r"(?:[:=]|=>|：)\s*(?P<value>\"[^\"\n]{3,}\"|'[^'\n]{3,}'|[^\s\"',;]{4,})", re.IGNORECASE),
        "contains a password/token/key assignment", checks.assigned, needles=_KEY_NEEDLES, lower=True),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"(?<![A-Za-z0-9])(?:pass(?:word|phrase|code)s?|passwd|pwd)"
        r"(?:\s+(?:for|of|to|on|at|in)\s+(?:the\s+|my\s+|our\s+|your\s+)?[\w.@/:-]+(?:\s+[\w.@/:-]+)?)?"
        r"(?:\s+(?:is\s+now|is\s+still|is\s+set\s+to|was\s+changed\s+to|was\s+set\s+to|changed\s+to|set\s+to|is|was"
        r"|reads)\s*[:=]?|\s*[:=])\s*[\"'“‘`]?(?P<value>[^\s\"'”’`]{3,64})", re.IGNORECASE),
        "contains a password", checks.value_given, needles=("pass", "pwd"), lower=True),
    SecretRule("credential_assignment", SECRET, re.compile(
        rf"(?:(?:{_CJK_PASSWORD_WORDS})(?:都|也|还|就)?\s*(?:{_CJK_IS}|[:：=])|token\s*(?:{_CJK_IS}))\s*"
        rf"[「『“\"'‘]?(?P<value>{_ASCII_VALUE}){_COUNTERS}", re.IGNORECASE),
        "contains a password/token/key (密码/密钥)", checks.value_given,
        needles=("密码", "口令", "密钥", "秘钥", "私钥", "令牌", "验证码", "pin码", "token", "密碼", "密鑰", "秘鑰",
                 "祕鑰", "私鑰", "權杖", "驗證碼", "pin碼", "通行碼")),
    SecretRule("credential_assignment", SECRET, re.compile(
        rf"(?:{_CJK_PASSWORD_WORDS})\s*[「『“\"'‘]?(?P<value>{_ASCII_VALUE}){_COUNTERS}"),
        "contains a password/token/key (密码/密钥)", checks.value_secret_looking,
        needles=("密码", "口令", "密钥", "秘钥", "私钥", "令牌", "验证码", "pin码", "密碼", "密鑰", "秘鑰", "祕鑰",
                 "私鑰", "權杖", "驗證碼", "pin碼", "通行碼")),
    SecretRule("credential_assignment", SECRET, re.compile(
        rf"(?:{_JA_PASSWORD_WORDS})\s*(?:は|が|を|も|：|:|=)?\s*[「『“\"'‘]?(?P<value>{_ASCII_VALUE}){_COUNTERS}"),
        "contains a password/token/key (パスワード)", checks.value_secret_looking,
        needles=("パスワード", "暗証番号", "パスコード", "合言葉", "pinコード", "ピン番号", "秘密鍵", "シークレット",
                 "アクセスキー", "apiキー", "トークン")),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"(?:sshpass\s+-p\s*|(?<![A-Za-z0-9-])--(?:password|passwd|pass|token|api-key|apikey|secret|secret-key"
        r"|secret-access-key|auth-token|access-token)(?:=|\s+)|(?<![A-Za-z0-9-])-p(?=['\"]))"
        r"(?P<value>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]{3,})"),
        "contains a password on a command line", checks.value_not_placeholder, needles=("-p", "--")),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"(?:mysql|mysqldump|mariadb)\s[^\n]{0,200}?(?<=\s)-p(?P<value>[^\s'\"-][^\s]*)"
        r"|(?:curl|wget)\s[^\n]{0,200}?(?<=\s)(?:-u|--user)\s+['\"]?(?P<value2>[^\s:'\"]+:[^\s'\"]+)"
        r"|redis-cli\s[^\n]{0,200}?(?<=\s)-a\s+(?P<value3>[^\s]+)"),
        "contains a password on a command line", checks.cli_value,
        needles=("mysql", "mariadb", "curl", "wget", "redis-cli")),
    SecretRule("pin", SECRET, re.compile(
        r"(?<![A-Za-z0-9])(?:PIN|(?i:pin)(?=\s*(?:code|number|is|was|[:=#])))(?:\s*(?:code|number|码|コード|番号))?"
        r"\s*(?:is|was|[:=：#]|是|为|は)?\s*(?P<value>[0-9]{4,8})(?![0-9]|[.,][0-9])"),
        "contains a PIN", needles=("pin",)),
    SecretRule("credential_assignment", SECRET, re.compile(
        r"(?:暗証番号|PINコード|取款密码|支付密码|银行卡密码|提款密碼|支付密碼|提款卡密碼|金融卡密碼)\s*"
        r"(?:は|が|：|:|是|为|為)?\s*(?P<value>[0-9]{4,8})(?![0-9])"),
        "contains a PIN", needles=("暗証番号", "pinコード", "取款密码", "支付密码", "银行卡密码", "提款密碼",
                                   "支付密碼", "提款卡密碼", "金融卡密碼")),
    SecretRule("url_credentials", SECRET, re.compile(
        r"(?<![\w/:.@%+-])(?P<user>[A-Za-z0-9._-]{1,64}):(?P<value>[^\s:@/]{3,64})@"
        r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|\[?[0-9a-f:]+\]?)", re.IGNORECASE),
        "contains credentials inside a URL or connection string", checks.user_password_pair, gate=_AT_PAIR),
    SecretRule("credential_words", SECRET, keywords.KEYED, "contains a password or PIN (key word and value)",
               locate=keywords.keyed_values, when=keywords.present),
    SecretRule("credential_table", SECRET, re.compile(keywords.TABLE_GATE.pattern),
               "contains a password or PIN in a table column", gate=keywords.TABLE_GATE, locate=keywords.table_values),
    SecretRule("aws_secret_key", SECRET, re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])"),
               "contains an AWS secret access key", checks.aws_secret, gate=_BASE64_RUN),
    SecretRule("encoded_secret", SECRET, re.compile(
        r"[A-Za-z0-9+/_-](?<![A-Za-z0-9+/_-][A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]{0,4096}[A-Z])"
        r"(?=[A-Za-z0-9+/_-]{0,4096}[a-z])[A-Za-z0-9+/_-]{23,4095}={0,2}"), "contains a base64-encoded secret",
        gate=_BASE64_RUN, decode=checks.b64_text),
    SecretRule("url_encoded_secret", SECRET, re.compile(r"[A-Za-z0-9._~+%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~+%-]{16,4096}"),
               "contains a URL-encoded secret", needles=("%",), decode=_url_decoded),
    SecretRule("hex_encoded_secret", SECRET, re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,2048}(?![0-9A-Fa-f])"),
               "contains a hex-encoded secret", gate=_HEX_RUN, decode=checks.hex_text),
    SecretRule("card_number", SECRET, re.compile(
        r"[0-9](?<![0-9.,-][0-9])[ .\-/_\u00a0]?(?:[0-9][ .\-/_\u00a0]?){11,17}[0-9](?![0-9]|[.,/-][0-9])"),
        "contains a payment card number", checks.card, gate=_NUMBER_RUN),
    SecretRule("national_id", SECRET, re.compile(r"[0-9](?<![0-9][0-9])[0-9]{16}[0-9Xx](?![0-9A-Za-z])"),
               "contains a national ID number", checks.cn_id, gate=_NUMBER_RUN),
    SecretRule("phone_number", SECRET, re.compile(
        r"1(?<![A-Za-z0-9+]1)[3-9][0-9](?:[ -]?[0-9]{4}){2}(?![0-9]|[-.][0-9])"),
        "contains a mobile phone number", checks.cn_mobile, gate=_NUMBER_RUN),
    SecretRule("phone_number", SECRET, re.compile(r"\+86[ -]?1[3-9][0-9](?:[ -]?[0-9]{4}){2}(?![0-9]|[-.][0-9])"),
               "contains a mobile phone number", needles=("+86",)),
    SecretRule("ssn", SECRET, re.compile(r"[0-8](?<![A-Za-z0-9-][0-8])[0-9]{2}-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])"),
               "contains a social security number", checks.ssn, gate=_NUMBER_RUN),
    SecretRule("ssn", SECRET, re.compile(
        r"(?i:ssn|social security(?: number| no\.?)?)[^0-9\n]{0,12}(?P<value>[0-9]{3}[ -]?[0-9]{2}[ -]?[0-9]{4})"
        r"(?![0-9])"), "contains a social security number", checks.ssn, needles=("ssn", "social security")),
    SecretRule("iban", SECRET, re.compile(
        r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"),
        "contains a bank account number (IBAN)", checks.iban, gate=_DIGIT_RUN),
)

_NETWORK_RULES: tuple[SecretRule, ...] = (
    SecretRule("private_ip", NETWORK, re.compile(
        r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d]|\.\d)"),
        "contains a private-range IP address", checks.private_ipv4,
        needles=("10.", "172.", "192.168.", "169.254.", "100.")),
    SecretRule("private_ip", NETWORK, re.compile(
        r"(?<![\w:])(?:f[cd][0-9a-f]{2}|fe80):[0-9a-f:]*:[0-9a-f]*", re.IGNORECASE),
        "contains a private IPv6 address", needles=("fc", "fd", "fe80")),
    SecretRule("internal_host", NETWORK, re.compile(
        r"(?<![A-Za-z0-9.-])[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:internal|corp|intranet|lan|local|localdomain)"
        r"(?![A-Za-z0-9_-])(?!\.\w)", re.IGNORECASE), "contains an internal host name",
        needles=(".internal", ".corp", ".intranet", ".lan", ".local")),
)

RULES: tuple[SecretRule, ...] = (
    *(rule for f in FORMATS for rule in _token_rules(f)),
    *(SecretRule(name, SECRET, re.compile(f"{_NOT_ALNUM_BEFORE}{rx}{_NOT_ALNUM_AFTER}"), reason, needles=needles)
      for name, rx, reason, _source, needles in PATTERNS),
    *_CONTEXT_RULES,
    *_NETWORK_RULES,
)
_REASONS = {rule.name: rule.reason for rule in reversed(RULES)}
_CASED = {r.pattern: re.compile(r.pattern.pattern, r.pattern.flags & ~re.IGNORECASE) for r in RULES if r.lower}


# --- matching -----------------------------------------------------------------------------------------------------


def fold(text: str) -> str:
    """NFKC, invisible characters removed, Unicode dashes made ``-``, disguised words' look-alikes made Latin:
    what evasion attempts look like once undone."""
    return fold_lookalikes(unicodedata.normalize("NFKC", text).translate(_FOLD_TABLE))


def _fold_with_origin(text: str) -> tuple[str, list[int]]:
    """:func:`fold` one character at a time, with the index in ``text`` each folded character came from."""
    out: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        f = c if c.isascii() else unicodedata.normalize("NFKC", c).translate(_FOLD_TABLE)
        out.append(f)
        origin.extend([i] * len(f))
    return fold_lookalikes("".join(out)), origin  # one character for one: ``origin`` still lines up


def _wanted(rule: SecretRule, text: str, low: str, gates: dict[re.Pattern[str], bool]) -> bool:
    if rule.when is not None:
        return rule.when(low)
    if rule.gate is not None:
        if rule.gate not in gates:
            gates[rule.gate] = rule.gate.search(text) is not None
        return gates[rule.gate]
    return any(n in low for n in rule.needles)


def find(text: str, kinds: tuple[str, ...] = (SECRET, NETWORK), _depth: int = 0) -> list[Finding]:
    """Every match in ``text`` as given (offsets into ``text``, no folding), earliest first, overlaps removed."""
    hits: list[Finding] = []
    low = text.lower()
    gates: dict[re.Pattern[str], bool] = {}
    for rule in RULES:
        if rule.kind not in kinds or not _wanted(rule, text, low, gates):
            continue
        if rule.decode is not None and _depth >= _MAX_DECODE_DEPTH:
            continue
        if rule.locate is not None:
            hits.extend(Finding(rule.name, rule.kind, s, e) for s, e in _located(rule, text, low) if e > s)
            continue
        hits.extend(Finding(rule.name, rule.kind, *_span(m)) for m in _matches(rule, text, low, _depth))
    hits.sort(key=lambda f: (f.start, -f.end))
    out: list[Finding] = []
    for f in hits:
        if not out or f.start >= out[-1].end:
            out.append(f)
    return out


def _matches(rule: SecretRule, text: str, low: str, depth: int = 0) -> list[re.Match[str]]:
    """``rule``'s non-empty matches that its ``valid`` (or its decoded text) accepts."""
    pattern = rule.pattern
    if rule.lower and len(low) == len(text):  # str.lower() keeps offsets except for a few letters (İ)
        pattern, text = _CASED[rule.pattern], low
    return [m for m in pattern.finditer(text) if m.end() > m.start() and _accepted(rule, m, depth)]


def _located(rule: SecretRule, text: str, low: str) -> list[tuple[int, int]]:
    """A ``locate`` rule's spans; it gets the text and its lowercased form with the same offsets (failing closed)."""
    assert rule.locate is not None
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)  # keep offsets (İ lowers to 2)
    try:
        return rule.locate(text, low)
    except Exception:  # see _accepted
        return [(0, len(text))]


def _accepted(rule: SecretRule, m: re.Match[str], depth: int) -> bool:
    """``rule``'s check on one match; a check that fails on odd input counts the match as a secret.

    The filter must be total — a note it cannot judge must neither crash a write nor stop indexing —
    and when unsure it fails closed: the span is redacted (or the write refused) rather than leaked.
    """
    try:
        if rule.decode is not None:
            decoded = rule.decode(m.group())
            return decoded is not None and bool(find(decoded, (SECRET,), depth + 1))
        return rule.valid is None or rule.valid(m)
    except Exception:  # a bug in one check on hostile input; see the docstring
        return True


def _span(m: re.Match[str]) -> tuple[int, int]:
    """The value alone for ``key = value`` forms (``value*`` groups), else the whole match."""
    for group in ("value", "value2", "value3"):
        if group in m.re.groupindex and m.start(group) >= 0:
            return m.span(group)
    return m.span()


def scan(text: str, kinds: tuple[str, ...] = (SECRET, NETWORK)) -> list[Finding]:
    """Every match in the folded form of ``text``, with offsets mapped back into ``text`` itself.

    The fast path folds the whole string in C; only a text that holds a finding *and*
    changes when folded is folded again character by character to map the offsets.
    """
    folded = fold(text)
    found = find(folded, kinds)
    if not found or folded == text:
        return found
    per_char, origin = _fold_with_origin(text)
    mapped = [Finding(f.rule, f.kind, origin[f.start], origin[f.end - 1] + 1)
              for f in find(per_char, kinds) if f.end > f.start]
    if not mapped:  # composition made the two folds differ: redact the whole text rather than leak
        return [Finding(found[0].rule, found[0].kind, 0, len(text))]
    return mapped


def check(content: str) -> PrivacyResult:
    """Reject content holding anything in :data:`RULES` (in its own or its folded form)."""
    for text in (content, fold(content)):
        found = find(text)
        if found:
            return PrivacyResult(False, found[0].rule, _REASONS[found[0].rule])
    return PrivacyResult(True)


def redact(text: str, level: str = "all") -> str:
    """``text`` with matches replaced by ``[REDACTED:rule]``; ``level`` "off", "secrets" or "all".

    Matching runs on the folded text (:func:`scan`) and the spans are mapped back, so
    everything that is not a secret stays as written. Newlines inside a match are kept
    (after the marker), so the line count is unchanged.
    """
    if level == "off":
        return text
    kinds = (SECRET,) if level == "secrets" else (SECRET, NETWORK)
    found = scan(text, kinds)
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
