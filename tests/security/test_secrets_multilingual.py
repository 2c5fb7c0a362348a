"""Issue #28 item 6: the secret detector, round 2 — the forms that passed, and passwords/PINs in 20+ languages.

Measured on main at 7c97e41: Traditional Chinese 密碼/登入密碼, ``pass:``, ``pw``, ``redis://:pw@host``,
``user:pw@host`` without a scheme and a password in a Markdown table cell reached the index in
clear, and so did password key words in every language but English, Chinese and Japanese. Each
language here has a note that gives a password (refused, only the value redacted) and the
sentences that only talk about passwords (passed untouched): "I forgot my password", "change
the password every three months", "the password policy requires 12 characters".

The labelled set ``data/secrets_multilingual.jsonl`` was written before the rules and split by a
hash of each note; the targets are asserted on the half the rules were not tuned on.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from bench.secrets_multilingual import LANGUAGES, load, measure, rates
from memoryd.indexer.redaction import privacy

DATA = Path(__file__).parent / "data" / "secrets_multilingual.jsonl"

#: (name, note, the secret in it) — the forms of the issue, as measured on main.
FORMS = [
    ("zh_hant", "我的密碼是 Tw!8823abc", "Tw!8823abc"),
    ("zh_hant_login", "銀行網銀登入密碼：Bk#5520tw", "Bk#5520tw"),
    ("zh_hant_wei", "公司信箱的登入密碼為 Ml2024@corp", "Ml2024@corp"),
    ("pass_colon", "Office wifi pass: Gr33nT3a!2024", "Gr33nT3a!2024"),
    ("pw", "nas login: admin, pw: Kx8#vQ2m", "Kx8#vQ2m"),
    ("pw_is", "pw for the router is qP7v!xL2", "qP7v!xL2"),
    ("redis_empty_user", "cache: redis://:R3d1sS3cr3t@cache-01.example.com:6379/0", "R3d1sS3cr3t"),
    ("user_pw_host", "staging box: deploy:Dpl0y!2024@staging.example.com", "Dpl0y!2024"),
    ("table_column", "| service | user | password |\n|---|---|---|\n| NAS | admin | Nas!Adm1n77 |", "Nas!Adm1n77"),
    ("table_row", "| key | value |\n|---|---|\n| password | Pg$ecret2025 |", "Pg$ecret2025"),
]

#: language -> (a note giving a password or PIN, the secret, look-alikes that give none).
LOOKALIKES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "en": ("The router password: Sunny#Day42", "Sunny#Day42",
           ("I forgot my password.", "Change the password every three months.",
            "The password policy requires 12 characters.")),
    "de": ("Das WLAN-Passwort lautet Garten#2024", "Garten#2024",
           ("Ich habe mein Passwort vergessen.", "Das Passwort alle drei Monate ändern.",
            "Die Passwortrichtlinie verlangt 12 Zeichen.")),
    "fr": ("Mot de passe du routeur : Rouge!Vin88", "Rouge!Vin88",
           ("J'ai oublié mon mot de passe.", "Changez le mot de passe tous les trois mois.",
            "La politique de mot de passe exige 12 caractères.")),
    "es": ("La contraseña del router es Toro#Rojo55", "Toro#Rojo55",
           ("Olvidé mi contraseña.", "Cambia la contraseña cada tres meses.",
            "La política de contraseñas exige 12 caracteres.")),
    "pt": ("A senha do roteador é Praia#Sol31", "Praia#Sol31",
           ("Esqueci minha senha.", "Troque a senha a cada três meses.",
            "A política de senhas exige 12 caracteres.")),
    "it": ("La password del router è Pizza#Forno9", "Pizza#Forno9",
           ("Ho dimenticato la password.", "Cambia la password ogni tre mesi.",
            "La policy delle password richiede 12 caratteri.")),
    "nl": ("Het wachtwoord van de router is Fiets#Molen7", "Fiets#Molen7",
           ("Ik ben mijn wachtwoord vergeten.", "Verander het wachtwoord elke drie maanden.",
            "Het wachtwoordbeleid vereist 12 tekens.")),
    "sv": ("Lösenordet till routern är Älg#Skog2024", "Älg#Skog2024",
           ("Jag har glömt mitt lösenord.", "Byt lösenord var tredje månad.",
            "Lösenordspolicyn kräver 12 tecken.")),
    "pl": ("Hasło do routera: Zamek#Wawel12", "Zamek#Wawel12",
           ("Zapomniałem hasła.", "Zmieniaj hasło co trzy miesiące.", "Polityka haseł wymaga 12 znaków.")),
    "cs": ("Heslo k routeru je Pivo#Praha66", "Pivo#Praha66",
           ("Zapomněl jsem heslo.", "Heslo měňte každé tři měsíce.", "Politika hesel vyžaduje 12 znaků.")),
    "tr": ("Modem şifresi: Kedi#Bal2024", "Kedi#Bal2024",
           ("Şifremi unuttum.", "Şifreyi her üç ayda bir değiştirin.", "Şifre politikası 12 karakter gerektirir.")),
    "vi": ("Mật khẩu router là Pho#Bo2024", "Pho#Bo2024",
           ("Tôi quên mật khẩu.", "Đổi mật khẩu ba tháng một lần.", "Chính sách mật khẩu yêu cầu 12 ký tự.")),
    "id": ("Kata sandi router adalah Nasi#Goreng7", "Nasi#Goreng7",
           ("Saya lupa kata sandi.", "Ganti kata sandi setiap tiga bulan.",
            "Kebijakan kata sandi mewajibkan 12 karakter.")),
    "ru": ("Пароль от роутера: Zima#Moroz77", "Zima#Moroz77",
           ("Я забыл пароль.", "Меняйте пароль каждые три месяца.", "Политика паролей требует 12 символов.")),
    "uk": ("Пароль від роутера — Vyshnya#2024", "Vyshnya#2024",
           ("Я забув пароль.", "Змінюйте пароль кожні три місяці.", "Політика паролів вимагає 12 символів.")),
    "el": ("Ο κωδικός του router είναι Elia#Ladi42", "Elia#Ladi42",
           ("Ξέχασα τον κωδικό μου.", "Αλλάζετε τον κωδικό κάθε τρεις μήνες.",
            "Η πολιτική κωδικών απαιτεί 12 χαρακτήρες.")),
    "ar": ("كلمة مرور الراوتر: Nakhla#2024", "Nakhla#2024",
           ("نسيت كلمة المرور.", "غيّر كلمة المرور كل ثلاثة أشهر.", "سياسة كلمات المرور تتطلب 12 حرفًا.")),
    "fa": ("رمز عبور مودم: Anar#Shab61", "Anar#Shab61",
           ("رمز عبورم را فراموش کردم.", "رمز عبور را هر سه ماه عوض کنید.", "رمز عبور باید ۱۲ کاراکتر باشد.")),
    "he": ("הסיסמה של הנתב היא Tamar#Gan55", "Tamar#Gan55",
           ("שכחתי את הסיסמה.", "החליפו סיסמה כל שלושה חודשים.", "מדיניות הסיסמאות דורשת 12 תווים.")),
    "hi": ("राउटर का पासवर्ड: Aam#Ras2024", "Aam#Ras2024",
           ("मैं अपना पासवर्ड भूल गया।", "हर तीन महीने में पासवर्ड बदलें।", "पासवर्ड नीति 12 अक्षर मांगती है।")),
    "bn": ("রাউটারের পাসওয়ার্ড: Ilish#Mach9", "Ilish#Mach9",
           ("আমি পাসওয়ার্ড ভুলে গেছি।", "প্রতি তিন মাসে পাসওয়ার্ড বদলান।", "পাসওয়ার্ড নীতিতে ১২টি অক্ষর লাগে।")),
    "th": ("รหัสผ่านเราเตอร์คือ Mango#Rice88", "Mango#Rice88",
           ("ฉันลืมรหัสผ่าน", "เปลี่ยนรหัสผ่านทุกสามเดือน", "นโยบายรหัสผ่านกำหนด 12 ตัวอักษร")),
    "ko": ("공유기 비밀번호는 Kimchi#2024 입니다", "Kimchi#2024",
           ("비밀번호를 잊어버렸다.", "비밀번호는 3개월마다 바꿔야 한다.", "비밀번호 정책은 12자를 요구한다.")),
    "ja": ("ルーターのパスワード：Sakura#2024", "Sakura#2024",
           ("パスワードを忘れた。", "パスワードは3か月ごとに変更すること。", "パスワードポリシーは12文字を要求する。")),
    "zh": ("路由器密码是 Panda#2024", "Panda#2024",
           ("我忘了密码。", "密码每三个月换一次。", "密码策略要求 12 个字符。")),
    "zh-Hant": ("路由器的登入密碼：Bubble#Tea7", "Bubble#Tea7",
                ("我忘記密碼了。", "密碼每三個月要換一次。", "密碼政策要求 12 個字元。")),
    "ko-pin": ("체크카드 비밀번호는 7720", "7720", ("카드 비밀번호는 4자리 숫자다.",)),
    "de-pin": ("PIN der EC-Karte: 4721", "4721", ("Die PIN ist 4-stellig.", "PIN: noch 2 Versuche")),
}


@pytest.mark.parametrize(("name", "note", "secret"), FORMS, ids=[f[0] for f in FORMS])
def test_the_forms_that_passed_on_main_are_refused_and_redacted(name: str, note: str, secret: str) -> None:
    assert not privacy.check(note).passed, name
    out = privacy.redact(note, "secrets")
    assert secret not in out and "[REDACTED:" in out, out
    assert out.count("\n") == note.count("\n")
    assert secret not in privacy.redact_for_log(note)


@pytest.mark.parametrize("lang", sorted(LOOKALIKES))
def test_each_language_refuses_a_password_and_passes_its_look_alikes(lang: str) -> None:
    note, secret, lookalikes = LOOKALIKES[lang]
    assert not privacy.check(note).passed, note
    out = privacy.redact(note, "secrets")
    head, _, tail = note.partition(secret)
    assert re.fullmatch(re.escape(head) + r"\[REDACTED:\w+\]" + re.escape(tail), out), out  # only the value
    for text in lookalikes:
        assert privacy.check(text).passed, text
        assert privacy.redact(text, "all") == text


def test_at_least_twenty_languages_and_every_major_script() -> None:
    langs = {k.split("-pin")[0] for k in LOOKALIKES}
    assert len(langs) >= 20
    scripts = {"Latin": "a", "Cyrillic": "П", "Arabic": "ك", "Devanagari": "प", "Han": "密", "kana": "パ",
               "Hangul": "비", "Thai": "ร", "Hebrew": "ס", "Greek": "κ", "Bengali": "প"}
    notes = " ".join(n for n, _s, _l in LOOKALIKES.values())
    assert all(ch in notes for ch in scripts.values())


@pytest.mark.parametrize(("text", "caught"), [
    ("Season pass: 2024/25, section 112", False), ("Boarding pass: gate B12", False),
    ("pass it to the parser with --strict", False), ("pin numpy to 1.26", False), ("pin the version to 1234", False),
    ("PIN to 4821", True), ("PASS: test_login_flow2", False),
    ("password = self._get_password(url)", False), ("Password: stored in 1Password under Home", False),
    ("Passwort geändert am: 12.03.2024", False), ("PIN: 4-stellig", False), ("密码：8 位以上", False),
    ("Don't put user:password@host URLs in scripts", False), ("member: user:alice1@example.com", False),
    ("postgres://:pass@localhost/db", False), ("hasło to Kot#123", True),
    ("the passphrase is limited to 1024 bytes", False), ("password: «lavande»", True),
])
def test_general_mechanisms_not_per_sentence_rules(text: str, caught: bool) -> None:
    """Value shape, separators and each language's own copulas decide, not the sentence."""
    assert (not privacy.check(text).passed) is caught, text


