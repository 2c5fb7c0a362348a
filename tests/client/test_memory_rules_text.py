"""Seed 003's rules, said everywhere an agent reads about memoryd: the MCP server's instructions, the
instruction blocks `memoryd agents install` writes, and the line the context hook prints under a block."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from memoryd.daemon.client.agents_install import snippet
from memoryd.daemon.client.mcp_server import INSTRUCTIONS

HOOK = Path(__file__).resolve().parents[2] / "config" / "agents" / "memoryd-context-hook.py"


def _hook_rules() -> str:
    spec = importlib.util.spec_from_file_location("memoryd_context_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.RULES)


TEXTS = {"mcp instructions": INSTRUCTIONS, "CLAUDE.md": snippet("CLAUDE.md"), "AGENTS.md": snippet("AGENTS.md"),
         "context hook": _hook_rules()}
RULES = {
    "when not to write": r"small talk",
    "already stored": r"already stored",
    "no mention in replies": r"never mention memory operations",
    "3 calls a turn": r"(at most 3\b.*\b(a|per) turn)",
    "group priority": r"MY_ROLE[^>]*>\s*(the )?group'?s? notes\s*>\s*(the )?group'?s? MEMORY",
}


@pytest.mark.parametrize("where", list(TEXTS))
@pytest.mark.parametrize("rule", list(RULES))
def test_every_text_says_every_rule(where: str, rule: str) -> None:
    text = " ".join(TEXTS[where].split())
    assert re.search(RULES[rule], text, re.I | re.S), f"{where} does not say: {rule}"


def test_the_hook_line_stays_short() -> None:
    assert len(_hook_rules()) < 320  # printed under every context block: a sentence, not a manual
