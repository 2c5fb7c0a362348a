"""The [llm] provider (indexer/llm/): config, key handling, the hostile-answer checks, retries, budget."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.indexer import config
from memoryd.indexer.errors import ConfigError
from memoryd.indexer.llm.budget import TokenBudget
from memoryd.indexer.llm.client import LLMClient, Settings
from memoryd.indexer.llm.config import LLMConfig, read_key
from memoryd.indexer.llm.errors import LLMBadAnswer, LLMBudgetExhausted, LLMOff, LLMUnavailable
from memoryd.indexer.llm.schema import SchemaViolation, check
from tests.fake_chat_server import FakeChatServer

SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["memories"], "additionalProperties": False,
    "properties": {"memories": {"type": "array", "maxItems": 5, "items": {
        "type": "object", "required": ["content", "importance"],
        "properties": {"content": {"type": "string", "maxLength": 200},
                       "importance": {"type": "integer", "minimum": 1, "maximum": 10}}}}}}
MESSAGES = [{"role": "system", "content": "extract"}, {"role": "user", "content": "I like tea"}]
KEY = "local-llm-key-4f9c2b7e"


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as srv:
        yield srv


def _client(srv: FakeChatServer, *, key: str = "", daily: int = 0, sleeps: list[float] | None = None,
            **over: Any) -> LLMClient:
    cfg = LLMConfig(provider="openai", url=srv.url, model="fake-model", **over)
    slept = sleeps if sleeps is not None else []
    return LLMClient(Settings.from_config(cfg), key, TokenBudget(daily), sleep=slept.append)


def test_complete_json_sends_one_chat_request_and_returns_the_checked_object(server: FakeChatServer) -> None:
    server.replies = [{"memories": [{"content": "likes tea", "importance": 6}]}]
    c = _client(server, key=KEY, max_answer_tokens=300)
    assert c.complete_json(MESSAGES, SCHEMA) == {"memories": [{"content": "likes tea", "importance": 6}]}
    (body,) = server.requests
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES and body["max_tokens"] == 300
    assert body["response_format"] == {"type": "json_object"} and body["stream"] is False
    assert server.auth == [f"Bearer {KEY}"]
    assert c.budget.snapshot()["used"] == 15  # the server's usage.total_tokens
    assert c.health()["reachable"] is True and KEY not in json.dumps(c.health())


def test_json_schema_mode_sends_the_schema_and_none_sends_nothing(server: FakeChatServer) -> None:
    server.default = {"memories": []}
    _client(server, response_format="json_schema").complete_json(MESSAGES, SCHEMA, name="extraction")
    _client(server, response_format="none").complete_json(MESSAGES, SCHEMA)
    first, second = server.requests
    assert first["response_format"]["json_schema"] == {"name": "extraction", "schema": SCHEMA, "strict": True}
    assert "response_format" not in second


def test_a_code_fenced_answer_is_taken_out_of_its_fence(server: FakeChatServer) -> None:
    server.replies = ['```json\n{"memories": []}\n```']
    assert _client(server).complete_json(MESSAGES, SCHEMA) == {"memories": []}


@pytest.mark.parametrize(("mode", "reply", "needle"), [
    ("not_json", None, "not JSON"),
    ("not_object", None, "not an object"),
    ("no_choices", None, "not a chat-completions answer"),
    ("cut", None, "cut at max_tokens"),
    ("ok", {"memories": [{"content": "x", "importance": 11}]}, "$.memories[0].importance: 11 is above maximum 10"),
    ("ok", {"memories": [], "secret_plan": 1}, "unexpected key(s) 'secret_plan'"),
    ("ok", {"memories": [{"content": "x", "importance": True}]}, "$.memories[0].importance: must be integer"),
    ("ok", "[" * 5000 + "]" * 5000, "nested too deep"),
])
def test_an_answer_that_does_not_fit_is_a_bad_answer_naming_where(server: FakeChatServer, mode: str,
                                                                  reply: Any, needle: str) -> None:
    server.mode = mode
    if reply is not None:
        server.replies = [reply]
    c = _client(server)
    with pytest.raises(LLMBadAnswer) as info:
        c.complete_json(MESSAGES, SCHEMA)
    assert needle in str(info.value)
    assert len(server.requests) == 1  # a bad answer is not asked again (the caller retries the turn later)
    assert c.health()["reachable"] is False and needle in str(c.health()["last_error"])


@pytest.mark.parametrize("mode", ["429", "500", "503"])
def test_429_and_5xx_are_retried_with_backoff_then_unavailable(server: FakeChatServer, mode: str) -> None:
    server.mode = mode
    sleeps: list[float] = []
    with pytest.raises(LLMUnavailable) as info:
        _client(server, sleeps=sleeps, retries=2).complete_json(MESSAGES, SCHEMA)
    assert f"HTTP {mode}" in str(info.value)
    assert len(server.requests) == 3 and sleeps == [1.0, 2.0]


def test_a_server_that_recovers_within_the_retries_answers(server: FakeChatServer) -> None:
    server.mode, server.fail_times, server.default = "fail_then_ok", 2, {"memories": []}
    assert _client(server, retries=2).complete_json(MESSAGES, SCHEMA) == {"memories": []}
    assert len(server.requests) == 3


def test_after_a_failure_the_breaker_fails_the_next_call_at_once(server: FakeChatServer) -> None:
    server.mode = "500"
    c = _client(server, retries=0)
    with pytest.raises(LLMUnavailable):
        c.complete_json(MESSAGES, SCHEMA)
    server.mode = "ok"
    with pytest.raises(LLMUnavailable, match="is down"):
        c.complete_json(MESSAGES, SCHEMA)
    assert len(server.requests) == 1


def test_a_401_is_not_retried_and_the_key_it_repeats_is_scrubbed(server: FakeChatServer) -> None:
    server.mode = "unauthorized"
    c = _client(server, key=KEY)
    with pytest.raises(LLMUnavailable) as info:
        c.complete_json(MESSAGES, SCHEMA)
    assert len(server.requests) == 1 and "HTTP 401" in str(info.value)
    assert KEY not in str(info.value) and "[REDACTED:llm.api_key]" in str(info.value)
    assert KEY not in json.dumps(c.health()) and KEY not in repr(c)


@pytest.mark.parametrize(("mode", "needle"), [("trickle", "no complete answer within"),
                                              ("silent", "no complete answer within 1 s"),
                                              ("huge", "longer than the 4096 bytes")])
def test_a_trickling_silent_or_huge_answer_is_cut_off_not_waited_for(server: FakeChatServer, mode: str,
                                                                     needle: str) -> None:
    server.mode, server.default = mode, {"memories": []}
    with pytest.raises(LLMUnavailable) as info:
        _client(server, timeout_s=1.0, max_answer_bytes=4096).complete_json(MESSAGES, SCHEMA)
    assert needle in str(info.value)
    assert len(server.requests) == 1  # a passed deadline or cap is not retried


def test_the_daily_budget_refuses_a_call_before_it_is_sent(server: FakeChatServer) -> None:
    c = _client(server, daily=100, max_answer_tokens=128)
    with pytest.raises(LLMBudgetExhausted, match=r"llm\.daily_tokens = 100"):
        c.complete_json(MESSAGES, SCHEMA)
    assert server.requests == []


def test_the_budget_settles_on_use_survives_a_restart_and_rolls_over_at_utc_midnight(tmp_path: Path) -> None:
    now = [86400.0 * 20000 + 3600]
    path = tmp_path / "budget.json"
    b = TokenBudget(1000, path, clock=lambda: now[0])
    b.reserve(600)
    with pytest.raises(LLMBudgetExhausted):
        b.reserve(500)  # held, not yet settled: two calls cannot overshoot together
    b.settle(600, 400)
    b.reserve(500)
    b.settle(500, 0)
    again = TokenBudget(1000, path, clock=lambda: now[0])
    assert again.snapshot()["used"] == 400
    now[0] += 86400
    assert TokenBudget(1000, path, clock=lambda: now[0]).snapshot()["used"] == 0


def test_check_lists_the_served_models_and_spends_no_tokens(server: FakeChatServer) -> None:
    assert "serves 'fake-model'" in _client(server).check()
    other = LLMClient(Settings.from_config(LLMConfig(provider="openai", url=server.url, model="other")), "",
                      TokenBudget(0))
    with pytest.raises(LLMUnavailable, match=r"does not serve llm\.model 'other'"):
        other.check()
    assert server.requests == []


def test_provider_off_builds_no_client() -> None:
    with pytest.raises(LLMOff):
        Settings.from_config(LLMConfig())


def test_config_is_off_by_default_and_openai_needs_url_and_model(tmp_path: Path) -> None:
    assert config.Config().llm.provider == "off"
    f = tmp_path / "m.toml"
    f.write_text('[llm]\nprovider = "openai"\nmodel = "m"\n')
    os.chmod(f, 0o600)
    with pytest.raises(ConfigError, match=r"llm\.url"):
        config.load(f, env={"HOME": str(tmp_path)})
    f.write_text('[llm]\nprovider = "openai"\nurl = "http://x/v1"\nmodel = "m"\napi_key = "sk-1"\n')
    with pytest.raises(ConfigError, match=r"'llm\.api_key' cannot be set in a file"):
        config.load(f, env={"HOME": str(tmp_path)})


def test_the_key_comes_from_the_env_or_a_0600_file_and_is_never_printed(tmp_path: Path) -> None:
    f = tmp_path / "m.toml"
    f.write_text('[llm]\nprovider = "openai"\nurl = "http://x/v1"\nmodel = "m"\napi_key_env = "MY_LLM_KEY"\n')
    os.chmod(f, 0o600)
    with pytest.raises(ConfigError, match="'MY_LLM_KEY': that environment variable is not set"):
        config.load(f, env={"HOME": str(tmp_path)})
    cfg = config.load(f, env={"HOME": str(tmp_path), "MY_LLM_KEY": KEY})
    assert cfg.llm_api_key == KEY and KEY not in repr(cfg)
    keyfile = tmp_path / "llm.key"
    keyfile.write_text(KEY + "\n")
    os.chmod(keyfile, 0o644)
    c = LLMConfig(provider="openai", url="http://x/v1", model="m", api_key_file=keyfile)
    with pytest.raises(ConfigError) as info:
        read_key(c, {})
    assert "chmod 600" in str(info.value) and KEY not in str(info.value)
    os.chmod(keyfile, 0o600)
    assert read_key(c, {}) == KEY
    keyfile.write_text("two words\n")
    with pytest.raises(ConfigError, match="alone on one line"):
        read_key(c, {})


def test_the_schema_checker_names_the_path_and_bounds_depth() -> None:
    with pytest.raises(SchemaViolation, match=r"\$\.memories: missing|\$: missing required key 'memories'"):
        check({}, SCHEMA)
    deep: Any = {}
    cur = deep
    for _ in range(30):
        cur["a"] = {}
        cur = cur["a"]
    nested: dict[str, Any] = {"type": "object", "properties": {}}
    node = nested
    for _ in range(30):
        node["properties"] = {"a": {"type": "object", "properties": {}}}
        node = node["properties"]["a"]
    with pytest.raises(SchemaViolation, match="deeper than 16"):
        check(deep, nested)
    with pytest.raises(ValueError, match="not supported"):
        check(1, {"type": "integer", "multipleOf": 2})


def test_doctor_checks_llm_off_served_and_down_without_the_key(server: FakeChatServer) -> None:
    import dataclasses

    from memoryd.daemon.client.doctor import FAIL, OK, Check
    from memoryd.daemon.client.doctor_llm import llm_check

    assert llm_check(config.Config())[0] == OK
    on = dataclasses.replace(config.Config(), llm=LLMConfig(provider="openai", url=server.url, model="fake-model"),
                             llm_api_key=KEY)
    good = Check("llm", *llm_check(on))
    assert good.level == OK and "serves 'fake-model'" in good.message and server.requests == []
    down = dataclasses.replace(on, llm=LLMConfig(provider="openai", url="http://127.0.0.1:9/v1", model="m"))
    bad = Check("llm", *llm_check(down))
    assert bad.level == FAIL and KEY not in bad.line() and "observe captures meanwhile" in bad.fix


def test_doctor_warns_when_the_days_token_budget_is_spent(server: FakeChatServer, tmp_path: Path) -> None:
    """A server that answers is not enough: with llm.daily_tokens spent every model feature is paused."""
    import dataclasses
    import time

    from memoryd.daemon.client.doctor import OK, WARN, Check
    from memoryd.daemon.client.doctor_llm import llm_check
    from memoryd.indexer.llm.client import BUDGET_FILE

    base = config.Config()
    cfg = dataclasses.replace(base, storage=dataclasses.replace(base.storage, data_dir=tmp_path), llm_api_key=KEY,
                              llm=LLMConfig(provider="openai", url=server.url, model="fake-model", daily_tokens=1000))
    fresh = Check("llm", *llm_check(cfg))
    assert fresh.level == OK and "0 of 1000 tokens used today" in fresh.message
    day = time.strftime("%Y-%m-%d", time.gmtime())
    (tmp_path / BUDGET_FILE).write_text(json.dumps({"day": day, "used": 1200}) + "\n")  # as the daemon keeps it
    spent = Check("llm", *llm_check(cfg))
    assert spent.level == WARN and f"llm.daily_tokens = 1000 is spent for {day} (UTC): 1200 used" in spent.message
    assert "until 00:00 UTC" in spent.fix and server.requests == [] and KEY not in spent.line()
