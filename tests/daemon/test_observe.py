"""observe (daemon/api/observe.py): capture by default, extraction with a (fake) model, retention, idempotence."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.render import render_status
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.ui.views import dashboard
from memoryd.indexer.config import Config
from memoryd.indexer.llm.config import LLMConfig
from memoryd.indexer.observe.config import ObserveConfig
from tests.fake_chat_server import FakeChatServer
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

DATA = Path(__file__).resolve().parents[1] / "data" / "observe"
NS = "agent:claude-code"
SECRET = "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ANSWER = {"memories": [{"type": "preference", "content": "The user prefers green tea over coffee when working late.",
                        "keywords": ["tea"], "importance": 7},
                       {"type": "knowledge", "content": "The user said hello.", "importance": 1}],
          "experiences": [{"pain": "The test suite took 25 minutes on the two-core CI runner",
                           "solution": "split the slow model tests behind a marker",
                           "outcome": "CI finishes in under ten minutes"}],
          "profile": {"role": "backend engineer", "topics": ["continuous integration speed"],
                      "tools": ["pytest with markers"], "pain_points": []}}


def _write(cfg: Config) -> Config:
    return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]


@pytest.fixture
def chat() -> Iterator[FakeChatServer]:
    with FakeChatServer() as srv:
        yield srv


def _daemon(tmp_path: Path, short_dir: Path, chat: FakeChatServer | None = None, **observe: Any) -> Any:
    llm = LLMConfig(provider="openai", url=chat.url, model="fake-model", retries=0) if chat else LLMConfig()
    return running_daemon(tmp_path, short_dir / "m.sock", {"MEMORY.md": "# Memory\n"}, timeout=20, tweak=_write,
                          llm=llm, observe=dataclasses.replace(ObserveConfig(), **observe))


def _observe(client: Any, text: str, sid: str = "sess-1", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = client.call("observe", {"session_id": sid, "namespace": NS, "transcript": text, **extra})
    return out


def test_capture_appends_redacted_turns_to_a_dated_note_and_a_resend_adds_nothing(tmp_path: Path,
                                                                                 short_dir: Path) -> None:
    with _daemon(tmp_path, short_dir) as (_, client, root):
        text = (DATA / "claude.jsonl").read_text()
        first = _observe(client, text)
        rel = f"agents/claude-code/sessions/{date.today().isoformat()}-sess-1.md"
        assert first["note"] == rel and first["captured"] == 4 and first["extraction"] == {"state": "off"}
        note = (root / rel).read_text()
        assert note.startswith(f"# Conversation {date.today().isoformat()} (session sess-1)\n")
        assert "I prefer green tea" in note and "**assistant** ·" in note
        assert "Relevant memories" not in note and "README.md" not in note and "Be concise" not in note
        again = _observe(client, text)
        assert again["captured"] == 0 and again["seen"] == 4 and (root / rel).read_text() == note
        more = _observe(client, text.replace('"a2"', '"a2"') + json.dumps(
            {"type": "user", "message": {"role": "user", "content": f"one more thing\n{SECRET}\nthanks"}}) + "\n")
        assert more["captured"] == 1 and more["withheld_lines"] == 1
        grown = (root / rel).read_text()
        assert grown.startswith(note) and "one more thing" in grown and "thanks" in grown
        assert "wJalrXUtnFEMI" not in grown and "[line withheld by memoryd: " in grown
        hits = client.call("search", {"query": "green tea coffee late", "k": 3, "mode": "keyword"})["hits"]
        assert any(h["path"] == rel for h in hits)
        st = client.call("status")["observe"]
        assert st["captured_turns"] == 5 and st["extraction"] == "off"


def test_the_seen_turns_survive_a_restart(tmp_path: Path, short_dir: Path) -> None:
    text = (DATA / "plain.txt").read_text()
    with _daemon(tmp_path, short_dir) as (_, client, _root):
        assert _observe(client, text)["captured"] == 4
    with _daemon(tmp_path, short_dir) as (_, client, _root):
        assert _observe(client, text)["captured"] == 0
        assert _observe(client, (DATA / "codex.jsonl").read_text())["captured"] == 0  # same turns, other format


def test_turns_the_cli_parsed_carry_their_ids(tmp_path: Path, short_dir: Path) -> None:
    from memoryd.indexer.observe.transcript import parse

    turns = [{"role": t.role, "text": t.text, "id": t.id} for t in parse((DATA / "plain.txt").read_text())]
    with _daemon(tmp_path, short_dir) as (_, client, _root):
        assert client.call("observe", {"session_id": "s", "namespace": NS, "turns": turns})["captured"] == 4
        assert _observe(client, (DATA / "plain.txt").read_text(), sid="s")["captured"] == 0
        with pytest.raises(RpcClientError, match="turn id"):
            client.call("observe", {"session_id": "s", "namespace": NS,
                                    "turns": [{"role": "user", "text": "x", "id": "../../etc"}]})


def test_retention_deletes_whole_old_notes_records_them_and_undo_restores(tmp_path: Path, short_dir: Path) -> None:
    with _daemon(tmp_path, short_dir, keep_days=7) as (_, client, root):
        old = root / "agents/claude-code/sessions/2020-01-01-old.md"
        old.parent.mkdir(parents=True)
        old.write_text("# Conversation 2020-01-01 (session old)\n\n**user** · 10:00 UTC\nlong ago\n")
        other = root / "agents/claude-code/sessions/notes.md"  # not a session note: never touched
        other.write_text("# Mine\n")
        out = _observe(client, "user: a new conversation about tea\n")
        assert out["expired"] == ["agents/claude-code/sessions/2020-01-01-old.md"]
        assert not old.exists() and other.exists()
        (rec,) = [r for r in client.call("history", {"limit": 10})["entries"] if r["action"] == "expire"]
        assert rec["path"] == "agents/claude-code/sessions/2020-01-01-old.md"
        client.call("undo", {"id": rec["id"]})
        assert old.read_text().endswith("long ago\n")


def test_max_bytes_deletes_the_oldest_notes_but_never_the_one_being_written(tmp_path: Path, short_dir: Path) -> None:
    with _daemon(tmp_path, short_dir, keep_days=0, max_bytes=10_000) as (_, client, root):
        folder = root / "agents/claude-code/sessions"
        folder.mkdir(parents=True)
        for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
            (folder / f"{day}-x.md").write_text("# c\n" + "word " * 1000)
        out = _observe(client, "user: " + "today " * 2500 + "\n")
        assert out["expired"] == ["agents/claude-code/sessions/2026-01-01-x.md",
                                  "agents/claude-code/sessions/2026-01-02-x.md",
                                  "agents/claude-code/sessions/2026-01-03-x.md"]
        assert (root / out["note"]).exists()  # over the cap alone, but it is being written


def test_a_long_session_rolls_over_to_a_new_part_that_retention_can_outlive(tmp_path: Path, short_dir: Path) -> None:
    """The note being written is never deleted, so one session must not grow one note past the bounds:
    at half of max_bytes its next turns start a new part, and the old part is deleted like any old note."""
    with _daemon(tmp_path, short_dir, keep_days=0, max_bytes=10_000) as (_, client, root):
        base = f"agents/claude-code/sessions/{date.today().isoformat()}-long"
        first = _observe(client, "user: " + "alpha " * 1000 + "\n", sid="long")
        assert first["note"] == f"{base}.md" and (root / first["note"]).stat().st_size >= 5_000
        turns = "user: " + "alpha " * 1000 + "\nassistant: noted\n"
        second = _observe(client, turns, sid="long")  # the re-sent first turn adds nothing; the new one rolls over
        assert (second["note"], second["captured"], second["expired"]) == (f"{base}.part2.md", 1, [])
        assert "noted" in (root / second["note"]).read_text() and "alpha" not in (root / second["note"]).read_text()
        third = _observe(client, turns + "user: " + "gamma " * 1000 + "\n", sid="long")
        assert third["note"] == f"{base}.part2.md" and third["expired"] == [f"{base}.md"]  # past the cap together
        assert not (root / first["note"]).exists()
        assert any(r["action"] == "expire" and r["path"] == f"{base}.md"
                   for r in client.call("history", {"limit": 10})["entries"])


def test_a_session_older_than_keep_days_goes_on_in_a_note_of_today(tmp_path: Path, short_dir: Path) -> None:
    from memoryd.indexer.observe import state as obs_state

    with _daemon(tmp_path, short_dir, keep_days=7) as (d, client, root):
        old = "agents/claude-code/sessions/2020-01-01-resumed.md"
        (root / old).parent.mkdir(parents=True)
        (root / old).write_text("# Conversation 2020-01-01 (session resumed)\n\n**user** · 10:00 UTC\nlong ago\n")
        obs_state.save(d.cfg.data_dir, obs_state.SessionState(NS, "resumed", note=old, started="2020-01-01"))
        out = _observe(client, "user: back to this conversation a year later\n", sid="resumed")
        assert out["note"] == f"agents/claude-code/sessions/{date.today().isoformat()}-resumed.md"
        assert out["expired"] == [old] and not (root / old).exists()
        assert "a year later" in (root / out["note"]).read_text()


def test_turns_waiting_for_a_model_do_not_outlive_their_deleted_note(tmp_path: Path, short_dir: Path,
                                                                    chat: FakeChatServer) -> None:
    """The model is down, so captured turns wait (redacted) in the data dir; once retention deletes the note
    they were captured in, they go too: another session's old note, and a long session's old part."""
    from memoryd.indexer.observe import state as obs_state

    chat.mode = "500"
    with _daemon(tmp_path, short_dir, chat, keep_days=7, max_bytes=10_000) as (d, client, root):
        old = "agents/claude-code/sessions/2020-01-01-gone.md"
        (root / old).parent.mkdir(parents=True)
        (root / old).write_text("# Conversation 2020-01-01 (session gone)\n\n**user** · 10:00 UTC\nzebra talk\n")
        obs_state.save(d.cfg.data_dir, obs_state.SessionState(NS, "gone", note=old, started="2020-01-01", pending=[
            obs_state.Pending("a" * 20 + ".1", "user", "zebra talk", old)]))
        base = f"agents/claude-code/sessions/{date.today().isoformat()}-long"
        first = _observe(client, "user: " + "alpha " * 1000 + "\n", sid="long", wait=True)
        assert first["expired"] == [old] and first["pending"] == 1
        assert obs_state.load(d.cfg.data_dir, NS, "gone").pending == []
        turns = "user: " + "alpha " * 1000 + "\nassistant: noted\n"
        assert _observe(client, turns, sid="long", wait=True)["note"] == f"{base}.part2.md"
        third = _observe(client, turns + "user: " + "gamma " * 1000 + "\n", sid="long", wait=True)
        assert third["expired"] == [f"{base}.md"] and third["pending"] == 2  # the first part's turn is gone
        waiting = obs_state.load(d.cfg.data_dir, NS, "long").pending
        assert {p.note for p in waiting} == {f"{base}.part2.md"} and not any("alpha" in p.text for p in waiting)
        assert not any("zebra" in f.read_text() or "alpha" in f.read_text()
                       for f in (d.cfg.data_dir / obs_state.STATE_DIR).glob("*.json"))


def test_extraction_proposes_and_the_write_path_decides(tmp_path: Path, short_dir: Path,
                                                        chat: FakeChatServer) -> None:
    chat.default = ANSWER
    with _daemon(tmp_path, short_dir, chat) as (_, client, root):
        text = (DATA / "plain.txt").read_text() + f"user: my key is below\nuser: {SECRET}\n"
        out = _observe(client, text, wait=True)
        ext = out["extraction"]
        assert ext["state"] == "done" and ext["turns"] == 6 and ext["proposed"] == 5  # importance 1 is dropped
        (body,) = chat.requests
        sent = json.dumps(body)
        assert "green tea" in sent and "wJalrXUtnFEMI" not in sent  # the model sees the capture, redacted
        by_kind = {r["kind"]: r for r in ext["results"]}
        assert by_kind["memory"]["decision"] == "appended"
        assert "green tea" in (root / "agents/claude-code" / by_kind["memory"]["path"].split("/", 2)[2]).read_text()
        exp = (root / "agents/claude-code/experiences.md").read_text()
        assert "## Experiences" in exp and "two-core CI runner → split the slow model tests" in exp
        profile = (root / "agents/claude-code/profile.md").read_text()
        assert "## Role" in profile and "backend engineer" in profile and "## Preferred tools" in profile
        again = _observe(client, text, wait=True)
        assert again["extraction"] == {"state": "nothing pending"} and len(chat.requests) == 1
        audit = client.call("audit", {"tail": 20})["entries"]
        assert any(e.get("path") == "agents/claude-code/experiences.md" and e["decision"] == "appended" for e in audit)
        assert any(e["action"] == "observe" and e["decision"] == "captured" for e in audit)


def test_a_secret_the_model_proposes_is_refused_by_the_filter(tmp_path: Path, short_dir: Path,
                                                              chat: FakeChatServer) -> None:
    chat.default = {"memories": [{"type": "knowledge", "content": f"The deploy uses {SECRET}", "importance": 9}]}
    with _daemon(tmp_path, short_dir, chat) as (_, client, root):
        ext = _observe(client, "user: we deploy on fridays with the usual key\n", wait=True)["extraction"]
        assert ext["results"][0]["decision"] == "rejected"
        assert not any("wJalrXUtnFEMI" in p.read_text() for p in root.rglob("*.md"))


@pytest.mark.parametrize("mode", ["not_json", "429", "500", "silent"])
def test_a_failed_call_writes_only_the_capture_and_the_next_observe_retries(tmp_path: Path, short_dir: Path,
                                                                            chat: FakeChatServer, mode: str) -> None:
    chat.mode, chat.default = mode, ANSWER
    tweak_llm = {"timeout_s": 1.0} if mode == "silent" else {}
    llm = LLMConfig(provider="openai", url=chat.url, model="fake-model", retries=0, **tweak_llm)
    with running_daemon(tmp_path, short_dir / "m.sock", {"MEMORY.md": "# Memory\n"}, timeout=20, tweak=_write,
                        llm=llm, observe=ObserveConfig(throttle_s=0)) as (_, client, root):
        before = set(root.rglob("*.md"))
        out = _observe(client, (DATA / "plain.txt").read_text(), wait=True)
        assert out["extraction"]["state"] == "failed" and out["extraction"]["pending"] == 4
        assert set(root.rglob("*.md")) - before == {root / out["note"]}  # the capture, nothing else
        status = client.call("status")
        st = status["observe"]
        assert st["extraction_failures"] == 1 and st["last_error"] and st["llm"]["reachable"] is False
        assert st["llm"]["url"].startswith(chat.url) and "authorization" not in json.dumps(st).lower()
        # and a person reading `memoryd status` or the ui's dashboard is told, not only `status --json`
        rows = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in render_status(status).splitlines()}
        assert "1 failed" in rows["conversations"] and "extraction by fake-model" in rows["conversations"]
        assert rows["conversations"].endswith(f"of {st['llm']['tokens']['daily'] or 'unlimited'} tokens today")
        failed = rows["extraction failed"]
        assert failed.startswith(st["last_error"][:40]) and "captured only" in failed
        assert ("extraction", f"{st['last_error']} (captured only; retried at the next observe)") in \
            dashboard(status, None)["errors"]


def test_status_shows_the_models_health_even_when_observe_does_not_extract(tmp_path: Path, short_dir: Path,
                                                                          chat: FakeChatServer) -> None:
    """The [llm] client serves summaries, abstracts and proposals too: observe.extract = false must not hide it."""
    with _daemon(tmp_path, short_dir, chat, extract=False) as (_, client, _root):
        status = client.call("status")
        st = status["observe"]
        assert st["extraction"] == "off" and st["llm"]["model"] == "fake-model" and "tokens" in st["llm"]
        rows = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in render_status(status).splitlines()}
        assert rows["conversations"].endswith("extraction off (observe.extract = false)")


def test_after_a_failure_the_turns_wait_and_are_extracted_next_time(tmp_path: Path, short_dir: Path,
                                                                   chat: FakeChatServer) -> None:
    chat.mode, chat.default = "500", ANSWER
    with _daemon(tmp_path, short_dir, chat, throttle_s=0) as (d, client, _root):
        assert _observe(client, "user: I prefer green tea when I work late\n", wait=True)["extraction"]["state"] \
            == "failed"
        chat.mode = "ok"
        d._observe_status.__self__.llm.retry_now()  # else the breaker's 5 s cool-down fails the retry at once
        ext = _observe(client, "user: I prefer green tea when I work late\n", wait=True)["extraction"]
        assert ext["state"] == "done" and ext["turns"] == 1


def test_extraction_is_throttled_per_agent(tmp_path: Path, short_dir: Path, chat: FakeChatServer) -> None:
    chat.default = {"memories": []}
    with _daemon(tmp_path, short_dir, chat, throttle_s=3600) as (_, client, _root):
        assert _observe(client, "user: first question\n", wait=True)["extraction"]["state"] == "done"
        later = _observe(client, "user: first question\nuser: second question\n", wait=True)["extraction"]
        assert later["state"] == "throttled" and len(chat.requests) == 1
        final = _observe(client, "user: first question\nuser: second question\n", wait=True, final=True)
        assert final["extraction"]["state"] == "done" and len(chat.requests) == 2


def test_a_confined_session_observes_only_its_own_namespace(tmp_path: Path, short_dir: Path) -> None:
    with _daemon(tmp_path, short_dir) as (_, client, _root):
        peer = {"kind": "direct", "peer": "bob"}
        out = client.call("observe", {"session_id": "p", "transcript": "user: hi from bob\n", "session": peer})
        assert out["note"].startswith("peers/bob/sessions/")
        with pytest.raises(RpcClientError, match="direct"):
            client.call("observe", {"session_id": "p", "namespace": NS, "transcript": "user: x\n", "session": peer})
