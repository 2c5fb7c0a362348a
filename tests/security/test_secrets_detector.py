"""The one secret detector (memoryd.indexer.redaction.privacy) alone: reproductions, folding, checksums, the corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.secrets_eval import confusion, load
from memoryd.indexer.redaction import privacy
from tests.security import make_secrets_corpus
from tests.security.secrets_cases import REPRODUCTIONS

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("name", "note", "secret"), REPRODUCTIONS, ids=[r[0] for r in REPRODUCTIONS])
def test_every_reproduction_is_refused_redacted_and_kept_out_of_log_previews(name: str, note: str, secret: str) -> None:
    assert not privacy.check(note).passed, name
    for out in (privacy.redact(note, "secrets"), privacy.redact_for_log(note)):
        assert secret not in out and privacy.fold(secret) not in privacy.fold(out), out
        assert "[REDACTED:" in out and privacy.check(out).passed, out


def test_no_word_boundary_is_needed_before_a_token() -> None:
    """CJK letters and "_" are word characters: the old ``\\b`` rules let these through."""
    for before in ("密钥", "キーは", "key_", "KEY=", "(", "「"):
        assert privacy.check(f"{before}AKIAIOSFODNN7EXAMPLE").rule == "aws_access_key", before
    for inside in ("ask-proj-abcdefghijklmnopqrstuvwx1234", "XAKIAIOSFODNN7EXAMPLE", "mask_live_abcdefghijklmnop1234"):
        assert privacy.find(inside, (privacy.SECRET,)) == [], inside  # the prefix is the end of another word


def test_redaction_runs_on_the_folded_text_and_maps_back_to_the_original() -> None:
    note = "配置：ＡＫＩＡ\u200bＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ，别外传。\n下一行（全角）"
    assert privacy.redact(note, "secrets") == "配置：[REDACTED:aws_access_key]，别外传。\n下一行（全角）"
    multi = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter"
    out = privacy.redact(multi, "secrets")
    assert out.count("\n") == multi.count("\n") and out.endswith("after")


def test_scan_offsets_point_into_the_original_text() -> None:
    text = "ｋｅｙ ｓｋ－ｐｒｏｊ－ＡｂＣｄ１２３４ＥｆＧｈ５６７８ＩｊＫｌ９０ end"
    (f,) = privacy.scan(text, (privacy.SECRET,))
    assert text[f.start:f.end] == "ｓｋ－ｐｒｏｊ－ＡｂＣｄ１２３４ＥｆＧｈ５６７８ＩｊＫｌ９０"


@pytest.mark.parametrize(("text", "caught"), [
    ("card 4111 1111 1111 1111", True), ("card 4111-1111-1111-1111", True), ("card 4111.1111.1111.1111", True),
    ("card 4111/1111/1111/1111", True), ("card 4111111111111111", True),
    ("card 4111.1111.1111.1112", False),  # Luhn fails
    ("card 4111 1111-1111.1111", False),  # mixed separators: not how a card is written
    ("version 4.1.1.1.1.1.1.1.1.1.1.1.1.1", False),
    ("IBAN GB82 WEST 1234 5698 7654 32", True), ("IBAN GB82WEST12345698765432", True),
    ("IBAN GB82 WEST 1234 5698 7654 33", False),  # mod-97 fails
    ("SSN 219-09-9999", True), ("SSN 666-09-9999", False), ("SSN 219-00-9999", False),
    ("手机 13812345678", True), ("手机 +86 138 1234 5678", True), ("订单号 13812345678", False),
    ("手机 12812345678", False),  # no 12x mobile prefix
    ("身份证 11010519491231002X", True), ("身份证 110105194912310021", False),
])
def test_personal_data_needs_its_checksum_or_shape(text: str, caught: bool) -> None:
    assert (not privacy.check(text).passed) is caught, text


@pytest.mark.parametrize(("text", "caught"), [
    ("The password for the staging db is in the usual place.", False),
    ("The password is stored in the team vault.", False),
    ("the password is swordfish", True),
    ("password: see the wiki", False),
    ("secret_key = os.environ['SECRET_KEY']", False),
    ("PGPASSWORD=pg4dmin2024 psql", True),
    ("max_tokens=4096", False),
    ("curl -u $USER:$PASS https://x", False), ("curl -u admin:Adm1nPa55 https://x", True),
    ("密码需要每九十天更换一次。", False), ("密码 SHA256 加密", False), ("密码至少 12 位", False),
    ("邮箱密码改成了Mail#2024了。", True),
    ("パスワードは8文字以上にしてください。", False), ("パスワードはKeePassXCで管理", False),
    ("パスワードは hunter2 です", True), ("暗証番号は4821です", True),
    ("Pinned issue #4821", False), ("PIN 4821", True),
])
def test_passwords_in_prose(text: str, caught: bool) -> None:
    assert (not privacy.check(text).passed) is caught, text


def test_split_and_encoded_keys() -> None:
    assert privacy.check("sk-proj-Ab1C d2Ef 3Gh4 Ij5K l6Mn 7Op8").rule == "api_key"
    assert privacy.check("the sk-learn docs say we should scale features").passed  # words, not a split key
    assert privacy.check("c2stcHJvai1BYkNkRWZHaElqS2xNbk9wUXJTdFV2V3gxMjM0").rule == "encoded_secret"
    assert privacy.check("SGVsbG8sIHdvcmxkISBUaGlzIGlzIGp1c3QgYSB0ZXN0Lg==").passed  # "Hello, world! This is…"


def test_the_corpus_meets_its_targets() -> None:
    rows = load()
    assert sum(r["label"] == 1 for r in rows) >= 300 and sum(r["label"] == 0 for r in rows) >= 300
    assert {r["lang"] for r in rows} == {"en", "zh", "ja"}
    res = confusion(rows, lambda t: not privacy.check(t).passed)
    assert res["recall"] >= 0.98, res["errors"]
    assert res["fp_rate"] <= 0.01, res["errors"]


def test_the_held_out_notes_meet_the_same_targets() -> None:
    res = confusion(load(DATA / "secrets_heldout.jsonl"), lambda t: not privacy.check(t).passed)
    assert res["recall"] >= 0.98 and res["fp_rate"] <= 0.01, res["errors"]


def test_the_corpus_file_is_what_its_generator_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(make_secrets_corpus, "OUT", tmp_path / "corpus.jsonl")
    make_secrets_corpus.main()
    assert (tmp_path / "corpus.jsonl").read_text(encoding="utf-8") == (DATA / "secrets_corpus.jsonl").read_text(
        encoding="utf-8")


def test_positives_hold_no_real_looking_aws_key() -> None:
    """Generated AWS ids end in the documentation's EXAMPLE-style suffix, so no corpus line is a live key."""
    for row in map(json.loads, (DATA / "secrets_corpus.jsonl").read_text(encoding="utf-8").splitlines()):
        for key in re.findall(r"AKIA[0-9A-Z]{16}", str(row["text"])):
            assert key.endswith(("MPLE", "EXAMPLE")) or row["kind"] == "split_key", key


