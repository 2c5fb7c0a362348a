"""memoryd observe (daemon/client/cli_observe.py) and the hooks' event parsing (observe_hook.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.daemon.client.cli import main
from memoryd.daemon.client.observe_hook import HookEventError, parse_event
from tests.helpers import running_daemon, wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "observe"


def _answer(out: str) -> dict[str, object]:
    """The JSON answer among what was printed (the in-process daemon logs to the same stdout)."""
    (line,) = [x for x in out.splitlines() if x.startswith('{"note"')]
    got: dict[str, object] = json.loads(line)
    return got


def test_the_cli_sends_parsed_turns_and_a_second_run_adds_nothing(tmp_path: Path, short_dir: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sock = short_dir / "m.sock"
    with running_daemon(tmp_path, sock, {"MEMORY.md": "# Memory\n"}, timeout=20) as (_, _client, root):
        argv = ["observe", str(DATA / "claude.jsonl"), "--session-id", "s1", "--namespace", "agent:cc",
                "--socket", str(sock), "--json"]
        assert main(argv) == 0
        first = _answer(capsys.readouterr().out)
        assert first["captured"] == 4 and (root / str(first["note"])).is_file()
        assert main(argv) == 0
        assert _answer(capsys.readouterr().out)["captured"] == 0
        assert main(["observe", str(DATA / "plain.txt"), "--socket", str(sock)]) == 2  # no --session-id


def test_hook_events_of_each_host() -> None:
    cc = parse_event("claude-code", json.dumps({"session_id": "abc", "transcript_path": "/t.jsonl",
                                                "hook_event_name": "SessionEnd"}))
    assert (cc.session_id, cc.path, cc.final) == ("abc", "/t.jsonl", True)
    assert parse_event("claude-code", json.dumps({"session_id": "a", "transcript_path": "/t",
                                                  "hook_event_name": "Stop"})).final is False
    codex = parse_event("codex", json.dumps({"type": "agent-turn-complete", "thread-id": "th", "turn-id": "1",
                                             "input-messages": ["why is CI slow?"],
                                             "last-assistant-message": "Two cores."}))
    assert codex.session_id == "th" and codex.turns == [{"role": "user", "text": "why is CI slow?"},
                                                        {"role": "assistant", "text": "Two cores."}]
    oc = parse_event("openclaw", json.dumps({"sessionId": "o", "sessionFile": "/s.jsonl", "event": "command:new"}))
    assert oc.final is True and oc.path == "/s.jsonl"
    for host, raw in (("claude-code", "{}"), ("codex", '{"type": "other"}'), ("openclaw", "[1]"),
                      ("claude-code", "not json")):
        with pytest.raises(HookEventError):
            parse_event(host, raw)


@pytest.mark.slow
def test_the_claude_code_hook_returns_at_once_and_the_capture_follows(tmp_path: Path, short_dir: Path) -> None:
    """The hook's wall time is what the agent waits; the work happens in the detached child."""
    sock = short_dir / "m.sock"
    with running_daemon(tmp_path, sock, {"MEMORY.md": "# Memory\n"}, timeout=20) as (_, _client, root):
        event = {"session_id": "hooked", "transcript_path": str(DATA / "claude.jsonl"), "hook_event_name": "Stop"}
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "memoryd", "observe", "--hook", "claude-code", "--socket",
                               str(sock)], input=json.dumps(event), capture_output=True, text=True, timeout=60,
                              env={"XDG_RUNTIME_DIR": str(short_dir), "PATH": "/usr/bin:/bin"})
        took = time.perf_counter() - t0
        assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
        print(f"hook wall time: {took * 1000:.0f} ms")
        notes = wait_for(lambda: list((root / "agents/claude-code/sessions").glob("*-hooked.md")), timeout=30,
                         what="the detached child's capture")
        assert "green tea" in notes[0].read_text()
