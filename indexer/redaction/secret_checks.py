"""The checks behind the privacy filter's rules: is this match a secret, or prose that looks like one?

Split from :mod:`memoryd.indexer.redaction.privacy`, which holds the rule table and the
matching. Each ``valid``-style function takes the regex match a rule produced and
answers whether it is the real thing: a value that is not a placeholder or a prose
word, a card number that passes Luhn, an IBAN that passes mod-97, a base64 run that
decodes to text. Pure functions over the match; no state.
"""

from __future__ import annotations

import base64
import binascii
import re

PLACEHOLDER = re.compile(r"^(?:<[^>]*>|\*+|x{3,}|\.{3}|…|\$\{[^}]*\}|\{\{[^}]*\}\}|%\w+%|\$\w+|\$\(\w+\)|null|none"
                          r"|nil|true|false|redacted|\[redacted[^\]]*\]|required|optional|empty|your[_-]\w+)$",
                          re.IGNORECASE)

def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that follow "the password is" in prose about passwords, not in a sentence giving one.
PROSE_WORDS = words("""
a an the in on at of for to not now still also being too very only just my your our their his her its this that these
those same different set unset reset changed stored saved kept managed rotated expired correct incorrect wrong right
invalid valid weak strong long short secure insecure required optional empty blank missing hashed encrypted hidden
masked shared known unknown available needed necessary generated provided given sent printed written listed fine ok
okay good bad simple complex easy hard random unique private personal secret public safe unsafe temporary default new
old current previous here there below above attached included inside somewhere nowhere never always usually often
sometimes probably likely what which who whatever something nothing anything everything none nobody someone one two
three four five six seven eight nine ten eleven twelve fifteen sixteen twenty enough then than and or but if when
where how why as by with from into about over under after before again all any some each every both either neither no
yes more less most least much many few several own such up down out off back away so because since until while via
per use using used needs need must should will would can could may might shall be been is was are were has have had
do does did locked unlocked disabled enabled active inactive compromised leaked exposed obvious guessable trivial it
it's that's what's there's mandatory complicated forgotten lost unchanged identical printed different standard shown
see ask check look find get call contact refer follow read
""")
#: A value that is code reading the secret from somewhere else (``os.environ[…]``, ``getenv(…)``), or a file path.
INDIRECT = re.compile(r"^(?:[A-Za-z_][\w.]*[(\[]|~?/|\.\.?/|\$)")
PROSE_SUFFIXES = ("ed", "ing", "ly", "tion", "able", "ible", "ment", "ness")
#: Algorithm and encoding names that follow 密码/パスワード without being a password (密码 SHA256 哈希).
TECH_TERMS = words("""
md5 sha1 sha-1 sha256 sha-256 sha512 sha-512 sha3 bcrypt scrypt argon2 argon2id pbkdf2 aes aes128 aes256 aes-128
aes-256 aes-gcm rsa rsa2048 rsa4096 ecdsa ed25519 hmac hmac-sha256 base64 utf-8 utf8 ascii unicode totp hotp otp 2fa mfa
sso ldap oauth oauth2 saml kerberos ntlm radius vault 1password bitwarden keepass lastpass keychain env json yaml
pkcs#1 pkcs#8 pkcs#12 pkcs1 pkcs8 pkcs12 pkcs#11 pkcs11 wpa wpa2 wpa3 wpa2-psk wpa3-sae
""")




def value(m: re.Match[str]) -> str:
    return m.group("value").strip("\"'`“”‘’「」『』")


def value_not_placeholder(m: re.Match[str]) -> bool:
    return not PLACEHOLDER.match(value(m))


def is_prose_word(v: str) -> bool:
    """A plain word that reads as part of a sentence about a password (``stored``, ``rotated``, ``the``)."""
    w = v.rstrip(".,;:!?。，、)").lower()
    if not w.replace("'", "").replace("-", "").isalpha():
        return False
    return w in PROSE_WORDS or (len(w) > 4 and w.endswith(PROSE_SUFFIXES))


_QUOTES = frozenset("\"'`“”‘’「」『』«»„")
#: Another word after the value, on the same line: "Password: minimo 8 caratteri" starts a phrase.
_PHRASE_GOES_ON = re.compile(r"[ \t]+[^\W_]")


