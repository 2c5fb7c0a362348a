"""One vocabulary for the CLI and MCP (issue #29 item 4): the flags MCP has are on the CLI, a bad ``get`` range
is a usage error on both, a pipe gets whole lines, a terminal sees the matched terms, MCP hits name their
matched lines, and the docs count the tools the server serves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client import cli
from memoryd.daemon.client.mcp_server import DaemonBridge
from memoryd.daemon.client.mcp_shapes import SNIPPET_CHARS, _search, centred_snippet
from memoryd.daemon.client.mcp_tools import BY_NAME, TOOLS, ToolError
from memoryd.daemon.client.render import BOLD, TERM, TargetError, parse_target, render_hits
from memoryd.daemon.exits import EXIT_USAGE
from memoryd.daemon.rpc.errors import InvalidParams
from tests.daemon.test_api_handlers import OWNER, FakeIndex, FakeWorker, _reads
from tests.helpers import running_daemon

REPO = Path(__file__).resolve().parents[2]
LONG = "The ledger service moved to PostgreSQL because it needs transactions across accounts, " * 3


def _parse(*argv: str) -> Any:
    return cli.build_parser().parse_args(list(argv))


# -- flags ------------------------------------------------------------------------------------


def test_search_and_context_take_the_mcp_tools_read_flags() -> None:
    s = _parse("search", "--namespace", "agent:bot", "--width", "60", "q")
    assert (s.namespace, s.width) == ("agent:bot", 60)
    c = _parse("context", "--path-prefix", "memory/", "--namespace", "default", "--mode", "keyword", "--offline",
               "--root", "/tmp/r", "q")
    assert (c.path_prefix, c.namespace, c.mode, c.offline, c.root) == ("memory/", "default", "keyword", True,
                                                                        [Path("/tmp/r")])
    assert _parse("index", "--json").json is True
    assert _parse("history", "-n", "2").limit == 2 and _parse("audit", "-n", "3").tail == 3


def test_an_unknown_flag_is_reported_with_the_commands_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["history", "--bogus"])
    err = capsys.readouterr().err
    assert done.value.code == EXIT_USAGE
    assert err.startswith("usage: memoryd history") and "unrecognized arguments: --bogus" in err


def test_context_mode_goes_to_the_daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sent: dict[str, Any] = {}

    class FakeClient:
        def __enter__(self) -> FakeClient:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            sent.update(method=method, **params)
            return {"text": "x\n"}

    monkeypatch.setattr(cli, "_client", lambda args: FakeClient())
    assert cli.main(["context", "--socket", str(tmp_path / "s.sock"), "--mode", "keyword", "q"]) == 0
    assert sent["method"] == "context" and sent["mode"] == "keyword"


def test_search_and_context_send_namespace_and_path_prefix_to_the_daemon(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {"MEMORY.md": "# M\n\n- zebracorn shared note\n",
             "agents/bot/MEMORY.md": "# Bot\n\n- zebracorn bot note\n"}
    sock = str(short_dir / "v.sock")
    with running_daemon(tmp_path, short_dir / "v.sock", files):
        capsys.readouterr()
        assert cli.main(["search", "--socket", sock, "--json", "--namespace", "agent:bot", "--min-score", "0",
                         "zebracorn"]) == 0
        found = capsys.readouterr().out
        assert cli.main(["context", "--socket", sock, "--json", "--namespace", "default", "--min-score", "0",
                         "zebracorn"]) == 0
        block = capsys.readouterr().out
    assert "bot note" in found and "shared note" not in found
    assert "shared note" in block and "bot note" not in block


# -- get ranges -------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["a.md:abc", "a.md:10-", "a.md:0", "a.md:9-3", "a.md:"])
def test_an_unparsable_range_is_a_target_error_not_a_file_name(target: str) -> None:
    with pytest.raises(TargetError):
        parse_target(target)


def test_a_colon_inside_a_path_is_still_a_path() -> None:
    assert parse_target("notes:v2/a.md") == {"path": "notes:v2/a.md"}
    assert parse_target("a:b.md:3-4") == {"path": "a:b.md", "start_line": 3, "end_line": 4}


def test_get_with_a_bad_range_exits_2_before_any_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["get", "--socket", str(tmp_path / "none.sock"), "a.md:abc"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "bad line range 'abc'" in err and "not" not in err.split("range")[0]


def test_the_daemon_refuses_a_start_past_the_end_and_cuts_an_end_past_it(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("".join(f"line {n}\n" for n in range(1, 25)))
    reads = _reads(tmp_path, FakeIndex(), FakeWorker())
    with pytest.raises(InvalidParams, match=r"past the end of a.md \(24 lines\)"):
        reads.get({"path": "a.md", "start_line": 500, "end_line": 600}, OWNER)
    tail = reads.get({"path": "a.md", "start_line": 20, "end_line": 30}, OWNER)
    assert (tail["start_line"], tail["end_line"], tail["text"].count("\n")) == (20, 24, 5)
    (tmp_path / "empty.md").write_text("")
    assert reads.get({"path": "empty.md"}, OWNER)["text"] == ""  # an empty file still reads, from line 1


def test_get_past_the_end_exits_2_and_mcp_says_is_error(
        tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = "".join(f"line {n}\n" for n in range(1, 25))
    with running_daemon(tmp_path, short_dir / "g.sock", {"a.md": body}) as (d, _client, _root):
        sock = str(d.cfg.socket_path)
        capsys.readouterr()
        assert cli.main(["get", "--socket", sock, "a.md:500-600"]) == EXIT_USAGE
        assert "line 500 is past the end of a.md (24 lines)" in capsys.readouterr().err
        with pytest.raises(ToolError, match="past the end"):
            DaemonBridge(sock).call_tool("memory_get", {"path": "a.md", "from": 999})
        assert DaemonBridge(sock).call_tool("memory_get", {"path": "a.md", "from": 24})[1]["text"] == "line 24\n"


# -- output -----------------------------------------------------------------------------------


def _hit(**kw: Any) -> dict[str, Any]:
    return {"path": "a.md", "start_line": 1, "end_line": 2, "score": 0.9, "text_score": 0.5,
            "text": f"intro\n{LONG}", "match_lines": [2], **kw}


def test_a_pipe_gets_every_line_whole_and_width_cuts_only_when_asked() -> None:
    result = {"hits": [_hit()], "took_ms": 1.0, "mode": "hybrid"}
    whole = render_hits(result)
    assert LONG.strip() in whole and "…" not in whole
    cut = render_hits(result, width=60)
    assert "…" in cut and max(len(line) for line in cut.splitlines()[1:-1]) <= 60


def test_search_on_a_pipe_prints_whole_lines(tmp_path: Path, short_dir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with running_daemon(tmp_path, short_dir / "p.sock", {"a.md": f"# A\n\n{LONG}\n"}) as (d, _c, _r):
        capsys.readouterr()
        assert cli.main(["search", "--socket", str(d.cfg.socket_path), "--min-score", "0", "ledger PostgreSQL"]) == 0
        out = capsys.readouterr().out
    assert LONG.strip() in out and "…" not in out


def test_a_terminal_sees_the_query_terms_coloured_in_the_bold_line() -> None:
    shown = render_hits({"hits": [_hit()], "took_ms": 1.0, "mode": "hybrid"}, highlight=True,
                        query="why postgres transactions")
    line = next(line for line in shown.splitlines() if "2│" in line)
    assert BOLD in line and f"{TERM}transactions" in line and f"{TERM}ledger" not in line
    assert f"{TERM}The" not in line


def test_mcp_hits_carry_match_lines_and_a_snippet_centred_on_them() -> None:
    filler = [f"filler line number {n} about nothing much at all" for n in range(80)]
    text = "\n".join([*filler[:40], "- The zebracorn migration ends in March.", *filler[40:]])
    hit = {"path": "a.md", "start_line": 10, "end_line": 10 + 80, "score": 0.8, "text": text, "match_lines": [50]}
    _text, out = _search({"query": "zebracorn"}, {"hits": [hit], "mode": "hybrid", "took_ms": 1.0})
    res = out["results"][0]
    assert res["matchLines"] == [50]
    assert "zebracorn" in res["snippet"] and res["snippet"].startswith("… ") and res["snippet"].endswith(" …")
    assert len(res["snippet"]) <= SNIPPET_CHARS + 4
    from jsonschema import Draft202012Validator

    Draft202012Validator(BY_NAME["memory_search"].output).validate(out)


def test_a_centred_snippet_keeps_short_text_and_falls_back_to_the_head() -> None:
    assert centred_snippet("short", 1, [1], 100) == "short"
    assert centred_snippet("x" * 50, 1, [], 10) == "x" * 10 + " …"
    assert centred_snippet("a\n" + "y" * 50, 1, [2], 10) == "… " + "y" * 10 + " …"


# -- docs -------------------------------------------------------------------------------------

_NUMBERS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def test_the_docs_count_the_tools_the_server_serves() -> None:
    for doc in ("docs/mcp.md", "docs/agents.md", "README.md"):
        text = (REPO / doc).read_text()
        for word in re.findall(r"\b(five|six|seven|eight|nine|ten) (?:`memory_\*` )?tools\b", text):
            assert _NUMBERS[word] == len(TOOLS), f"{doc} says {word} tools; the server serves {len(TOOLS)}"
    mcp_doc = (REPO / "docs/mcp.md").read_text()
    assert all(f"`{t.name}`" in mcp_doc for t in TOOLS)


# -- index --json and the offline read flags --------------------------------------------------


@pytest.mark.slow
def test_index_json_then_offline_search_and_context_with_namespace_and_mode(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    def memoryd(*argv: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent-memoryd-test"}
        return subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", *argv], env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    conf = tmp_path / "c.toml"
    conf.write_text('[embedding]\nprovider = "hash"\n')
    root, data = tmp_path / "root", tmp_path / "data"
    (root / "agents" / "bot").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The zebracorn shared note.\n")
    (root / "agents" / "bot" / "MEMORY.md").write_text("# Bot\n\n- The zebracorn bot note.\n")
    where = ("--config", str(conf), "--root", str(root), "--data-dir", str(data))
    done = memoryd("index", *where, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["files"], summary["run"]["files_indexed"]) == (2, 2) and summary["chunks"] >= 2
    found = memoryd("search", "--offline", *where, "--json", "--min-score", "0", "--namespace", "agent:bot",
                    "zebracorn")
    assert found.returncode == 0, found.stderr
    assert [h["path"] for h in json.loads(found.stdout)["hits"]] == ["agents/bot/MEMORY.md"]
    block = memoryd("context", "--offline", *where, "--json", "--min-score", "0", "--mode", "keyword",
                    "--namespace", "default", "zebracorn")
    assert block.returncode == 0, block.stderr
    text = json.loads(block.stdout)["text"]
    assert "shared note" in text and "bot note" not in text


def test_the_cli_says_when_a_write_is_not_searchable_yet(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from memoryd.daemon.client import cli_write

    answer = {"decision": "appended", "path": "memory-bank/MEMORY.md", "line": 9, "reason": "added",
              "also": [{"path": "memory-bank/details/patterns.md", "line": 4}], "indexed": False,
              "index_note": "StorageUnavailableError: database unreachable"}
    monkeypatch.setattr(cli_write, "_call", lambda args, method, params: answer)
    assert cli.main(["remember", "--socket", "/nonexistent.sock", "We", "chose", "SQLite."]) == 0
    out = capsys.readouterr().out
    assert "also: memory-bank/details/patterns.md:4" in out and "not indexed yet: StorageUnavailableError" in out
