"""``memoryd bank detect|plan|apply``: output, --json, exit codes (in-process, through its own parser)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.client import cli_bank
from memoryd.daemon.logs import reset_logging
from tests.write.test_bank_flows import USER, tree, write


@pytest.fixture(autouse=True)
def _logging() -> Iterator[None]:
    yield
    reset_logging()  # the command routes logs to stderr; give the next test the defaults back


def bank(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memoryd")
    cli_bank.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bank", *argv])
    return cli_bank.COMMANDS[args.command](args)


def test_contract_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "proj"
    write(proj, {"README.md": "# Widget service\n\nA small service that renders widgets.\n"})
    assert bank("apply", str(proj)) == 0
    out = capsys.readouterr().out
    assert "- created: memory-bank/MEMORY.md" in out and out.rstrip().endswith("Status: success")
    assert "MEMORY_BANK_TEMPLATE:v7.1" in (proj / "memory-bank/MEMORY.md").read_text()

    old = tmp_path / "old"
    user = USER + "\n"
    write(old, {"memory-bank/MEMORY.md": "# Memory\n<!-- MACHINE_BLOCK_START -->\n<!-- MEMORY_BANK_TEMPLATE:v7.0 -->\n"
                "## Project Snapshot\nx\n<!-- MACHINE_BLOCK_END -->\n\n" + user})
    (old / "memory-bank/details").mkdir()
    before = tree(old)
    assert bank("plan", str(old)) == 0
    assert tree(old) == before
    assert "append section ## Drill-Down Protocol" in capsys.readouterr().out
    assert bank("apply", str(old)) == 0
    text = (old / "memory-bank/MEMORY.md").read_text()
    assert "MEMORY_BANK_TEMPLATE:v7.1" in text and user in text
    snap = tree(old)
    assert bank("apply", str(old)) == 0
    assert tree(old) == snap
    assert "nothing: the Memory Bank is up to date" in capsys.readouterr().out


def test_broken_markers_exit_1_and_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"memory-bank/MEMORY.md": "# Memory\n<!-- MACHINE_BLOCK_START -->\nno end marker\n"})
    before = tree(tmp_path)
    assert bank("apply", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "cannot upgrade" in err and "<!-- MACHINE_BLOCK_END --> is missing" in err
    assert tree(tmp_path) == before
    assert bank("apply", "--json", str(tmp_path)) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "refused"


def test_json_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"memory-bank/brief.md": "# Brief\n\nA thing.\n", "memory-bank/tech.md": "# Tech\n"})
    assert bank("detect", "--json", str(tmp_path / "memory-bank")) == 0
    det = json.loads(capsys.readouterr().out)
    assert det["case"] == "migrate" and det["bank"] == str(tmp_path / "memory-bank") and det["reasons"]
    assert bank("plan", "--json", str(tmp_path)) == 0
    plan = json.loads(capsys.readouterr().out)
    assert {"op": "move", "path": "tech.md", "to": "details/tech.md", "git": False} in plan["operations"]
    assert {"op": "delete", "path": "brief.md"} in plan["operations"]
    assert bank("apply", "--json", str(tmp_path)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "success" and summary["error"] is None
    assert summary["moved"] == [{"from": "memory-bank/tech.md", "to": "memory-bank/details/tech.md", "git": False}]
    assert summary["deleted"] == ["memory-bank/brief.md"] and "memory-bank/MEMORY.md" in summary["created"]


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bank("frobnicate", str(tmp_path))
    assert exc.value.code == 2
    assert bank("detect", str(tmp_path / "missing")) == 1
    assert "not a folder" in capsys.readouterr().err