def value_given(m: re.Match[str]) -> bool:
    """``password is X`` / ``password: X`` gives a password unless X is a placeholder or a prose word.

    A bare word (letters only) counts only when it ends the clause ("the password is swordfish."):
    followed by more words it is the start of a sentence in some language, not a password.
    """
    v = value(m)
    quoted = m.string[m.start("value") - 1:m.start("value")] in _QUOTES
    if v.isalpha() and not quoted and _PHRASE_GOES_ON.match(m.string, m.end()):
        return False
    return (not PLACEHOLDER.match(v) and not INDIRECT.match(v) and not is_prose_word(v)
            and v.lower().strip(".,;:") not in TECH_TERMS)


def value_secret_looking(m: re.Match[str]) -> bool:
    """For ``密码 X`` with no 是/为/: between: X has a digit, a symbol or mixed case and is no algorithm name."""
    v = value(m).rstrip(".,;:!?")
    mixed = any(c.isupper() for c in v) and any(c.islower() for c in v)
    looks = any(c.isdigit() for c in v) or not v.isalnum() or mixed
    return looks and value_given(m)


def private_ipv4(m: re.Match[str]) -> bool:
    o = [int(x) for x in m.groups()[:4]]
    if any(x > 255 for x in o):
        return False
    return (o[0] == 10 or (o[0] == 172 and 16 <= o[1] <= 31) or (o[0] == 192 and o[1] == 168)
            or (o[0] == 169 and o[1] == 254) or (o[0] == 100 and 64 <= o[1] <= 127))


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return total % 10 == 0


CARD_PREFIX = re.compile(r"4|5[1-5]|2[2-7]|3[47]|3[0689]|35|6011|6[245]")


def card(m: re.Match[str]) -> bool:
    """13–19 digits, one separator used throughout (or none), a card issuer's prefix, and the Luhn check."""
    s = m.group()
    digits = "".join(c for c in s if c.isdigit())
    seps = {c for c in s if not c.isdigit()}
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1 or len(seps) > 1:
        return False
    if seps and any(len(g) < 3 for g in re.split(r"\D", s)):
        return False  # 4111.1111.1111.1111 and 3782 822463 10005, not 1.2.3.4.5.6.7
    return bool(CARD_PREFIX.match(digits)) and luhn_ok(digits) and not labelled_other(m)


def cn_id(m: re.Match[str]) -> bool:
    s = m.group().upper()
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], weights, strict=True)) % 11]
    return s[17] == check and 1900 <= int(s[6:10]) <= 2100 and 1 <= int(s[10:12]) <= 12


ORDER_WORDS = re.compile(r"(?:订单|单号|编号|工单|流水|运单|快递|批次|序列|型号|发票|注文|型番|伝票|order|invoice"
                          r"|ticket|tracking|ref|sku|serial|model|part|batch|build)\s*(?:no\.?|number|num|id|#|号|番号)?"
                          r"\s*[:：#]?\s*$", re.IGNORECASE)


def labelled_other(m: re.Match[str]) -> bool:
    """The words just before call the number an order, ticket, model or serial number (not personal data)."""
    return ORDER_WORDS.search(m.string[max(0, m.start() - 20):m.start()]) is not None


def ssn(m: re.Match[str]) -> bool:
    """The SSA's never-issued area, group and serial numbers (000, 666, 9xx; 00; 0000) are not SSNs."""
    d = re.sub(r"[^0-9]", "", m.group("value") if m.re.groupindex.get("value") else m.group())
    area, group, serial = d[:3], d[3:5], d[5:]
    return (area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
            and not labelled_other(m))


def assigned(m: re.Match[str]) -> bool:
    """``name = value``: a value given; for tokens and keys (not passwords) a short number is a count, not a secret."""
    name, v = m.group("name").lower(), value(m)
    if v.isdigit() and len(v) < 12 and not ("pass" in name or "pwd" in name):
        return False
    return value_given(m)


def cli_value(m: re.Match[str]) -> bool:
    """``-pSECRET``, ``-u user:SECRET``, ``-a SECRET``: the secret part is no placeholder (``$API_PASS``)."""
    v = next(g for g in m.groups() if g)
    return not PLACEHOLDER.match(v.split(":", 1)[-1].strip("\"'"))


def cn_mobile(m: re.Match[str]) -> bool:
    """An 11-digit 1[3-9]… number, unless the words just before call it an order, ticket or serial number."""
    return not labelled_other(m)


