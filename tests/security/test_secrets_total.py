"""The secret detector is total: no string makes ``check``, ``redact``, ``redact_for_log`` or ``scan`` raise.

Issue #27: ``https://example.com/caf%E9-menu-….pdf`` (a Latin-1 percent escape, not UTF-8) raised
``UnicodeDecodeError`` in the URL-decoding rule, so ``remember`` answered -32603 and indexing stopped;
``%2525…`` (an escape of an escape, thousands deep) raised ``RecursionError``. Hypothesis feeds the
filter random text mixed with what broke it: percent escapes valid and invalid, NULs, base64 and hex
runs, key words, lone surrogates and very long lines.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.indexer.redaction import privacy

LATIN1_URL = "https://example.com/caf%E9-menu-2024-final-version.pdf"
KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

escapes = st.builds(lambda h: f"%{h:02X}", st.integers(0, 255)) | st.builds(lambda h: f"%{h:02x}", st.integers(0, 255))
pieces = st.one_of(
    st.text(max_size=30),  # any code point, lone surrogates included
    escapes,
    st.sampled_from(["%", "%2", "%25", "%zz", "\x00", "\ufffd", "://", "@", ":", "=", "password", "密碼", "パスワード",
                     "пароль", "PIN", "sk-proj-", "eyJ", "-----BEGIN PRIVATE KEY-----", "4111 ", "\u200b", "İ", "ß",
                     "\n", "|", "：", "是", "は", KEY, LATIN1_URL]),
    st.text(alphabet="0123456789abcdefABCDEF", min_size=30, max_size=80),  # hex runs
    st.text(alphabet="ABCDEFabcdef0123456789+/=", min_size=20, max_size=80),  # base64-ish runs
)
notes = st.lists(pieces, max_size=40).map("".join)


def _all_calls(text: str) -> None:
    result = privacy.check(text)
    assert isinstance(result.passed, bool)
    for level in ("off", "secrets", "all"):
        out = privacy.redact(text, level)
        assert out.count("\n") == text.count("\n")  # redaction never moves lines
    assert len(privacy.redact_for_log(text)) <= 120
    for f in privacy.scan(text):
        assert 0 <= f.start < f.end <= len(text)


@pytest.mark.parametrize("text", [
    LATIN1_URL,
    f"note: {LATIN1_URL} and more",
    "x%25" + "25" * 3000 + "41abcdefghijklmnopqrstuvw",  # an escape of an escape, 3,000 deep
    "%" + "25" * 2000 + "a" * 20,
    "%E9%FF%C0%80" * 50 + "abcdefghijklmnopqrstuvwxyz",  # invalid UTF-8 sequences only
    "\x00" * 1000 + LATIN1_URL + "\x00",
    "\ud800%E9abcdefghijklmnopqrstu\udfff",  # lone surrogates (JSON allows them)
])
def test_inputs_that_used_to_raise_are_judged(text: str) -> None:
    _all_calls(text)


def test_an_ordinary_latin1_url_passes_and_a_secret_beside_a_bad_escape_is_still_caught() -> None:
    assert privacy.check(LATIN1_URL).passed
    assert privacy.redact(LATIN1_URL) == LATIN1_URL
    hidden = "curl -d token=caf%E9" + KEY.replace("-", "%2D")
    assert not privacy.check(hidden).passed
    assert "AbCdEfGhIjKlMnOp" not in privacy.redact(hidden)
    double = "blob " + KEY.replace("-", "%252D")  # escaped twice
    assert not privacy.check(double).passed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes)
def test_no_note_makes_the_filter_raise(text: str) -> None:
    _all_calls(text)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pieces, st.integers(1_000, 20_000))
def test_very_long_lines_do_not_make_the_filter_raise(piece: str, times: int) -> None:
    _all_calls(piece * (times // max(1, len(piece))))
