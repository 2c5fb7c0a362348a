"""The quality gate, the privacy filter and the router: one table per rule set, English and Chinese, hostile inputs."""

from __future__ import annotations

from datetime import date

import pytest

from memoryd.indexer.access import DEFAULT, Namespace
from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.gate import RULES, check_form, normalise, quality_gate
from memoryd.indexer.write.intake import Accepted, Rejected, prepare
from memoryd.indexer.write.router import BANK_RULES, TYPES, route

GATE_REJECTS = [
    # (content, rule) — every rule, both languages, evasions
    ("", "empty"),
    ("   \n\t  ", "empty"),
    ("- ** **", "empty"),
    ("OK", "too_short"),
    ("好的", "too_short"),
    ("用户对花生过敏", "too_short"),  # 7 CJK characters < 10
    ("Short but real fact", "too_short"),  # 19 characters < 20
    ("Sure, let me look into that for you right away.", "filler"),
    ("Got it — I will remember the deployment steps.", "filler"),
    ("I'll update the configuration file after lunch today.", "filler"),
    ("Here's the summary of what we discussed in the meeting.", "filler"),
    ("This is a summary of the discussion from yesterday.", "filler"),
    ("Thanks, that clarifies the release process for everyone.", "filler"),
    ("好的，我来帮你看看这个问题吧", "filler"),
    ("收到，我会在下午之前完成这个任务", "filler"),
    ("让我先检查一下这个配置文件的内容", "filler"),
    ("以下是今天会议讨论的主要内容总结", "filler"),
    ("/usr/local/bin/python3.11-config", "code"),
    ("~/projects/memoryd/indexer/write/gate.py", "code"),
    ("C:\\Users\\alice\\Documents\\notes.txt", "code"),
    ("import numpy as np, pandas as pd", "code"),
    ("from collections import OrderedDict", "code"),
    ("def handler(request): return None", "code"),
    ('{"user": "alice", "prefers": "vim"}', "code"),
    ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]", "code"),
    ("https://example.com/some/very/long/path", "code"),
    ("a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8", "code"),
    ("@@@ !!! ??? %%% ^^^ &&& ;;; ::: |||", "code"),
    ("Maybe the user likes cats more than dogs.", "speculative"),
    ("I think the deploy is scheduled for Friday.", "speculative"),
    ("Probably the cache is stale after deploys.", "speculative"),
    ("Not sure, but the API might be rate limited.", "speculative"),
    ("可能用户更喜欢猫而不是狗吧这样子", "speculative"),
    ("也许这个接口有速率限制需要确认一下", "speculative"),
    ("我觉得部署应该安排在周五下午进行", "speculative"),
    ("- **Maybe** the user likes cats more than dogs.", "speculative"),  # decoration stripped
    ("ｍａｙｂｅ the user likes cats more than dogs.", "speculative"),  # fullwidth
    ("ma\u200bybe the user likes cats more than dogs.", "speculative"),  # zero-width space inside
    ("\u200dOK\u200d sure thing, noted for later use.", "filler"),  # zero-width joiners around
    ("> Perhaps the build broke because of the cache.", "speculative"),  # quote marker stripped
    ("# The user prefers dark mode in editors", "markup"),
    ("The user <!-- USER_BLOCK_START --> prefers Vim", "markup"),
    ("Deploy steps: ``` make deploy ``` every Friday", "markup"),
    ("The user prefers\x00 dark mode in every editor", "control_chars"),
    ("The user prefers dark\u202e mode in every editor", "control_chars"),  # Trojan Source override
    ("The user prefers \ud800 dark mode in every editor", "control_chars"),  # lone surrogate
]

GATE_PASSES = [
    "The user prefers dark mode in every editor.",
    "OKR targets for Q3 are owned by Alice Chen.",  # "OK" only as a whole word
    "Surely the deploy happens on Tuesday mornings.",  # "sure" only as a whole word
    "Importing data from S3 takes about ten minutes.",  # "import" only as code
    "用户偏好使用深色模式。",  # exactly 10 CJK characters + punctuation
    "用户对花生过敏，点餐时要避开。",
    "团队决定采用 Redis 存储会话数据。",
    "Thinking aloud is how Bob reviews designs.",  # not "I think"
    "The (internal) wiki moved to Notion last week.",
]