IBAN_LENGTHS = {c[:2]: int(c[2:]) for c in words("""
    AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BR29 CH21 CR22 CY28 CZ24 DE22 DK18
    DO28 EE20 EG29 ES24 FI18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 IS26 IT27 JO30 KW30 KZ20
    LB28 LC32 LI21 LT20 LU20 LV21 MC27 MD24 ME22 MK19 MR27 MT31 MU30 NL18 NO15 PK24 PL28 PS29 PT25 QA29 RO24 RS22 SA24
    SC31 SE24 SI19 SK24 SM27 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20""")}


def iban(m: re.Match[str]) -> bool:
    """A country's IBAN length and the ISO 13616 mod-97 check."""
    s = m.group().replace(" ", "")
    if IBAN_LENGTHS.get(s[:2]) != len(s):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def random_pieces(m: re.Match[str]) -> bool:
    """A key split by spaces: the pieces together hold a digit and a letter, and none is a common word."""
    pieces = m.group("body").split()
    body = "".join(pieces)
    return (any(c.isdigit() for c in body) and any(c.isalpha() for c in body)
            and not any(p.isalpha() and p.islower() and len(p) > 3 and p in PROSE_WORDS for p in pieces))


def aws_secret(m: re.Match[str]) -> bool:
    """40 base64 characters, mixed case with a digit, and a ``/`` or ``+`` or "secret"/"aws"/密钥 just before.

    Hex digests are lower case and base64 hashes are 28 or 44 characters long, so a
    40-character mixed-case run with a slash is a credential far more often than not.
    """
    s = m.group()
    if not (any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)):
        return False
    if "/" in s or "+" in s:
        return True
    before = m.string[max(0, m.start() - 120):m.start()].lower()
    return any(w in before for w in ("secret", "aws", "密钥", "秘钥", "シークレット", "秘密", "credential"))


