"""The daemon's one [llm] client reaches bank_propose and context (issue #40, items 4 and 5).

A scripted ``/v1/chat/completions`` server (tests/fake_chat_server.py) stands in for the model;
its failures give the answers without a model, never an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.indexer.llm.config import LLMConfig
from tests.fake_chat_server import FakeChatServer
from tests.helpers import running_daemon

FILES = {f"notes/{name}.md": "# Notes\n\n" + "".join(f"- The {name} migration step {i} moved service {i} to the "
                                                     f"new queue on day {i}.\n" for i in range(40))
         for name in ("alpha", "beta", "gamma")}
TURNS = [{"role": "user", "text": "How should we store sessions?"},
         {"role": "assistant", "text": "I compared them. Root cause was a stale cache; the fix was a TTL of 60 s."}]


@pytest.fixture
def env(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, FakeChatServer]]:
    with FakeChatServer() as chat:
        llm = LLMConfig(provider="openai", url=chat.url, model="fake-model", retries=0)
        with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, llm=llm) as (_d, client, _root):
            yield client, chat


def test_bank_propose_asks_the_model_and_falls_back_to_the_rules(env: Any) -> None:
    client, chat = env
    chat.replies.append({"write": True, "type": "pattern",
                         "points": ["A stale cache caused the session bug; a 60 s TTL fixed it."]})
    out = client.call("bank_propose", {"turns": TURNS})["proposal"]
    assert out["by"] == "model" and out["points"] == ["A stale cache caused the session bug; a 60 s TTL fixed it."]
    assert chat.requests and "bank" in str(chat.requests[-1]["messages"][0]["content"]).lower()
    chat.mode = "500"
    out = client.call("bank_propose", {"turns": TURNS})["proposal"]
    assert out["by"] == "rules" and out["type"] == "pattern"


def test_context_summarizes_through_the_model_and_survives_its_failure(env: Any) -> None:
    client, chat = env
    chat.default = {"points": [{"source": 1, "text": "Forty services moved to the new queue."}]}
    params = {"query": "migration step moved service new queue", "mode": "keyword", "max_tokens": 200,
              "min_score": 0}
    out = client.call("context", params)
    assert "### Summary of" in out["text"] and "Forty services moved to the new queue." in out["text"], out["text"]
    assert any(s.get("summarized") for s in out["sources"]) and out["tokens"] <= 200
    chat.mode = "503"
    plain = client.call("context", params)
    assert "Summary of" not in plain["text"] and plain["sources"] and plain["tokens"] <= 200
