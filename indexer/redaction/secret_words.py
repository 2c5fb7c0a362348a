"""Password and PIN key words in many languages, as data, for the privacy filter's "key word + value" rule.

Each row is one language: the words people write before a password (``passwords``),
before a PIN or a numeric code (``pins``: a bare number after these is a secret,
after a password word it may be a year or a count), and the words that join a key
word to its value the way "is" does (``copulas``). :mod:`memoryd.indexer.redaction.privacy`
builds one rule from all rows; what decides whether the text after a key word *is* a
password is not here but in :func:`memoryd.indexer.redaction.secret_checks.credential_shape`
(the value's shape), so a language is added by adding a row, never by tuning a check.

Words are lowercase and matched on lowercased, NFKC-folded text. A word may be a stem
(``парол`` for пароль/пароля/паролем, ``hasł`` for hasło/hasła): the rule lets any
letters follow a key word (inflections, particles such as 는/は/是 written without a
space, compounds such as ``Routerpasswort``). Latin-script words of four letters or
fewer (``pin``, ``pw``, ``pass``, ``mdp``) match only as whole words, since ``spin``,
``passage`` or ``mdpi`` are not key words, unless a trailing ``*`` marks a stem (``hesl*``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    code: str
    passwords: tuple[str, ...]
    pins: tuple[str, ...] = ()
    copulas: tuple[str, ...] = ()


def _w(text: str) -> tuple[str, ...]:
    """Words separated by ``/`` (a word may hold spaces: ``mot de passe``)."""
    return tuple(w.strip() for w in text.split("/") if w.strip())


LANGUAGES: tuple[Language, ...] = (
    Language("en", _w("password/passwd/passcode/passphrase/pwd/pw/pass/login password/master password"),
             _w("pin/pin code/pin number/puk/passcode/access code/door code/alarm code/gate code/keypad code"
                "/lock code/entry code/lock combination"),
             _w("is/was/is now/was changed to/is set to/changed to/set to/reads")),
    Language("de", _w("passwort/kennwort/passwörter/zugangspasswort/losung"),
             _w("pin/geheimzahl/geheimnummer/zugangscode/türcode/tuercode/alarmcode/pin-code/pincode"),
             _w("ist/lautet/war/heißt/heisst/ist jetzt/lautet jetzt")),
    Language("fr", _w("mot de passe/mots de passe/mdp"),
             _w("code pin/pin/code secret/code d'accès/code d’accès/digicode/code confidentiel"),
             _w("est/c'est/c’est/était/est maintenant")),
    Language("es", _w("contraseña/contrasena/clave de acceso/clave del wifi/clave wifi/clave"),
             _w("pin/código pin/codigo pin/código de acceso/codigo de acceso/clave numérica"),
             _w("es/era/es ahora/sería")),
    Language("pt", _w("senha/palavra-passe/palavra passe/palavra-chave de acesso"),
             _w("pin/código pin/codigo pin/código de acesso/senha do cartão"),
             _w("é/era/é agora/fica")),
    Language("it", _w("password/parola d'ordine/parola d’ordine/chiave di accesso/parola chiave del wifi"),
             _w("pin/codice pin/codice segreto/codice di accesso"),
             _w("è/era/è ora")),
    Language("nl", _w("wachtwoord/paswoord/toegangscode"), _w("pin/pincode/toegangscode"),
             _w("is/was/luidt/is nu")),
    Language("sv", _w("lösenord/losenord/lösen"), _w("pin/pinkod/pin-kod"), _w("är/var/är nu")),
    Language("da", _w("adgangskode/kodeord/password"), _w("pin/pinkode/pin-kode"), _w("er/var/er nu")),
    Language("no", _w("passord/adgangskode"), _w("pin/pinkode/pin-kode"), _w("er/var/er nå")),
    Language("fi", _w("salasan*/tunnussan*"), _w("pin/pin-koodi/tunnusluku/pääsykoodi"), _w("on/oli/on nyt")),
    Language("pl", _w("hasł*/haslo/hasla/hasłem"), _w("pin/kod pin/kod dostępu/kod dostepu"),
             _w("to/jest/brzmi/było/to jest")),
    Language("cs", _w("hesl*"), _w("pin/pin kód/přístupový kód"), _w("je/zní/bylo/je teď")),
    Language("sk", _w("hesl*"), _w("pin/pin kód/prístupový kód"), _w("je/znie/bolo")),
    Language("hu", _w("jelszó/jelszav*/jelszo"), _w("pin/pin-kód/pinkód"), _w("volt")),
    Language("ro", _w("parola/parolă/parolei"), _w("pin/cod pin/codul pin"), _w("este/era")),
    Language("tr", _w("şifre/sifre/parola"), _w("pin/pin kodu/şifre kodu"), _w("ise")),
    Language("ru", _w("парол*"), _w("пин/пин-код/пинкод/пин код/код доступа"), _w("это/был/была/теперь")),
    Language("uk", _w("парол*"), _w("пін/пін-код/пінкод/пін код/код доступу"), _w("це/був/тепер")),
    Language("bg", _w("парола/паролата"), _w("пин/пин код/пин-код"), _w("е/беше/е сега")),
    Language("el", _w("κωδικ*/συνθηματικ*"),
             _w("pin"), _w("είναι/ήταν/είναι τώρα")),
    Language("vi", _w("mật khẩu/mat khau/mk"), _w("mã pin/ma pin/pin/mã bí mật"), _w("là/bây giờ là")),
    Language("id", _w("kata sandi/sandi/kata laluan/password"), _w("pin/kode pin/kode akses"),
             _w("adalah/ialah/yaitu/yakni")),
    Language("tl", _w("password"), _w("pin"), _w("ay")),
    Language("sw", _w("nenosiri/nywila"), _w("pin/namba ya siri"), _w("ni")),
    Language("ar", _w("كلمة المرور/كلمة مرور/كلمة السر/كلمة سر/رمز المرور/كلمات المرور"),
             _w("الرقم السري/رقم سري/رمز pin/الرقم السرّي/رمز الدخول"), _w("هي/هو/هى")),
    Language("fa", _w("رمز عبور/گذرواژه/کلمه عبور/رمز ورود/پسورد"), _w("پین/رمز کارت/رمز دوم"),
             _w("است/هست")),
    Language("ur", _w("پاس ورڈ/پاسورڈ/خفیہ لفظ"), _w("پن/پن کوڈ"), _w("ہے")),
    Language("he", _w("סיסמ*"), _w("קוד סודי/הקוד הסודי/pin/קוד pin"),
             _w("היא/הוא/זה")),
    Language("hi", _w("पासवर्ड/कूटशब्द/गुप्त शब्द/पासकोड"), _w("पिन/पिन कोड/गुप्त कोड"), _w("है/था/हैं")),
    Language("bn", _w("পাসওয়ার্ড/গোপন শব্দ"), _w("পিন/পিন কোড"), _w("হল/হলো/হচ্ছে/ছিল")),
    Language("ta", _w("கடவுச்சொல்/பாஸ்வேர்டு"), _w("பின்"), _w("ஆகும்")),
    Language("te", _w("పాస్‌వర్డ్/పాస్వర్డ్"), _w("పిన్"), ()),
    Language("th", _w("รหัสผ่าน/พาสเวิร์ด/รหัส"), _w("รหัส pin/พิน"), _w("คือ/เป็น")),
    Language("ko", _w("비밀번호/비번/암호/패스워드/비밀 번호"), _w("핀번호/핀 번호/pin/핀코드"), _w("는/은")),
    Language("ja", _w("パスワード/ぱすわーど/パスコード/合言葉/あいことば"), _w("暗証番号/pinコード/ピン番号/pin"),
             _w("は/が")),
    Language("zh", _w("密码/口令/登录密码/开机密码"), _w("pin码/取款密码/支付密码"), _w("是/为/叫/叫做/改成/改为")),
    Language("zh-Hant", _w("密碼/登入密碼/通行碼/口令/開機密碼"), _w("pin碼/提款密碼/提款卡密碼"),
             _w("是/為/叫/叫做/改成/改為/設為/設定為")),
)


def password_words() -> tuple[str, ...]:
    return tuple(sorted({w for lang in LANGUAGES for w in lang.passwords}))


#: Words for "login details", per language; the value after them is a ``user / secret`` pair.
_LOGINS = {
    "en": "credentials/creds/login/login details", "de": "zugangsdaten/anmeldedaten/login",
    "fr": "identifiants/identifiant", "es": "credenciales/datos de acceso",
    "pt": "credenciais/dados de acesso/login", "it": "credenziali/dati di accesso",
    "nl": "inloggegevens/login", "sv": "inloggning/inloggningsuppgifter", "pl": "dane logowania/login",
    "cs": "přihlašovací údaje", "tr": "giriş bilgileri/kullanıcı bilgileri",
    "ru": "учётные данные/учетные данные/логин",
    "uk": "облікові дані/логін", "vi": "thông tin đăng nhập", "id": "kredensial/login",
    "ko": "로그인 정보", "ja": "ログイン情報", "zh": "登录信息", "zh-Hant": "登入資訊",
}


def login_words() -> tuple[str, ...]:
    return tuple(sorted({w for words in _LOGINS.values() for w in _w(words)}))


def pin_words() -> tuple[str, ...]:
    return tuple(sorted({w for lang in LANGUAGES for w in lang.pins}))


def copulas() -> tuple[str, ...]:
    return tuple(sorted({w for lang in LANGUAGES for w in lang.copulas}))


def copulas_by_word() -> dict[str, frozenset[str]]:
    """Each password/PIN word (``*`` dropped) with the copulas of every language that uses it.

    "to" is Polish for "is" ("hasło to …") and English for "to" ("pin the version to 1.26"): a copula
    counts only after a key word of its own language.
    """
    out: dict[str, set[str]] = {}
    for lang in LANGUAGES:
        for w in (*lang.passwords, *lang.pins):
            out.setdefault(w.rstrip("*"), set()).update(lang.copulas)
    return {w: frozenset(c) for w, c in out.items()}