def test_the_split_was_made_by_a_hash_of_the_text() -> None:
    """The split column is a function of the text alone (fixed before tuning): nobody moved a note."""
    for row in load(DATA):
        first = hashlib.sha256(str(row["text"]).encode("utf-8")).digest()[0]
        assert row["split"] == ("tune" if first % 2 == 0 else "held-out"), row["text"]


def test_the_labelled_set_is_large_and_wide_enough() -> None:
    rows = load(DATA)
    assert sum(r["label"] == 1 for r in rows) >= 200 and sum(r["label"] == 0 for r in rows) >= 200
    assert len({r["lang"] for r in rows}) >= 15
    assert {str(r["lang"]) for r in rows} <= set(LANGUAGES)
    for half in ("tune", "held-out"):
        assert 0.4 <= sum(r["split"] == half for r in rows) / len(rows) <= 0.6


def test_the_held_out_half_meets_the_targets() -> None:
    result = measure(load(DATA), lambda t: not privacy.check(t).passed)
    recall, fp = rates(result["held-out"]["all"])
    assert recall >= 0.95 and fp <= 0.02, (recall, fp)
    recall, fp = rates(result["tune"]["all"])
    assert recall >= 0.95 and fp <= 0.02, (recall, fp)


def test_the_docs_report_what_the_set_measures() -> None:
    """docs/security/secrets.md quotes the held-out line the bench prints; re-measure when the rules change."""
    result = measure(load(DATA), lambda t: not privacy.check(t).passed)
    c = result["held-out"]["all"]
    doc = (Path(__file__).parents[2] / "docs" / "security" / "secrets.md").read_text(encoding="utf-8")
    line = json.dumps({"half": "held-out", "notes": sum(c), "tp": c[0], "fn": c[1], "fp": c[2], "tn": c[3],
                       "recall": round(rates(c)[0], 4), "fp_rate": round(rates(c)[1], 4)})
    assert line in doc, line


@pytest.mark.parametrize("text", [
    "password " * 5000, "pin: " * 5000, "пароль от " * 4000, "pass pin " * 5000, "密碼" * 12000,
    "| password |\n|---|\n" + "| Xk9#mP2q |\n" * 5000, "| password | a |\n|---|---|\n" * 4000,
    "passwort " + "a " * 20000, "a:bc1@" * 10000, "login: a / " * 5000, "รหัสผ่าน" * 5000,
], ids=["password", "pin", "ru", "pass-pin", "zh", "table-rows", "tables", "qualifiers", "at", "login", "th"])
def test_hostile_key_word_runs_cost_linear_time(text: str) -> None:
    """Each costs about 20 µs per key word (a few seconds for 20,000 in a row on the 2-core machine);
    a quadratic scan (the first table reader re-read every row after each delimiter line: 4,000
    tables took minutes) would hit the suite's per-test timeout."""
    privacy.redact(text, "all")
    privacy.check(text)