@pytest.mark.parametrize(("content", "rule"), GATE_REJECTS)
def test_gate_rejects_with_the_rule_and_its_reason(content: str, rule: str) -> None:
    r = quality_gate(content)
    assert not r.passed and r.rule == rule and r.reason


@pytest.mark.parametrize("content", GATE_PASSES)
def test_gate_passes_facts(content: str) -> None:
    r = quality_gate(content)
    assert r.passed, r


def test_every_gate_rule_has_a_reason_and_is_exercised() -> None:
    names = {r.name for r in RULES} | {"empty", "too_short", "control_chars"}
    assert all(r.reason for r in RULES)
    assert names == {rule for _, rule in GATE_REJECTS}


def test_normalise_keeps_user_characters_on_one_line() -> None:
    assert normalise("- The user\r\nprefers\tdark  mode.\u200b ") == "The user prefers dark mode."
    assert normalise("（注）用户　偏好深色模式") == "（注）用户 偏好深色模式"  # fullwidth kept when written
    assert normalise("Family: 👨\u200d👩\u200d👧 loves hiking") == "Family: 👨\u200d👩\u200d👧 loves hiking"
    assert check_form("**Ｍａｙｂｅ** ma\u200dybe") == "Maybe maybe"


SECRETS = [
    ("My key is sk-proj-abcdefghijklmnopqrstuvwx1234", "api_key"),
    ("Anthropic key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "api_key"),
    ("AWS id AKIAIOSFODNN7EXAMPLE is used by CI", "aws_access_key"),
    ("deploy token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
    ("Slack bot xoxb-1234567890-abcdefghijkl", "slack_token"),
    ("maps key AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key"),
    ("billing uses sk_live_abcdefghijklmnop1234", "stripe_key"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop", "jwt"),
    ("key: -----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA", "private_key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "private_key"),
    ("The staging db password=hunter22 for now", "credential_assignment"),
    ("The API_KEY: 9f8e7d6c5b4a in the env file", "credential_assignment"),
    ("token => 'abc123XYZ987' in the config", "credential_assignment"),
    ("The password is Tr0ub4dor&3 for the router", "credential_assignment"),
    ("数据库密码是 Abc12345，不要外传", "credential_assignment"),
    ("服务器的密钥：9f8e7d6c5b4a3210", "credential_assignment"),
    ("connect with postgres://admin:s3cret@db.example.com/app", "url_credentials"),
    ("clone https://x-token-abcdefghij1234567890@github.com/o/r", "url_credentials"),
    ("Server=db;User Id=sa;Password=Pa55w0rd;Database=app", "credential_assignment"),
    ("Azure AccountKey=abcdefghijklmnopqrstuvwxyz0123456789== here", "credential_assignment"),
    ("The card 4111 1111 1111 1111 is the company card", "card_number"),
    ("客户身份证号 11010519491231002X 已登记", "national_id"),
    ("The NAS lives at 192.168.1.10 on the home network", "private_ip"),
    ("VPN gateway 10.0.12.1 is for the staff only", "private_ip"),
    ("Docker bridge is 172.17.0.1 on every host", "private_ip"),
    ("The ULA prefix fd12:3456:789a::1 is internal", "private_ip"),
    ("Grafana runs on grafana.corp for everyone", "internal_host"),
    ("metrics at prometheus.monitoring.svc.cluster.local", "internal_host"),
    ("ｓｋ－ｐｒｏｊ－abcdefghijklmnopqrstuvwx1234 is the key", "api_key"),  # fullwidth evasion
    ("sk-\u200babcdefghijklmnopqrstuvwx1234 is my key", "api_key"),  # zero-width evasion
    # formats added with the one-detector rework (issue 15); tests/security/test_secrets_*.py has the rest
    ("our aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for ci", "aws_secret_key"),
    ("age key AGE-SECRET-KEY-1" + ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2)[:58], "age_secret_key"),
    ("阿里云 LTAI5tQ9bX2rM7nK4pL8wZ3v 给了外包", "alibaba_access_key"),
    ("databricks dapi0123456789abcdef0123456789abcdef here", "databricks_token"),
    ("do token dop_v1_" + "0123456789abcdef" * 4, "digitalocean_token"),
    ("hook https://discord.com/api/webhooks/123456789012345678/" + "Ab1_" * 16, "discord_webhook"),
    ("encoded c2stcHJvai1BYkNkRWZHaElqS2xNbk9wUXJTdFV2V3gxMjM0", "encoded_secret"),
    ("fetch sk%2Dproj%2DAbCdEfGhIjKlMnOpQrStUvWxYz0123456789 from the vault", "url_encoded_secret"),
    ("blob 736b2d70726f6a2d4162436445664768496a4b6c4d6e4f70517253745576577859", "hex_encoded_secret"),
    ("gitlab glpat-AbCdEfGh1234IjKlMnOp here", "gitlab_token"),
    ("oauth ya29.a0AfH6SMBxAbCdEfGhIjKlMnOp here", "google_oauth_token"),
    ("groq gsk_" + "Ab1Cd2Ef3Gh4" * 4 + " here", "groq_key"),
    ("hf hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh here", "huggingface_token"),
    ("rent to IBAN DE89 3704 0044 0532 0130 00 monthly", "iban"),
    ("linear lin_api_" + "Ab1Cd2Ef3G" * 4, "linear_key"),
    ("notion ntn_" + "Ab1Cd2Ef3G" * 5, "notion_token"),
    ("npm npm_AbCdEfGhIjKlMnOpQrStUvWxYz1234567890", "npm_token"),
    ("pplx-" + "Ab1Cd2Ef3G" * 5 + " is perplexity", "perplexity_key"),
    ("张伟的手机 13812345678 有事打他", "phone_number"),
    ("PIN 4821", "pin"),
    ("WLAN-Passwort: Sonnen#Blume24", "credential_words"),
    ("| user | password |\n|---|---|\n| admin | Nas!Adm1n77 |", "credential_table"),
    ("ssh jenkins:J3nk1ns#Build@203.0.113.40", "url_credentials"),
    ("pypi-AgEIcHlwaS5vcmc" + "Ab1Cd2Ef3G" * 6, "pypi_token"),
    ("replicate r8_" + "Ab1Cd2Ef3G" * 4, "replicate_token"),
    ("SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz1234567890AbCdEfG mail", "sendgrid_key"),
    ("shpat_0123456789abcdef0123456789abcdef shop", "shopify_token"),
    ("square sq0atp-AbCdEfGhIjKlMnOpQrStUv", "square_token"),
    ("SSN 078-05-1120 on the form", "ssn"),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1 telegram", "telegram_bot_token"),
    ("AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA tencent", "tencent_secret_id"),
    ("Twilio SK0123456789abcdef0123456789abcdef", "twilio_key"),
    ("xai-" + "Ab1Cd2Ef3G" * 8, "xai_key"),
]

NOT_SECRETS = [
    "The password is stored in the team vault.",
    "Passwords must be rotated every 90 days.",
    "Use token-based auth for the public API.",
    "password=${DB_PASSWORD} comes from the environment.",
    "The public DNS server 8.8.8.8 is the fallback.",
    "We pin Python 3.10.12 in production images.",
    "ask-me-anything sessions are on Fridays at noon.",
    "The dev server runs on localhost:8080 and 127.0.0.1.",
    "Order 4111111111111112 failed the Luhn check.",
    "密码需要每九十天更换一次。",
]


@pytest.mark.parametrize(("content", "rule"), SECRETS)
def test_privacy_filter_rejects_secrets(content: str, rule: str) -> None:
    r = privacy.check(content)
    assert not r.passed and r.rule == rule and r.reason


@pytest.mark.parametrize("content", NOT_SECRETS)
def test_privacy_filter_lets_talk_about_secrets_through(content: str) -> None:
    assert privacy.check(content).passed


def test_every_privacy_rule_is_exercised() -> None:
    assert {r.name for r in privacy.RULES} == {rule for _, rule in SECRETS}


@pytest.mark.parametrize(("content", "rule"), [s for s in SECRETS if "\u200b" not in s[0] and "ｓ" not in s[0]])
def test_redaction_removes_the_secret_and_keeps_the_lines(content: str, rule: str) -> None:
    out = privacy.redact(content, "all")
    assert privacy.check(out).passed, out
    assert f"[REDACTED:{rule}]" in out and out.count("\n") == content.count("\n")


def test_redaction_levels_and_values_only() -> None:
    text = "db password=hunter22 on 192.168.1.10\nnext line"
    assert privacy.redact(text, "off") == text
    assert privacy.redact(text, "secrets") == "db password=[REDACTED:credential_assignment] on 192.168.1.10\nnext line"
    assert privacy.redact(text, "all").endswith("on [REDACTED:private_ip]\nnext line")
    assert privacy.redact_for_log("sk-\u200babcdefghijklmnopqrstuvwx1234!") == "[REDACTED:api_key]!"


ROUTES = [
    ("Always run the full test suite before merging.", "instruction", "user/instructions.md", "Instructions"),
    ("Never force-push to the main branch of a repo.", "instruction", "user/instructions.md", "Instructions"),
    ("合并前必须跑完整的测试套件。", "instruction", "user/instructions.md", "Instructions"),
    ("不要在周五下午发布生产环境。", "instruction", "user/instructions.md", "Instructions"),
    ("We decided to use Redis for session storage.", "decision", "agent/decisions.md", "Decisions"),
    ("The team chose PostgreSQL over MySQL for billing.", "decision", "agent/decisions.md", "Decisions"),
    ("团队决定采用 Redis 存储会话数据。", "decision", "agent/decisions.md", "Decisions"),
    ("最后选择了方案B作为迁移方案。", "decision", "agent/decisions.md", "Decisions"),
    ("Root cause was a stale cache; the workaround is a restart.", "pattern", "agent/patterns.md", "Patterns"),
    ("发现缓存失效是因为时区配置不一致。", "pattern", "agent/patterns.md", "Patterns"),
    ("发现单例模式在多进程下不适用。", "pattern", "agent/patterns.md", "Patterns"),
    ("The user prefers dark mode in every editor.", "preference", "user/preferences.md", "Preferences"),
    ("Bob loves hiking in the Alps in summer.", "preference", "user/preferences.md", "Preferences"),
    ("用户喜欢深色模式的编辑器。", "preference", "user/preferences.md", "Preferences"),  # 模式 = mode here
    ("Alice Chen is the tech lead of payments.", "entity", "user/entities.md", "Entities"),
    ("Maria's role covers EU escalations.", "entity", "user/entities.md", "Entities"),
    ("张伟担任支付团队的技术负责人。", "entity", "user/entities.md", "Entities"),
    ("Met the design team about the onboarding flow.", "journal", "memory/2025-03-01.md", "2025-03-01"),
    ("This is how the deploy pipeline works today.", "journal", "memory/2025-03-01.md", "2025-03-01"),
    ("It looks like a bug in the parser of the config.", "journal", "memory/2025-03-01.md", "2025-03-01"),
    ("今天和设计团队讨论了新的引导流程。", "journal", "memory/2025-03-01.md", "2025-03-01"),
]


@pytest.mark.parametrize(("content", "kind", "target", "section"), ROUTES)
def test_router_table(content: str, kind: str, target: str, section: str) -> None:
    r = route(content, date(2025, 3, 1))
    assert (r.memory_type, r.target, r.section) == (kind, target, section)
    assert r.importance in range(1, 6) and r.scope in ("global", "project")


def test_every_route_is_exercised_and_type_overrides_keywords() -> None:
    # the Memory Bank types are keyword-routed only in the bank layout (tests/write/test_bank_remember.py)
    assert {k for _, k, _, _ in ROUTES} == set(TYPES) - {r.memory_type for r in BANK_RULES}
    assert route("The API must support pagination.", date(2025, 3, 1)).memory_type == "instruction"
    r = route("Always run the full test suite before merging.", date(2025, 3, 1), "preference")
    assert (r.memory_type, r.target, r.matched) == ("preference", "user/preferences.md", "type")
    single = route("Always run the tests.", date(2025, 3, 1), layout="single")
    assert (single.target, single.section) == ("MEMORY.md", "Instructions")


def test_prepare_runs_privacy_before_the_gate_and_builds_namespace_paths() -> None:
    # a secret that the gate would also reject (too short) is reported as a secret
    assert prepare("pwd=hunter22", DEFAULT, date(2025, 3, 1)) == Rejected(
        "privacy", "credential_assignment", "contains a password/token/key assignment")
    plan = prepare("- The user prefers dark mode in every editor.", Namespace("agent", "coder"), date(2025, 3, 1))
    assert isinstance(plan, Accepted) and plan.target == "agents/coder/user/preferences.md"
    assert plan.content == "The user prefers dark mode in every editor."
    peer = prepare("Bob prefers async updates over meetings.", Namespace("peer", "bob"), date(2025, 3, 1))
    assert isinstance(peer, Accepted) and (peer.target, peer.route.section) == ("peers/bob/MEMORY.md", "Preferences")
