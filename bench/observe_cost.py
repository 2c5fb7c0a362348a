#!/usr/bin/env python3
"""What ``observe`` costs: the capture hook's wall time, observe's throughput, capture bytes per hour.

    python bench/observe_cost.py [--provider hash|e5-small] [--hooks 10] [--exchanges 60] [--llm URL]

One ``memoryd run`` subprocess (no model in ``[llm]``: capture only; ``--llm URL`` names an
OpenAI-compatible server for it, and then ``--wait-calls`` more observes wait for their extraction).
The conversation is LoCoMo conversation 26 (``bench/data/extraction/``, 419 turns), sent as a host
sends it: after every exchange (two turns) the *whole* transcript so far, so each call parses and
skips all the turns it has seen and captures two new ones — what a Claude Code ``Stop`` hook makes
the daemon do.

* **hook wall time**: ``python -m memoryd observe --hook claude-code`` with a ``Stop`` event on stdin
  (the transcript as a Claude Code JSONL file), from start to exit: what the agent waits for. The
  capture itself happens after, in the detached child (its completion is waited for, not timed);
* **observe**: seconds per call (p50/p95) and turns captured per second, over the whole conversation;
* **capture bytes**: the session note's size per captured turn, and per hour of conversation at
  ``--exchanges`` exchanges an hour (60: one a minute, a busy coding session);
* with ``--llm``: **observe with extraction**, seconds per observe that waits (``wait``) for its
  extraction call (throttle off), each adding one exchange to a session — and each outcome.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import (  # noqa: E402  (needs the repository on sys.path)
    Daemon,
    bench_tmp,
    daemon_env,
    loadavg,
    print_report,
    remove_tree,
    summary,
    wait_until,
    write_config,
)

DATA = REPO / "bench" / "data" / "extraction" / "locomo-conv-26.jsonl"


def conversation() -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    speakers: list[str] = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        for t in json.loads(line)["turns"]:
            if t["speaker"] not in speakers:
                speakers.append(t["speaker"])
            turns.append({"role": "user" if t["speaker"] == speakers[0] else "assistant", "text": t["text"]})
    return turns


def claude_jsonl(turns: list[dict[str, str]]) -> str:
    return "".join(json.dumps({"type": t["role"], "message": {"role": t["role"], "content": t["text"]}}) + "\n"
                   for t in turns)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", default="hash", help="embedding provider of the daemon (hash: observe's own cost)")
    p.add_argument("--hooks", type=int, default=10, help="hook runs to time")
    p.add_argument("--exchanges", type=int, default=60, help="exchanges an hour, for capture bytes per hour")
    p.add_argument("--llm", default="", help="an OpenAI-compatible server's /v1 URL: extraction on")
    p.add_argument("--llm-model", default="default", help="the model name sent to --llm")
    p.add_argument("--wait-calls", type=int, default=5, help="with --llm: observes that wait for their extraction")
    args = p.parse_args(argv)
    turns = conversation()
    tmp = bench_tmp("mdobs-")
    try:
        root, data = tmp / "root", tmp / "data"
        root.mkdir()
        (root / "MEMORY.md").write_text("# Memory\n")
        sections: dict[str, dict[str, object]] = {"embedding": {"provider": args.provider}}
        if args.llm:
            sections["llm"] = {"provider": "openai", "url": args.llm, "model": args.llm_model, "timeout_s": 300.0,
                               "response_format": "json_schema", "max_answer_tokens": 1024}
        cfg = write_config(tmp / "memoryd.toml", sections)
        with Daemon(tmp, [root], data, cfg) as d:
            d.wait_idle(600)
            calls: list[float] = []
            t_all = time.perf_counter()
            with d.client(timeout=120) as c:
                for n in range(2, len(turns) + 1, 2):
                    t0 = time.perf_counter()
                    out = c.call("observe", {"session_id": "bench", "namespace": "agent:bench",
                                             "transcript": claude_jsonl(turns[:n])})
                    calls.append(time.perf_counter() - t0)
                    assert out["captured"] == 2, out
            took = time.perf_counter() - t_all
            note = root / out["note"]
            size = note.stat().st_size
            text_bytes = sum(len(t["text"].encode()) for t in turns[: len(calls) * 2])
            # The hook, as Claude Code runs it: a Stop event naming the transcript file.
            walls: list[float] = []
            env = {**daemon_env(tmp), "XDG_RUNTIME_DIR": str(tmp)}
            folder = root / "agents" / "claude-code" / "sessions"
            for i in range(args.hooks):
                path = tmp / f"t{i}.jsonl"
                path.write_text(claude_jsonl(turns[: 40 + 2 * i]), encoding="utf-8")
                event = json.dumps({"session_id": f"hook{i}", "transcript_path": str(path),
                                    "hook_event_name": "Stop"})
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "memoryd", "observe", "--hook", "claude-code", "--socket",
                                str(d.socket)], input=event.encode(), env=env, cwd=REPO, check=True,
                               capture_output=True, timeout=60)
                walls.append(time.perf_counter() - t0)
                wait_until(lambda i=i: any(folder.glob(f"*-hook{i}.md")), 60, "the hook's capture")
            waited, outcomes = _extractions(d, turns, args.wait_calls) if args.llm else ([], collections.Counter())
        per_turn = size / (len(calls) * 2)
        print_report({
            "provider": args.provider, "turns": len(calls) * 2, "observe_calls": len(calls),
            "observe_s": summary(calls), "turns_captured_per_s": round(len(calls) * 2 / took, 1),
            "transcript_turns_parsed_per_s": round(sum(range(2, len(turns) + 1, 2)) / took, 1),
            "note_bytes": size, "conversation_text_bytes": text_bytes, "bytes_per_turn": round(per_turn, 1),
            "bytes_per_hour": round(per_turn * 2 * args.exchanges), "hook_wall_s": summary(walls),
            **({"llm": args.llm, "observe_wait_extraction_s": summary(waited), "extractions": dict(outcomes)}
               if args.llm else {}),
            "loadavg": loadavg(),
        })
    finally:
        remove_tree(tmp)
    return 0


def _extractions(d: Daemon, turns: list[dict[str, str]], n: int) -> tuple[list[float], collections.Counter[str]]:
    """``n`` observes of a new session, one exchange more each, each waiting for its extraction call.

    Throttling is per namespace (30 s by default), so each call uses a namespace of its own."""
    waited: list[float] = []
    outcomes: collections.Counter[str] = collections.Counter()
    with d.client(timeout=600) as c:
        for i in range(n):
            t0 = time.perf_counter()
            out = c.call("observe", {"session_id": "wait", "namespace": f"agent:wait{i}", "wait": True,
                                     "transcript": claude_jsonl(turns[2 * i: 2 * i + 2])})
            waited.append(time.perf_counter() - t0)
            ext = out["extraction"]
            outcomes[ext["state"] if ext["state"] != "done" else f"done, {ext['written']} written"] += 1
    return waited, outcomes


if __name__ == "__main__":
    sys.exit(main())
