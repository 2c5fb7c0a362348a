"""Write tests/security/data/secrets_corpus.jsonl: the labelled corpus the privacy filter is measured on.

Run ``python tests/security/make_secrets_corpus.py`` after changing it; the output is
deterministic (fixed seed), committed, and read by the tests and by
``bench/secrets_eval.py``. Each line is ``{"text", "label", "kind", "lang"}`` with
``label`` 1 for a note holding a secret or personal data and 0 for a note that
only looks technical.

Positives put fake secrets (random strings in each provider's published shape,
AWS's documented ``…EXAMPLE`` style, Luhn/mod-97/checksum-valid numbers made up
here) inside notes written like real memories, in English, Chinese and Japanese.
Negatives are notes a developer really writes: git hashes, UUIDs, versions,
paths, colours, prices, dates, order and tracking numbers, base64 of harmless
text, and prose *about* passwords and keys that gives none. They were written
before the detector was measured on them and are not edited to make it pass.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).parent / "data" / "secrets_corpus.jsonl"
B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def rnd(r: random.Random, n: int, alphabet: str = B62) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def mixed(r: random.Random, n: int, alphabet: str = B62) -> str:
    """Random, but with at least one digit, one capital and one small letter (as real keys have)."""
    while True:
        s = rnd(r, n, alphabet)
        digit = any(c.isdigit() for c in s) or not any(c.isdigit() for c in alphabet)
        if digit and any(c.isupper() for c in s) and any(c.islower() for c in s):
            return s


def luhn_complete(prefix: str, length: int, r: random.Random) -> str:
    body = prefix + rnd(r, length - len(prefix) - 1, string.digits)
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 == 0 else d
    return body + str((10 - total % 10) % 10)


def iban(country: str, bban: str) -> str:
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    return f"{country}{check:02d}{bban}"


def cn_id(r: random.Random) -> str:
    body = f"{r.choice(['110105', '310104', '440305', '510107'])}{r.randint(1950, 2005)}{r.randint(1, 12):02d}" \
           f"{r.randint(1, 28):02d}{rnd(r, 3, string.digits)}"
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, weights, strict=True)) % 11]


def group(s: str, n: int = 4, sep: str = " ") -> str:
    return sep.join(s[i:i + n] for i in range(0, len(s), n))


# --- secrets: kind -> generator ----------------------------------------------------------------------------------

SECRETS: dict[str, Callable[[random.Random], str]] = {
    "openai_key": lambda r: f"sk-proj-{mixed(r, 48, B62 + '_-')}",
    "openai_legacy_key": lambda r: f"sk-{mixed(r, 48)}",
    "anthropic_key": lambda r: f"sk-ant-api03-{mixed(r, 60, B62 + '_-')}",
    "aws_access_key": lambda r: "AKIA" + rnd(r, 12, string.ascii_uppercase + "234567") + "MPLE",
    "aws_secret_key": lambda r: f"wJalrXUtnFEMI/K7MDENG/{mixed(r, 18, B62 + '+/')}",
    "github_token": lambda r: f"ghp_{mixed(r, 36)}",
    "github_pat": lambda r: f"github_pat_11{mixed(r, 20)}_{mixed(r, 59)}",
    "gitlab_token": lambda r: f"glpat-{mixed(r, 20, B62 + '_-')}",
    "slack_token": lambda r: f"xoxb-{rnd(r, 12, string.digits)}-{rnd(r, 13, string.digits)}-{mixed(r, 24)}",
    "google_api_key": lambda r: f"AIza{mixed(r, 35, B62 + '_-')}",
    "google_oauth": lambda r: f"ya29.a0{mixed(r, 60, B62 + '_-')}",
    "stripe_key": lambda r: f"sk_live_{mixed(r, 24)}",
    "stripe_webhook": lambda r: f"whsec_{mixed(r, 32)}",
    "huggingface_token": lambda r: f"hf_{mixed(r, 34, string.ascii_letters)}",
    "groq_key": lambda r: f"gsk_{mixed(r, 52)}",
    "xai_key": lambda r: f"xai-{mixed(r, 80)}",
    "npm_token": lambda r: f"npm_{mixed(r, 36)}",
    "sendgrid_key": lambda r: f"SG.{mixed(r, 22, B62 + '_-')}.{mixed(r, 43, B62 + '_-')}",
    "twilio_key": lambda r: f"SK{rnd(r, 32, HEX)}",
    "alibaba_key": lambda r: f"LTAI{mixed(r, 20)}",
    "tencent_key": lambda r: f"AKID{mixed(r, 32)}",
    "jwt": lambda r: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + base64.urlsafe_b64encode(
        json.dumps({"sub": rnd(r, 8, string.digits), "name": "svc"}).encode()).decode().rstrip("=")
        + "." + mixed(r, 43, B62 + "_-"),
}

TOKEN_NOTES = {
    "en": [
        "Deploy notes: the staging bot authenticates with {s} until we rotate it next sprint.",
        "Remember that {s} is the key the analytics cron job uses.",
        "For the demo, export OPENAI_API_KEY and paste {s} into the dashboard settings.",
        "Alice shared the CI credential in chat: {s} (rotate after the release).",
        "The nightly backup script still has {s} hard-coded in it.",
        "Use {s} when the integration test asks for a token.",
        "key_{s}",
        "TODO: move {s} out of config.yaml into the vault.",
    ],
    "zh": [
        "项目的密钥{s}已经配置好了。",
        "运维账号的访问密钥{s}，别外传。",
        "测试环境用的是{s}，下周轮换。",
        "记一下：CI 的令牌 {s} 放在流水线变量里了。",
        "张伟把{s}发到群里了，记得作废。",
        "部署脚本里写死了{s}，需要改掉。",
    ],
    "ja": [
        "本番のAPIキーは{s}です。",
        "ステージング用のトークン：{s}（来週ローテーション）",
        "CIの認証には{s}を使っています。",
        "田中さんが{s}をチャットに貼ってしまった。",
        "バックアップスクリプトに{s}が直書きされている。",
    ],
}

# Context secrets: (kind, lang, text). Passwords, PINs and personal data are not tokens with a prefix,
# so each case is a whole sentence.
HAND_POSITIVES: list[tuple[str, str, str]] = [
    ("password_prose", "en", "The database password for prod is hunter2!Secret"),
    ("password_prose", "en", "the password is swordfish"),
    ("password_prose", "en", "Reminder: the wifi password is BlueHarbor2024 for guests."),
    ("password_prose", "en", "The router admin password was changed to Tr0ub4dor&3 yesterday."),
    ("password_prose", "en", "Grandma's laptop password is sunflower, she asked me to note it."),
    ("password_prose", "en", "The VPN passphrase for the Lisbon office is correct-horse-battery-staple."),
    ("password_prose", "en", "My bank password: Gr33nTea#77"),
    ("password_prose", "en", "Jenkins password for the deploy user is set to D3pl0y!ng"),
    ("password_prose", "en", "The password for the staging db is pg_Stag1ng_2024."),
    ("password_prose", "en", "Password for the shared drive is 'quokka-42-lantern'."),
    ("password_cli", "en", "Log in with sshpass -p 'S3cr3t!Pass' ssh deploy@build-01 to restart the job."),
    ("password_cli", "en", "The backup runs mysqldump -u root -pR00tPa55 app > app.sql every night."),
    ("password_cli", "en", "curl -u admin:Adm1nPa55 https://grafana.example.com/api/health works."),
    ("password_cli", "en", "Run redis-cli -h cache -a R3disPa55word ping to check it."),
    ("password_cli", "en", "docker login --password Hub2024pass --username ci registry.example.com"),
    ("password_assign", "en", "DB_PASSWORD=Sup3rS3cret! is in the .env on the box."),
    ("password_assign", "en", "export PGPASSWORD=pg4dmin2024 before running psql."),
    ("password_assign", "en", "MYSQL_ROOT_PASSWORD: r00tpw_2023 in docker-compose.yml"),
    ("password_assign", "en", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("password_assign", "en", "client_secret: 8f14e45fceea167a5a36dedd4bea2543 for the OAuth app"),
    ("pin", "en", "PIN 4821"),
    ("pin", "en", "Card PIN is 7306, don't forget it."),
    ("pin", "en", "The door PIN code: 55813 for the studio."),
    ("pin", "en", "SIM PIN 0417 for the travel phone."),
    ("pin", "en", "Her phone's pin is 2580."),
    ("password_prose", "zh", "支付宝登录密码 Abc123456"),
    ("password_prose", "zh", "root口令叫做Qw3rty!9"),
    ("password_prose", "zh", "数据库密码是 Abc12345，不要外传"),
    ("password_prose", "zh", "家里WiFi密码：sunshine2024"),
    ("password_prose", "zh", "服务器的密钥：9f8e7d6c5b4a3210"),
    ("password_prose", "zh", "邮箱密码改成了Mail#2024了。"),
    ("password_prose", "zh", "堡垒机的密码为 Bastion_88!"),
    ("password_prose", "zh", "管理员口令设置为 Adm!n2023"),
    ("password_prose", "zh", "银行卡密码 853106，千万别告诉别人。"),
    ("password_prose", "zh", "支付密码是 602913"),
    ("password_prose", "zh", "公司VPN密码 Vpn@Shanghai1"),
    ("password_prose", "zh", "测试账号 test01 的密码也是 Test@0101"),
    ("pin", "zh", "SIM卡的PIN码是 3391"),
    ("password_prose", "ja", "パスワードは hunter2 です"),
    ("password_prose", "ja", "社内WiFiのパスワード：Sakura2024!"),
    ("password_prose", "ja", "管理画面のパスワードはAdm1n#Tokyoです。"),
    ("password_prose", "ja", "サーバーのパスワードを Pa55w0rd_jp に変更した。"),
    ("pin", "ja", "キャッシュカードの暗証番号は4821です。"),
    ("pin", "ja", "暗証番号：0913"),
    ("password_prose", "ja", "VPNのパスコードは 77Fuji77 です"),
    ("api_key_ja", "ja", "本番のAPIキーは sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 です"),
    ("url_credentials", "en", "connect with postgres://admin:s3cretPw@db.example.com/app"),
    ("url_credentials", "en", "The broker URL is amqp://guest:Gu3st!pw@rabbit.example.com:5672/"),
    ("url_credentials", "en", "clone https://oauth2:glpat-AbCdEfGh1234IjKlMnOp@gitlab.com/team/repo.git"),
    ("url_credentials", "zh", "数据库连接串 mysql://root:Root#123@10.0.3.7:3306/shop 已更新"),
    ("private_key", "en", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
                          "-----END OPENSSH PRIVATE KEY-----"),
    ("private_key", "en", "key: -----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA7bq3"),
    ("aws_secret_prose", "en", "our aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for the ci user"),
    ("aws_secret_prose", "zh", "访问密钥ID AKIAIOSFODNN7EXAMPLE，密钥 wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_prose", "ja", "AWSのシークレットは wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY です"),
    ("reproduction", "zh", "项目的OpenAI密钥sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234已经配置好了。"),
    ("reproduction", "zh", "运维账号的访问密钥AKIAIOSFODNN7EXAMPLE已经交给他了"),
    ("reproduction", "ja", "本番環境のキーはsk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234です"),
    ("reproduction", "en", "key_sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234"),
    ("evasion", "en", "ｓｋ－ｐｒｏｊ－AbCdEfGhIjKlMnOpQrStUvWx1234 is the key"),
    ("evasion", "en", "sk-proj-\u200bAbCdEfGhIjKl\u200bMnOpQrStUvWx1234 is the key"),
    ("evasion", "zh", "密钥：ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ"),
    ("evasion", "en", "token ghp\u00ad_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 (soft hyphen)"),
]

PII_NOTES = {
    "card": {
        "en": ["The company card {s} expires 09/27.", "Charge the deposit to card {s}.",
               "Card number: {s}, CVC on the back."],
        "zh": ["公司信用卡号 {s}，有效期 09/27。", "押金刷的是卡 {s}。"],
        "ja": ["会社のカード番号は{s}です。"],
    },
    "cn_id": {"zh": ["客户身份证号 {s} 已登记。", "报销需要身份证号{s}。"], "en": ["Her Chinese ID number is {s}."],
              "ja": ["身分証番号：{s}"]},
    "cn_mobile": {"zh": ["张伟的手机 {s}，有事打他。", "快递员电话{s}", "联系人：王芳 {s}"],
                  "en": ["Call Li Na on {s} when the parcel arrives."], "ja": ["王さんの携帯は{s}です。"]},
    "ssn": {"en": ["Tax form: SSN {s} for Maria.", "His social security number is {s}.",
                   "Employee record — SSN: {s}"]},
    "iban": {"en": ["Rent goes to IBAN {s} on the 1st.", "Refund to {s} (Sparkasse)."],
             "zh": ["房租打到 IBAN {s}。"], "ja": ["振込先IBAN：{s}"]},
}


def pii_value(kind: str, r: random.Random) -> str:
    if kind == "card":
        prefix, length = r.choice([("4111", 16), ("4", 16), ("5555", 16), ("51", 16), ("3782", 15), ("6011", 16),
                                   ("62", 16), ("35", 16)])
        num = luhn_complete(prefix, length, r)
        sep = r.choice(["", " ", "-", ".", " "])
        return group(num, 4, sep) if sep and length == 16 else num
    if kind == "cn_id":
        return cn_id(r)
    if kind == "cn_mobile":
        num = "1" + r.choice("356789") + rnd(r, 9, string.digits)
        return r.choice([num, f"{num[:3]}-{num[3:7]}-{num[7:]}", f"{num[:3]} {num[3:7]} {num[7:]}", f"+86 {num}"])
    if kind == "ssn":
        return f"{r.randint(1, 665):03d}-{r.randint(1, 99):02d}-{r.randint(1, 9999):04d}"
    country, bban = r.choice([("DE", rnd(r, 18, string.digits)), ("GB", "NWBK" + rnd(r, 14, string.digits)),
                              ("FR", rnd(r, 23, string.digits)), ("NL", "ABNA" + rnd(r, 10, string.digits)),
                              ("ES", rnd(r, 20, string.digits))])
    value = iban(country, bban)
    return group(value) if r.random() < 0.6 else value


def positives(r: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for kind, make in SECRETS.items():
        for lang, templates in TOKEN_NOTES.items():
            rows.extend({"text": t.format(s=make(r)), "label": 1, "kind": kind, "lang": lang}
                        for t in r.sample(templates, 3 if lang == "en" else 2))
    for kind, by_lang in PII_NOTES.items():
        for lang, templates in by_lang.items():
            rows.extend({"text": r.choice(templates).format(s=pii_value(kind, r)), "label": 1, "kind": kind,
                         "lang": lang} for _ in range(5 if lang in ("en", "zh") else 3))
    for _ in range(12):  # keys split into groups by spaces, and base64 of a key or a .env line
        key = f"sk-proj-{mixed(r, 32)}"
        rows.append({"text": f"The key is {key[:8]}{group(key[8:], r.choice([4, 6, 8]))} (split for the slide)",
                     "label": 1, "kind": "split_key", "lang": "en"})
        aws = "AKIA" + rnd(r, 16, string.ascii_uppercase + string.digits)
        rows.append({"text": f"访问密钥拆开写：{group(aws, 4)}", "label": 1, "kind": "split_key", "lang": "zh"})
        payload = r.choice([f"sk-{mixed(r, 40)}", f"OPENAI_API_KEY=sk-proj-{mixed(r, 40)}",
                            f"ghp_{mixed(r, 36)}", f"password={mixed(r, 12)}"])
        enc = base64.b64encode(payload.encode()).decode()
        lang, text = r.choice([("en", f"The value is stored base64-encoded: {enc}"), ("en", f"k8s data: {enc}"),
                               ("zh", f"配置里是 base64：{enc}"), ("ja", f"エンコード済み：{enc}")])
        rows.append({"text": text, "label": 1, "kind": "base64_key", "lang": lang})
    rows += [{"text": t, "label": 1, "kind": k, "lang": lang} for k, lang, t in HAND_POSITIVES]
    return rows


# --- negatives ------------------------------------------------------------------------------------------------------

HAND_NEGATIVES: list[tuple[str, str, str]] = [
    ("password_talk", "en", "The password is stored in the team vault."),
    ("password_talk", "en", "Passwords must be rotated every 90 days."),
    ("password_talk", "en", "Reset your password from the account page, not from the admin panel."),
    ("password_talk", "en", "The password is at least twelve characters long."),
    ("password_talk", "en", "The password manager we use is Bitwarden."),
    ("password_talk", "en", "password: see the 1Password entry called Prod DB"),
    ("password_talk", "en", "Use a passphrase of four random words for the disk encryption."),
    ("password_talk", "en", "The password was rotated after the offboarding on Friday."),
    ("password_talk", "en", "If the password is wrong three times the account locks for 15 minutes."),
    ("password_talk", "en", "The password for the staging db is in the usual place."),
    ("password_talk", "en", "The PIN is in the envelope on my desk."),
    ("password_talk", "en", "PIN pad firmware was updated to 3.2.1 last week."),
    ("password_talk", "en", "Remember to pin numpy to 1.26 in the lockfile."),
    ("password_talk", "en", "We pin Python 3.10.12 in production images."),
    ("password_talk", "en", "Password hashing uses argon2id with 64 MiB of memory."),
    ("password_talk", "en", "password=${DB_PASSWORD} comes from the environment."),
    ("password_talk", "en", "Set password=<your-password> in the template before sharing it."),
    ("password_talk", "en", "secret_key = os.environ['SECRET_KEY'] at the top of settings.py"),
    ("password_talk", "en", "api_key: ${OPENAI_API_KEY} in the compose file, never the literal."),
    ("password_talk", "en", "token: use the one from the CI settings page"),
    ("password_talk", "en", "The request sets max_tokens=4096 and temperature=0.2."),
    ("password_talk", "en", "num_tokens: 2048 is the context budget for the summariser."),
    ("password_talk", "en", "echo $CR_PAT | docker login ghcr.io -u alice --password-stdin"),
    ("password_talk", "en", "ssh -p 2222 deploy@build-01 to reach the runner."),
    ("password_talk", "en", "mysql -u root -p prompts for the password, do not pass it inline."),
    ("password_talk", "en", "curl -u $API_USER:$API_PASS https://api.example.com/v1/ping"),
    ("password_talk", "en", "secretKeyRef: name: db-credentials, key: password"),
    ("password_talk", "en", "SELECT id FROM users WHERE password_hash = $1 AND active"),
    ("password_talk", "en", "The token expires after 3600 seconds; refresh it before."),
    ("password_talk", "en", "Secret management moved to AWS Secrets Manager in March."),
    ("password_talk", "en", "The secret is to let the dough rest overnight."),
    ("password_talk", "en", "Her password hint is the name of her first cat."),
    ("password_talk", "en", "Passcode screens appear after five minutes idle."),
    ("password_talk", "en", "The password is the same as the one for the old NAS."),
    ("password_talk", "en", "the password is not the problem, the username has a trailing space"),
    ("password_talk", "en", "Forgot password emails go through SendGrid now."),
    ("password_talk", "en", "password_reset_token_ttl: 900 in the settings"),
    ("password_talk", "en", "Bearer tokens are sent in the Authorization header."),
    ("password_talk", "en", "Access keys are created per user in IAM, never shared."),
    ("password_talk", "en", "GitHub tokens start with ghp_ and GitLab ones with glpat-."),
    ("password_talk", "en", "OpenAI keys look like sk-proj- followed by a long random string."),
    ("password_talk", "en", "AWS access key ids start with AKIA; secret keys are 40 characters."),
    ("password_talk", "en", "Hugging Face tokens (hf_…) are read-only by default."),
    ("password_talk", "en", "Google OAuth access tokens start with ya29. and last an hour."),
    ("password_talk", "en", "Stripe webhook secrets begin with whsec_ and are per endpoint."),
    ("password_talk", "en", "Install the xai-sdk and groq packages for the comparison."),
    ("password_talk", "en", "The KeePassXC database is synced via Syncthing."),
    ("password_talk", "en", "We use scikit-learn (sklearn) for the baseline classifier."),
    ("password_talk", "en", "Ask-me-anything sessions are on Fridays at noon."),
    ("password_talk", "en", "The task_runner_config lives in ops/task_runner.yaml."),
    ("password_talk", "en", "hf_hub_download caches files under ~/.cache/huggingface."),
    ("password_talk", "en", "npm_config_cache points at /tmp/npm on the CI runners."),
    ("password_talk", "en", "The SK Telecom roaming plan is cheaper than eSIM."),
    ("password_talk", "en", "SSN fields must be masked in the support tool."),
    ("password_talk", "en", "IBAN validation uses the mod-97 check."),
    ("password_talk", "zh", "密码需要每九十天更换一次。"),
    ("password_talk", "zh", "密码至少 12 位，包含大小写字母和数字。"),
    ("password_talk", "zh", "忘记密码可以在登录页重置。"),
    ("password_talk", "zh", "密码使用 bcrypt 哈希存储。"),
    ("password_talk", "zh", "数据库密码放在 Vault 里，不要写在代码中。"),
    ("password_talk", "zh", "请把密钥轮换周期改为 30 天。"),
    ("password_talk", "zh", "密钥管理用的是 KMS。"),
    ("password_talk", "zh", "令牌过期时间设为 3600 秒。"),
    ("password_talk", "zh", "验证码有效期 5 分钟。"),
    ("password_talk", "zh", "密码 SHA256 加密后再存库。"),
    ("password_talk", "zh", "修改密码的接口是 /api/v1/password/reset"),
    ("password_talk", "zh", "密码强度校验规则更新到 v2.3 了。"),
    ("password_talk", "zh", "口令复杂度要求：8 位以上。"),
    ("password_talk", "zh", "他把密码写在便利贴上，被安全组批评了。"),
    ("password_talk", "zh", "密码输错三次账号会被锁定 15 分钟。"),
    ("password_talk", "zh", "私钥文件放在 ~/.ssh/id_ed25519，权限 600。"),
    ("password_talk", "zh", "密钥长度从 RSA2048 升级到 RSA4096。"),
    ("password_talk", "zh", "支付密码和登录密码不能相同。"),
    ("password_talk", "zh", "新员工的初始密码由 IT 通过短信发送。"),
    ("password_talk", "zh", "令牌桶限流参数：容量 100，速率 10/s。"),
    ("password_talk", "zh", "验证码图片接口返回 PNG。"),
    ("password_talk", "zh", "密码学课程下周讲 AES-256 和 RSA。"),
    ("password_talk", "zh", "客服不会向你索要密码或验证码。"),
    ("password_talk", "zh", "把 token 的有效期从 7 天改成 30 天。"),
    ("password_talk", "ja", "パスワードは8文字以上にしてください。"),
    ("password_talk", "ja", "パスワードを忘れた場合はリセットしてください。"),
    ("password_talk", "ja", "APIキーは環境変数から読み込む。"),
    ("password_talk", "ja", "トークンの有効期限は1時間です。"),
    ("password_talk", "ja", "暗証番号は4桁です。"),
    ("password_talk", "ja", "パスワードはBitwardenで管理しています。"),
    ("password_talk", "ja", "パスワードはKeePassXCで管理している。"),
    ("password_talk", "ja", "秘密鍵は ~/.ssh/id_rsa に置いてある。"),
    ("password_talk", "ja", "パスワードの変更は設定画面から行う。"),
    ("password_talk", "ja", "シークレットはAWS Secrets Managerに保存する。"),
    ("password_talk", "ja", "トークンをローテーションする手順をまとめた。"),
    ("tech", "en", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 is the image digest."),
    ("tech", "en", "The public DNS server 8.8.8.8 is the fallback."),
    ("tech", "en", "The dev server runs on localhost:8080 and 127.0.0.1."),
    ("tech", "en", "Order 4111111111111112 failed the Luhn check."),
    ("tech", "en", "ISBN 978-7-111-54742-6 is the Chinese edition."),
    ("tech", "en", "ISBN 9787111547426, second printing."),
    ("tech", "en", "EAN 4006381333931 on the box of pens."),
    ("tech", "en", "ASIN B08N5WRWNW is the replacement charger."),
    ("tech", "en", "UPS tracking 1Z999AA10123456784 arrives Tuesday."),
    ("tech", "en", "Call the front desk on +1 (415) 555-0132 for late check-in."),
    ("tech", "en", "Beijing office landline 010-62345678."),
    ("tech", "en", "Model no. 123-45-6789 is the older bracket."),
    ("tech", "en", "Population of the city: 21,893,095 (2020 census)."),
    ("tech", "en", "The epoch 1732613000 is when the migration started."),
    ("tech", "en", "log: 2024-11-26 09:42:32,123 INFO request_id=7f3a9c2e1b4d4e8f done"),
    ("tech", "en", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
                   "60e6kgAAAABJRU5ErkJggg== is the 1px placeholder."),
    ("tech", "en", "The build cache key is linux-x64-node20-3f9a2c1b7e4d5a6f8091a2b3c4d5e6f7."),
    ("tech", "en", "Bump the Docker base image to python:3.11.7-slim-bookworm."),
    ("tech", "en", "The Grafana dashboard UID is aBcD3fGh1 and the panel id is 12."),
    ("tech", "en", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxkZ3Vxa2VyY2RvbWFpbi5leGFtcGxlLmNvbQ alice@laptop is the "
                   "public key."),
    ("tech", "en", "YouTube video id dQw4w9WgXcQ was the example in the talk."),
    ("tech", "en", "The S3 bucket is s3://acme-prod-backups/2024/11/ and lifecycle is 30 days."),
    ("tech", "en", "Feature flag FF_NEW_CHECKOUT_FLOW_V2_ENABLED is on for 10% of users."),
    ("tech", "zh", "订单号 13812345678 的退款已经处理。"),
    ("tech", "zh", "工单编号 202411260001，优先级 P2。"),
    ("tech", "zh", "发票号码 04400182130112345678，金额 ¥4,111.11。"),
    ("tech", "zh", "快递单号 SF1234567890123 明天到。"),
    ("tech", "zh", "版本号 v2.14.0-rc.1 已发布到测试环境。"),
    ("tech", "zh", "客服热线 400-820-8820，工作日 9 点到 18 点。"),
    ("tech", "zh", "统一社会信用代码 91110000100000000X 是示例格式。"),
    ("tech", "zh", "会议室预订号 2024112613。"),
    ("tech", "ja", "注文番号 13812345678 のキャンセルを受け付けました。"),
    ("tech", "ja", "郵便番号は150-0002です。"),
    ("tech", "ja", "バージョン 3.11.7 にアップデートした。"),
]

NEG_TEMPLATES: dict[str, dict[str, list[str]]] = {
    "git_hash": {
        "en": ["Fixed in commit {h40}; cherry-pick it onto release/2.3.", "Reverted {h7} because it broke the build.",
               "git bisect points at {h40}.", "Merge {h7}..{h7b} into main after review."],
        "zh": ["修复提交是 {h40}，已合入主干。", "回滚了 {h7}，它导致构建失败。"],
        "ja": ["コミット {h40} で修正済み。", "{h7} をリバートした。"],
    },
    "uuid": {
        "en": ["The tenant id is {uuid}.", "Request {uuid} timed out after 30 s.",
               "Dashboard {uuid} shows the p99 latency."],
        "zh": ["租户 ID 是 {uuid}。", "请求 {uuid} 超时了。"], "ja": ["テナントIDは{uuid}です。"],
    },
    "version": {
        "en": ["Upgraded numpy to {ver} and onnxruntime to {ver2}.", "Release {ver} ships on Friday.",
               "Pinned the SDK at {ver} because {ver2} broke pagination."],
        "zh": ["把依赖升级到 {ver}，{ver2} 有 bug。"], "ja": ["バージョン{ver}にアップデートした。"],
    },
    "path": {
        "en": ["The config lives in {path}.", "Logs rotate under {path} every night.",
               "Edit {path} and restart the service."],
        "zh": ["配置文件在 {path}。"], "ja": ["設定ファイルは{path}にある。"],
    },
    "colour": {
        "en": ["The brand colour is {hex} with {hex2} for hover.", "Dark mode uses {hex} as background."],
        "zh": ["主题色是 {hex}，悬停用 {hex2}。"], "ja": ["ブランドカラーは{hex}です。"],
    },
    "price": {
        "en": ["The annual plan costs {price}, the monthly one {price2}.", "Invoice total: {price} incl. VAT."],
        "zh": ["年费 {price}，月费 {price2}。"], "ja": ["年間プランは{price}です。"],
    },
    "date": {
        "en": ["The migration ran at {date} and finished at {date2}.", "Deadline moved to {date}."],
        "zh": ["迁移在 {date} 开始，{date2} 结束。"], "ja": ["移行は{date}に完了した。"],
    },
    "order_number": {
        "en": ["Order #{order} shipped; tracking {track}.", "Ticket {ticket} is about the login page.",
               "Invoice INV-{order} was paid on time."],
        "zh": ["订单号 {order}，物流单号 {track}。", "工单 {ticket} 已关闭。"],
        "ja": ["注文番号{order}は発送済み。"],
    },
    "base64_innocent": {
        "en": ["The fixture payload is {b64}.", "Header value (base64): {b64}"],
        "zh": ["测试数据是 base64：{b64}"], "ja": ["テストデータ（base64）：{b64}"],
    },
    "number_mix": {
        "en": ["Batch {batch} processed {count} rows in {ms} ms.", "Build {build} took {ms} ms on runner {runner}."],
        "zh": ["批次 {batch} 处理了 {count} 行，耗时 {ms} 毫秒。"], "ja": ["バッチ{batch}は{count}行を処理した。"],
    },
}

INNOCENT = ["Hello, world!", '{"theme": "dark", "fontSize": 14}', "user-agent: memoryd/0.1 (linux)",
            "The quick brown fox jumps over the lazy dog", "lorem ipsum dolor sit amet, consectetur",
            "<svg xmlns='http://www.w3.org/2000/svg'/>", "name=alice&role=viewer&page=2", "今日は良い天気ですね",
            "会议纪要：下周一评审", "password reset link expired"]


def neg_fields(r: random.Random) -> dict[str, str]:
    ymd = f"{r.randint(2019, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
    return {
        "h40": rnd(r, 40, HEX), "h7": rnd(r, 7, HEX), "h7b": rnd(r, 7, HEX),
        "uuid": "-".join(rnd(r, n, HEX) for n in (8, 4, 4, 4, 12)),
        "ver": f"{r.randint(0, 5)}.{r.randint(0, 30)}.{r.randint(0, 20)}",
        "ver2": f"v{r.randint(0, 5)}.{r.randint(0, 30)}.{r.randint(0, 20)}-rc.{r.randint(1, 4)}",
        "path": r.choice(["/etc/memoryd/config.toml", "~/.config/memoryd/secrets.toml", "/var/log/nginx/access.log",
                          "C:\\Users\\alex\\AppData\\Roaming\\Code\\settings.json", "~/.ssh/id_ed25519.pub",
                          "src/auth/password_reset.py", "infra/terraform/modules/kms/main.tf",
                          "/srv/app/releases/20241126094232/public"]),
        "hex": "#" + rnd(r, 6, HEX), "hex2": "#" + rnd(r, 3, HEX).upper(),
        "price": r.choice([f"${r.randint(1, 2000)}.{r.randint(0, 99):02d}", f"¥{r.randint(1000, 99999):,}",
                           f"€{r.randint(1, 300)},{r.randint(0, 99):02d}", f"{r.randint(100, 9999)} 元"]),
        "price2": f"${r.randint(1, 99)}.99",
        "date": r.choice([ymd, f"{ymd}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z",
                          f"{r.randint(2019, 2026)}年{r.randint(1, 12)}月{r.randint(1, 28)}日", ymd.replace("-", "/")]),
        "date2": f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
        "order": r.choice([f"{r.randint(2019, 2026)}{rnd(r, 8, string.digits)}", rnd(r, 10, string.digits),
                           f"{rnd(r, 3, string.digits)}-{rnd(r, 7, string.digits)}-{rnd(r, 7, string.digits)}",
                           f"{r.randint(1, 9)}{rnd(r, 15, string.digits)}"]),
        "track": r.choice([f"SF{rnd(r, 13, string.digits)}", f"1Z{rnd(r, 16, string.ascii_uppercase + string.digits)}",
                           f"YT{rnd(r, 16, string.digits)}"]),
        "ticket": r.choice([f"JIRA-{r.randint(100, 9999)}", f"#{r.randint(1000, 99999)}", f"OPS-{r.randint(10, 999)}"]),
        "b64": base64.b64encode(r.choice(INNOCENT).encode()).decode(),
        "batch": f"{r.randint(2019, 2026)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}-{r.randint(1, 999):03d}",
        "count": f"{r.randint(1000, 9_999_999):,}", "ms": str(r.randint(10, 99999)),
        "build": str(r.randint(1000, 99999)), "runner": f"ci-{rnd(r, 5, string.ascii_lowercase + string.digits)}",
    }


def negatives(r: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [{"text": t, "label": 0, "kind": k, "lang": lang} for k, lang, t in HAND_NEGATIVES]
    for kind, by_lang in NEG_TEMPLATES.items():
        for lang, templates in by_lang.items():
            rows.extend({"text": r.choice(templates).format(**neg_fields(r)), "label": 0, "kind": kind,
                         "lang": lang} for _ in range(9 if lang == "en" else 5))
    return rows


def main() -> None:
    r = random.Random(20251126)
    rows = positives(r) + negatives(r)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    pos = sum(1 for row in rows if row["label"] == 1)
    print(f"{OUT}: {pos} positives, {len(rows) - pos} negatives")


if __name__ == "__main__":
    main()
