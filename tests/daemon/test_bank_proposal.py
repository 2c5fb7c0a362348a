"""Memory Bank proposals (seed 002, issue #40 item 5): propose, then confirm / reject / ignore.

The pure part (:mod:`memoryd.indexer.write.proposal`) and the socket methods ``bank_propose`` and
``bank_reply`` on a daemon whose root holds a Memory Bank: a confirm writes through ``remember``,
a reject, an ignored proposal and a confirm word without a proposal write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from memoryd.indexer.access import DEFAULT
from memoryd.indexer.bank import apply_plan, make_plan
from memoryd.indexer.bank.turns import Turn, parse_turns
from memoryd.indexer.llm.errors import LLMUnavailable
from memoryd.indexer.write.proposal import Proposal, answer_of, parse, propose_by_model, propose_by_rules, render
from tests.helpers import running_daemon

TODAY = date(2025, 3, 1)
MEMORY = "memory-bank/MEMORY.md"
DECISION = "We decided to use Redis for session storage."
TALK = [Turn("user", "How should we store sessions?"),
        Turn("assistant", f"I compared the options. {DECISION} It keeps the latency low.")]


def test_rules_propose_the_decision_for_the_file_remember_would_write() -> None:
    p = propose_by_rules(TALK, DEFAULT, TODAY, bank=True)
    assert p is not None and p.target == MEMORY and p.memory_type == "decision" and p.points == (DECISION,)
    assert p.by == "rules"
    plain = propose_by_rules(TALK, DEFAULT, TODAY, bank=False)  # no bank: the files layout's place
    assert plain is not None and plain.target == "agent/decisions.md"


def test_nothing_to_propose_in_small_talk_questions_or_secrets() -> None:
    chat = [Turn("user", "Hello, how are you doing today?"), Turn("assistant", "Sure, let me check that for you.")]
    assert propose_by_rules(chat, DEFAULT, TODAY, bank=True) is None
    secret = [Turn("assistant", "We decided to use the token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB for CI.")]
    assert propose_by_rules(secret, DEFAULT, TODAY, bank=True) is None


def test_no_proposal_right_after_one_or_on_an_answer_word() -> None:
    p = propose_by_rules(TALK, DEFAULT, TODAY, bank=True)
    assert p is not None
    assert propose_by_rules([*TALK, Turn("assistant", render(p))], DEFAULT, TODAY, bank=True) is None
    assert propose_by_rules([*TALK, Turn("user", "好")], DEFAULT, TODAY, bank=True) is None


def test_the_proposal_text_parses_back_in_ours_and_the_seeds_form() -> None:
    p = Proposal(MEMORY, "decision", (DECISION, "Sessions expire after 30 days; refresh tokens rotate."))
    text = render(p)
    assert text.startswith("---\n💾") and MEMORY in text
    assert parse(f"Done: the cache is fixed.\n\n{text}") == p
    seed = "---\n💾 要把这次的发现写入 Memory Bank 吗？\n   → memory-bank/details/patterns.md\n" \
           "   → 内容：缓存失效的原因是时钟漂移；重启服务可以恢复\n\n回复\"好\"或\"写\"即可，不需要可忽略。\n---"
    got = parse(seed)
    assert got is not None and got.target == "memory-bank/details/patterns.md"
    assert got.points == ("缓存失效的原因是时钟漂移", "重启服务可以恢复")
    assert parse("no proposal here → memory-bank/MEMORY.md") is None


@pytest.mark.parametrize(("message", "kind"), [
    ("好", "confirm"), ("写", "confirm"), ("写吧，顺便问一下缓存怎么配？", "confirm"), ("yes", "confirm"),
    ("OK!", "confirm"), ("sure, thanks", "confirm"), ("mb:write", "confirm"), ("确认", "confirm"),
    ("不用", "reject"), ("跳过", "reject"), ("no", "reject"), ("skip", "reject"), ("mb:no", "reject"),
    ("算了吧", "reject"), ("Now look at the login page", None), ("nothing else today", None),
    ("okay-ish code review please", None), ("yesterday the build broke", None),
])
def test_answer_words(message: str, kind: str | None) -> None:
    assert answer_of(message) == kind


class FakeModel:
    """A scripted ``complete_json``: records the calls, returns ``answer`` or raises ``error``."""

    def __init__(self, answer: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.answer, self.error, self.calls = answer, error, 0

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer


def test_the_model_phrases_the_points_and_the_gate_still_checks_them() -> None:
    model = FakeModel({"write": True, "type": "pattern", "points": [
        "Session storage timed out because the Redis pool was too small; raising it to 50 fixed it.",
        "ok", "The admin password is hunter2hunter2 for the staging box."]})
    p = propose_by_model(TALK, DEFAULT, TODAY, True, model)
    assert p is not None and p.by == "model" and model.calls == 1
    assert p.target == "memory-bank/details/learnings/notes.md" and len(p.points) == 1  # filler and secret dropped


def test_a_failing_model_falls_back_to_the_rules_and_a_no_is_kept() -> None:
    down = propose_by_model(TALK, DEFAULT, TODAY, True, FakeModel(error=LLMUnavailable("llm server down")))
    assert down is not None and down.by == "rules" and down.points == (DECISION,)
    assert propose_by_model(TALK, DEFAULT, TODAY, True, FakeModel({"write": False, "type": "decision",
                                                                   "points": []})) is None


def test_transcript_forms_give_the_same_turns() -> None:
    claude = "\n".join(json.dumps(x) for x in [
        {"type": "user", "message": {"role": "user", "content": "How should we store sessions?"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "name": "Read", "input": {}},
            {"type": "text", "text": "We decided to use Redis."}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}}])
    openai = json.dumps([{"role": "system", "content": "be nice"}, {"role": "user", "content": "How should we store "
                         "sessions?"}, {"role": "assistant", "content": "We decided to use Redis."}])
    plain = "user: How should we store sessions?\nassistant: We decided to use Redis."
    want = [Turn("user", "How should we store sessions?"), Turn("assistant", "We decided to use Redis.")]
    assert parse_turns(claude) == parse_turns(openai) == parse_turns(plain) == want


# -- through the socket -------------------------------------------------------------------------


@pytest.fixture
def bank(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Any, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "README.md").write_text("# Widget service\n\nA small service that renders widgets.\n")
    apply_plan(make_plan(root, TODAY))
    with running_daemon(tmp_path, short_dir / "m.sock", {}) as (_d, client, root):
        yield client, root


def proposal_text(client: Any) -> str:
    turns = [{"role": t.role, "text": t.text} for t in TALK]
    out = client.call("bank_propose", {"turns": turns})
    assert out["proposal"]["target"] == MEMORY and out["proposal"]["points"] == [DECISION]
    return str(out["proposal"]["text"])


def test_confirm_writes_the_points_through_remember(bank: Any) -> None:
    client, root = bank
    text = proposal_text(client)
    out = client.call("bank_reply", {"prompt": "好", "previous": f"Done.\n\n{text}"})
    assert out["answer"] == "confirm" and out["refused"] == []
    assert [w["path"] for w in out["written"]] == [MEMORY] and out["written"][0]["decision"] == "appended"
    assert "Redis for session storage" in (root / MEMORY).read_text()
    entries = client.call("audit", {"tail": 5})["entries"]
    assert any(e.get("action") == "remember" and e.get("path") == MEMORY for e in entries)  # the normal write path


def test_reject_and_ignore_write_nothing(bank: Any) -> None:
    client, root = bank
    text = proposal_text(client)
    before = (root / MEMORY).read_text()
    assert client.call("bank_reply", {"prompt": "不用", "previous": text})["answer"] == "reject"
    assert client.call("bank_reply", {"prompt": "Now fix the login page please", "previous": text})["answer"] \
        == "ignored"
    assert (root / MEMORY).read_text() == before


def test_a_confirm_word_without_a_proposal_writes_nothing(bank: Any) -> None:
    client, root = bank
    before = (root / MEMORY).read_text()
    transcript = "\n".join(json.dumps({"type": t.role, "message": {"role": t.role, "content": t.text}})
                           for t in TALK)  # a decision was discussed, but no 💾 proposal was made
    out = client.call("bank_reply", {"prompt": "yes", "transcript": transcript})
    assert out == {"answer": "none", "written": [], "refused": []}
    assert (root / MEMORY).read_text() == before


# -- through the installed context hook, as Claude Code runs it ----------------------------------


def transcript(path: Path, assistant_text: str) -> str:
    lines = [{"type": "user", "message": {"role": "user", "content": "How should we store sessions?"}},
             {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text",
                                                                                  "text": assistant_text}]}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))  # json.dumps escapes 💾 as \ud83d\udcbe
    return str(path)


@pytest.mark.slow
def test_the_hook_confirms_rejects_and_ignores_a_proposal(bank: Any, tmp_path: Path) -> None:
    from tests.client.test_agents_snippets import run_hook

    client, root = bank
    sock = client.path
    text = proposal_text(client)
    with_proposal = transcript(tmp_path / "t1.jsonl", f"Done.\n\n{text}")
    before = (root / MEMORY).read_text()
    for prompt in ("不用", "Now fix the login page please"):  # reject, ignore: nothing written
        done = run_hook({"prompt": prompt, "transcript_path": with_proposal}, "--socket", str(sock))
        assert done.returncode == 0 and "confirmed" not in done.stdout, done.stdout
    assert (root / MEMORY).read_text() == before
    without = transcript(tmp_path / "t2.jsonl", f"I compared the options. {DECISION}")
    done = run_hook({"prompt": "好", "transcript_path": without}, "--socket", str(sock))
    assert (done.returncode, done.stdout) == (0, "") and (root / MEMORY).read_text() == before
    done = run_hook({"prompt": "好", "transcript_path": with_proposal}, "--socket", str(sock))
    assert done.returncode == 0 and done.stdout.startswith("memoryd: the Memory Bank proposal was confirmed"), \
        (done.stdout, done.stderr)
    assert "Redis for session storage" in (root / MEMORY).read_text()


def test_the_mcp_tool_returns_the_proposal_text_and_writes_nothing(bank: Any) -> None:
    from memoryd.daemon.client.mcp_server import DaemonBridge

    client, root = bank
    before = (root / MEMORY).read_text()
    bridge = DaemonBridge(client.path)
    text, out = bridge.call_tool("memory_bank_propose", {"transcript": "user: How should we store sessions?\n"
                                                                       f"assistant: {DECISION}"})
    assert text.startswith("---\n💾") and out["proposal"]["points"] == [DECISION]
    assert (root / MEMORY).read_text() == before
    text, out = bridge.call_tool("memory_bank_propose", {"transcript": "user: hi\nassistant: Hello there!"})
    assert out == {"text": "", "proposal": None}