def b64_text(run: str) -> str | None:
    s = run.rstrip("=")
    s += "=" * (-len(s) % 4)
    try:
        raw = base64.urlsafe_b64decode(s) if ("-" in s or "_" in s) else base64.b64decode(s, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if text and printable >= 0.9 * len(text) else None


def hex_text(run: str) -> str | None:
    """The UTF-8 text a hex run encodes, if it is readable text (git hashes and digests are not)."""
    try:
        text = bytes.fromhex(run).decode("utf-8")
    except ValueError:
        return None
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if text and printable >= 0.9 * len(text) else None


# --- "key word + value" in any language: is the value a credential? -------------------------------------------

NONE, DIGITS, MIXED, STRONG = 0, 1, 2, 3
_EDGE = "\"'`“”‘’„«»‹›「」『』()[]{}<>.,;:!?。，、！？；：*_~"  # quotes, brackets, punctuation, Markdown emphasis
#: Dates, times, versions, sizes, percentages and ranges (numbers a policy or a log line gives after a key
#: word); words joined by ``-``, ``.`` or ``_`` (e-mail, Oma-Laptop, parsing_context, MYSQL_NATIVE_PASSWORD);
#: addresses, paths (a/b/c), code (v8::Object, async_req=True, module.Class), command-line flags (--client-id)
#: and anything holding a space (a phrase, not a credential).
NOT_A_VALUE = re.compile(
    r"^(?:\d{4}[-/.]\d{1,2}(?:[-/.]\d{1,2})?|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}|\d{4}/\d{2}|\d{1,2}:\d{2}(?::\d{2})?"
    r"|v?(?:\d+:)?\d+(?:\.\d+)+[\w.+~-]*|\d+(?:[.,]\d+)?\s?(?:%|[kmgt]i?b|ms|s|h|px)|\d{1,3}\s?[-–~]\s?\d{1,3}|\d{1,3}\+"
    r"|\d{1,3}[-‐]?[^\W\d_]{2,}|[^\W\d_]+(?:[-'’._/]+[^\W\d_]+)+|(?:[a-z][a-z0-9+.-]*://|www\.|@)\S*"
    r"|\S+@\S+\.\S+|\S*\s.*|(?:[\w.-]*/){2,}[\w.-]*|\S*::\S*|--?[a-z][\w:.-]*(?:=\S*)?|[\w.-]+/[\w.-]+\.[a-z]{1,5}|[a-z_]\w*(?:\.[a-z_]\w*)+|[a-z_][\w.]*=.*)$",
    re.IGNORECASE | re.DOTALL)


_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
#: Combining marks (and whole blocks of scripts built on them: Indic, Thai, Lao, Myanmar, Khmer): a vowel sign
#: inside पासवर्ड or รหัสผ่าน is no letter to ``re``'s ``\w``, but it is part of the word, not a symbol.
COMBINING = ("\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
             "\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3099\u309a")
#: Neither a letter, a digit nor a combining mark.
_SYMBOL = re.compile(f"[^\\w{COMBINING}]|_")
_JOINERS = str.maketrans("", "", "-._")


def credential_shape(raw: str) -> int:
    """How much a value after a password/PIN key word looks like a credential, whatever the language.

    ``STRONG``: three of lower case, upper case, digits and symbols (``Bank$2024``, ``Xk9#mP2q``).
    ``MIXED``: letters with digits or symbols (``kotik2020``, ``admin@print``). ``DIGITS``: 4-12 digits,
    with or without symbols (``4821``, ``#8023``, ``7-3-9-1``). ``NONE``: a word of a sentence
    (``vergessen``, ``stored``), a placeholder, a date, a time, a version, a count with its unit
    (``12``, ``4-stellig``, ``8+``), an algorithm name, a mail address or a URL.
    The shape, not a per-language word list, is what tells "Passwort: Sonnen#Blume24" from
    "Passwort: liegt im Tresor"; what the caller accepts depends on how clearly the text said
    that a value follows (a ``:`` or an "is" is clearer than a bare neighbour).
    """
    quoted = raw.strip("\"'`“”‘’„«»‹›「」『』 ")
    if PLACEHOLDER.match(quoted) or INDIRECT.match(quoted):
        return NONE  # ${DB_PASSWORD}, <your-password>, self._get(…), os.environ[…]
    v = raw.strip(_EDGE)
    if not 4 <= len(v) <= 64 or v.isalpha():
        return NONE  # too short or long, or a word (capitalised or camel-cased: KeePass, WiFi)
    if PLACEHOLDER.match(v) or INDIRECT.match(v) or v.lower() in TECH_TERMS or NOT_A_VALUE.match(v):
        return NONE
    digits = len(_DIGIT.findall(v))
    symbol = _SYMBOL.search(v) is not None
    if _LETTER.search(v) is None:
        return DIGITS if 4 <= digits <= 12 else NONE
    if digits == 0 and not symbol:
        return NONE  # letters and vowel signs only: a word of an Indic or Thai script
    # For STRONG, "-", "." and "_" do not count: they join the parts of names (scram-sha-256, us-west-2).
    classes = (v != v.upper()) + (v != v.lower()) + (digits > 0) + (_SYMBOL.search(v.translate(_JOINERS)) is not None)
    return STRONG if classes >= 3 else MIXED


#: ``name:value@host`` that is an address, not a login: ``mailto:bob@x``, ``sip:alice@pbx``.
NOT_A_USER = frozenset(("mailto", "sip", "sips", "tel", "xmpp", "im", "news", "http", "https", "ftp", "ssh", "git",
                        "re", "fw", "fwd", "cc", "to", "from", "by", "note", "notes", "email", "mail", "contact",
                        "user", "group", "member", "domain", "serviceaccount", "principal", "role", "deleted"))


def user_password_pair(m: re.Match[str]) -> bool:
    """``user:secret@host`` without a scheme: a strong secret part (``jenkins:J3nk1ns#Build@…``).

    Without a scheme the same shape is an address in many notations (``user:alice1@example.com`` in
    IAM policies, ``sip:…``), so the bar is a value with three character classes."""
    return m.group("user").lower() not in NOT_A_USER and credential_shape(m.group("value")) >= STRONG


#: What documentation writes where a URL's password goes: ``redis://:pass@localhost``, ``user:password@host``.
URL_PLACEHOLDERS = frozenset(("pass", "password", "passwd", "pwd", "pw", "secret", "token", "key", "apikey"))


def url_password_given(m: re.Match[str]) -> bool:
    """``scheme://user:secret@`` (or ``scheme://:secret@``): the secret is no placeholder (``:TOKEN``, ``<pw>``)."""
    whole = value(m)
    secret = whole.split(":", 1)[-1]
    return (not any(PLACEHOLDER.match(v) for v in (whole, secret)) and not (secret.isalpha() and secret.isupper())
            and secret.lower() not in URL_PLACEHOLDERS)
