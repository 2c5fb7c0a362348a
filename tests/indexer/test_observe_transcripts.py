"""observe's transcript formats (indexer/observe/transcript.py): the same conversation from four hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.indexer.observe.transcript import TranscriptError, detect, parse

DATA = Path(__file__).resolve().parents[1] / "data" / "observe"
EXPECTED = [("user", "I prefer green tea over coffee when I work late."),
            ("assistant", "Noted: green tea for late work."),
            ("user", "Our CI runs on two cores, so keep the test suite under ten minutes."),
            ("assistant", "Understood, under ten minutes on two cores.")]


@pytest.mark.parametrize(("name", "fmt"), [("claude.jsonl", "claude-code"), ("codex.jsonl", "codex"),
                                           ("messages.json", "openai"), ("plain.txt", "plain")])
def test_every_format_gives_the_conversation_without_tools_system_meta_or_memoryd_context(name: str,
                                                                                           fmt: str) -> None:
    text = (DATA / name).read_text()
    assert detect(text) == fmt
    turns = parse(text)
    assert [(t.role, t.text) for t in turns] == EXPECTED


def test_ids_are_the_same_in_every_format_and_count_repeats() -> None:
    ids = {name: [t.id for t in parse((DATA / name).read_text())]
           for name in ("claude.jsonl", "codex.jsonl", "messages.json", "plain.txt")}
    assert len({tuple(v) for v in ids.values()}) == 1
    twice = parse("user: ok\nassistant: done\nuser: ok\n")
    assert twice[0].id != twice[2].id and twice[0].id.split(".")[0] == twice[2].id.split(".")[0]


def test_an_old_codex_file_and_one_message_a_line_parse() -> None:
    old = ('{"id": "x", "timestamp": "t", "instructions": "be brief"}\n'
           '{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}\n')
    assert [(t.role, t.text) for t in parse(old)] == [("user", "hello there")]
    lines = '{"role": "user", "content": "a question"}\n{"role": "assistant", "content": "an answer"}\n'
    assert [t.text for t in parse(lines, "openai")] == ["a question", "an answer"]


@pytest.mark.parametrize(("text", "fmt", "needle"), [
    ("just some words\n", "plain", "must start with a role"),
    ('{"type": "user"}\nnot json\n', "claude-code", "line 2: not a JSON object"),
    ('{"messages": 3}', "openai", "expected a JSON array"),
    ("user: hi", "yaml", "format must be one of"),
])
def test_what_is_not_a_transcript_is_refused_naming_where(text: str, fmt: str, needle: str) -> None:
    with pytest.raises(TranscriptError, match=needle):
        parse(text, fmt)


def test_a_notes_parts_cannot_be_another_sessions_note() -> None:
    """Part 2 of session ``x`` is ``…-x.part2.md``: a session whose own id is ``x.part2`` gets a hashed name."""
    from datetime import date

    from memoryd.indexer.access import parse_namespace
    from memoryd.indexer.observe.notes import note_name, note_rel, rolls_over

    ns = parse_namespace("agent:a", None)
    assert note_rel(ns, "sessions", "2026-12-02", "x") == "agents/a/sessions/2026-12-02-x.md"
    assert note_rel(ns, "sessions", "2026-12-02", "x", 2) == "agents/a/sessions/2026-12-02-x.part2.md"
    assert note_name("x.part2").startswith("s") and note_name("x.part2") != "x.part2"
    assert note_name("x.partly") == "x.partly"
    today = date(2026, 12, 2)
    assert not rolls_over("2026-12-01", 4_999, today, 30, 10_000)
    assert rolls_over("2026-12-01", 5_000, today, 30, 10_000)  # half the namespace's cap
    assert rolls_over("2026-11-01", 10, today, 30, 10_000)  # older than keep_days
    assert not rolls_over("2026-11-01", 10**9, today, 0, 0)  # both bounds off: one note for ever
