"""Key names disguised with full-width forms or Latin look-alikes (Cyrillic, Greek) are still secrets.

``раssword=…`` with a Cyrillic ``р`` and ``а`` used to pass the filter: the
patterns are ASCII and NFKC does not fold across scripts. Ordinary Russian,
Greek, Chinese and Japanese text must stay unflagged and unchanged.
"""

from __future__ import annotations

import pytest

from memoryd.indexer.redaction import privacy
from memoryd.indexer.redaction.confusables import fold_lookalikes

DISGUISED = [
    ("ｐａｓｓｗｏｒｄ: hunter2", "hunter2"),  # full-width (NFKC)
    ("раssword=Xk9#mQ2v", "Xk9#mQ2v"),  # Cyrillic р, а
    ("my раѕѕword is Xk9mQ2vz", "Xk9mQ2vz"),  # Cyrillic р, а, ѕ in prose
    ("ѕеcret: Zx9!qq7wPp", "Zx9!qq7wPp"),  # Cyrillic ѕ, е
    ("тoken = abcd1234efgh", "abcd1234efgh"),  # Cyrillic т
    ("τοken: abcd1234efgh", "abcd1234efgh"),  # Greek τ, ο
    ("арі_кеу = Zx9qq7wAbc", "Zx9qq7wAbc"),  # every letter Cyrillic
    ("ＡＰＩ＿ＫＥＹ=Zx9qq7wAbc", "Zx9qq7wAbc"),  # full-width capitals
    ("db ΡΑSSWORD: Qw3rty!xx", "Qw3rty!xx"),  # Greek capitals Ρ, Α
]


@pytest.mark.parametrize(("text", "secret"), DISGUISED, ids=[t for t, _ in DISGUISED])
def test_a_disguised_key_name_is_refused_and_only_its_value_redacted(text: str, secret: str) -> None:
    assert not privacy.check(text).passed
    redacted = privacy.redact(text, "secrets")
    assert secret not in redacted and "[REDACTED:credential_assignment]" in redacted
    assert redacted.startswith(text[: text.index(secret)])  # the key stays as written, look-alikes and all


def test_a_provider_key_with_a_look_alike_inside_is_caught() -> None:
    text = "key: sk-prоj-AbCdEfGhIjKlMnOpQrStUvWx1234 end"  # Cyrillic о in "proj"
    assert not privacy.check(text).passed
    assert privacy.redact(text, "secrets") == "key: [REDACTED:api_key] end"


ORDINARY = [
    "Пароль от почты я поменял вчера, новый записал в менеджер паролей.",
    "Он сорок раз ехал на море, рос у реки, а теперь живёт в Праге.",
    "Ключ от офиса у Ани; встреча в среду в 10:00, кабинет 305.",
    "Токен доступа истёк, надо попросить новый у админа.",
    "Секрет успеха — регулярность: каждый день по 30 минут.",
    "Ο κωδικός άλλαξε χθες· θα τον βρεις στον διαχειριστή κωδικών.",
    "我忘了邮箱密码，明天去重置。数据库迁移在周五晚上。",
    "パスワードを変更しました。新しいものはマネージャーに保存してあります。",
    "Мама сказала: «купи хлеб, молоко и сыр». Рецепт пирога — в тетради.",
    "Поезд в 7:45 с Ярославского вокзала, вагон 12, место 33.",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_non_latin_text_is_neither_flagged_nor_changed(text: str) -> None:
    assert privacy.check(text).passed
    assert privacy.redact(text) == text


def test_only_disguised_words_are_folded_and_offsets_keep() -> None:
    text = "Пароль: раssword кеу ключ τoken λόγος"
    folded = fold_lookalikes(text)
    assert folded == "Пароль: password key ключ token λόγος"
    assert len(folded) == len(text)
    assert fold_lookalikes("plain ascii") == "plain ascii"