def test_redact_version_is_part_of_the_index_identity() -> None:
    """Redaction output changed with this detector: existing indexes must re-redact (engine identity)."""
    assert privacy.REDACT_VERSION == "5"  # 2: this detector; 3: every Cf character folded, URL/hex decoded;
    # 4: Cyrillic/Greek look-alikes in disguised words folded to Latin; 5: key words in 38 languages, tables
    from memoryd.indexer.config import Config
    from memoryd.indexer.embedding.hash_embedder import HashEmbedder
    from memoryd.indexer.ingestion.identity import rows_identity

    assert rows_identity(Config(), HashEmbedder())["redact"].endswith(f"/v{privacy.REDACT_VERSION}")


@pytest.mark.parametrize("text", [
    "ask-" * 25_000, "eyJ" * 33_000, "-eyJaaaaaaaaaa" * 8_000, "mysql " * 16_000, "curl -u " * 12_000,
    "sk-\u200b" * 25_000, "ｓｋ－" * 33_000, "x://" + "a-" * 50_000, "token=" * 20_000, "4111 " * 25_000,
], ids=["ask", "eyJ", "jwt-dashes", "mysql", "curl", "zero-width", "fullwidth", "scheme", "assign", "digits"])
def test_hostile_file_content_costs_linear_time(text: str) -> None:
    """File content is untrusted. Each of these took 10-135 s (quadratic backtracking) before the
    patterns got bounded lengths and real look-behinds; now each is a fraction of a second, and the
    suite's per-test timeout is what would catch a regression."""
    privacy.redact(text, "all")
    privacy.check(text)


KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


@pytest.mark.parametrize("text", [
    KEY[:10] + "\u200f" + KEY[10:],                   # right-to-left mark
    KEY[:10] + "\u200e" + KEY[10:],                   # left-to-right mark
    KEY[:10] + "\u202a" + KEY[10:] + "\u202c",        # bidi embedding
    KEY[:10] + "\U000e0041" + KEY[10:],               # a tag character (plane 14)
    "curl -d token=sk%2Dproj%2D" + KEY[8:],            # URL-encoded
    "blob " + KEY.encode().hex(),                       # hex-encoded
    "BLOB " + KEY.encode().hex().upper(),
    "프로젝트 키는" + KEY + "입니다",                        # Korean around the key
])
def test_variants_outside_the_issue_list_are_caught_and_redacted(text: str) -> None:
    """Every invisible format character (Unicode Cf) is folded away, and URL/hex encodings are decoded."""
    assert not privacy.check(text).passed
    assert "AbCdEfGhIjKlMnOpQrSt" not in privacy.fold(privacy.redact(text))
    assert "4162436445664768" not in privacy.redact(text).lower()


@pytest.mark.parametrize("text", [
    "commit 3119a6e189541d8f02ea17dcb3551ff2e18aefe5 fixed it",
    "sha256 " + "ab" * 32,
    "see https://example.org/a%20b%20c/docs?q=hello%20world%20again",
    "uuid 123e4567e89b12d3a456426614174000 in hex",
])
def test_hashes_and_ordinary_url_escapes_are_not_secrets(text: str) -> None:
    assert privacy.check(text).passed
