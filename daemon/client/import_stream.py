"""``memoryd import FILE``: a JSONL file of any size, sent in requests the daemon accepts, with one progress bar.

The daemon takes at most ``max_lines`` lines and ``max_request_bytes`` bytes a
request; an empty dry run first asks it for both (every answer repeats them).
This client reads the file line by line — never whole — and cuts it into requests
under both limits, counting each line as the JSON request will spell it. A line
that alone is over the cap is reported ``invalid`` here and not sent.

Resumable: a line of an export (it has a ``path``) that is already in its file is
``unchanged``, so running the same import again after an interruption writes only
what the first run did not get to, and nothing twice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MAX_LINES = 1000
"""Lines per request until the daemon says otherwise (``manage_requests.MAX_IMPORT_LINES``)."""
MAX_REQUEST_BYTES = 1_048_576
"""The daemon's default cap (``server.max_request_bytes``), used until its first answer gives the real one."""
ENVELOPE = 2048
"""Bytes kept for the request around ``data``: method, id, the other params."""


@dataclass(frozen=True)
class Batch:
    """Consecutive lines of the file: ``first`` is the file's line number of the first; ``data`` their text."""

    first: int
    data: str
    lines: int  # non-blank


@dataclass(frozen=True)
class TooLong:
    line: int
    size: int


def cost(line: str) -> int:
    """What ``line`` plus its newline adds to the JSON request, at most (``\\uXXXX`` escapes counted)."""
    return len(json.dumps(line + "\n"))  # ensure_ascii: every escape as long as it can get


def batches(lines: Iterable[str], limits: Callable[[], tuple[int, int]]) -> Iterator[Batch | TooLong]:
    """``lines`` (no terminators) cut into batches under ``limits()`` = (max lines, max data bytes), asked
    before each batch (the daemon's answer may lower them)."""
    buf: list[str] = []
    size = count = 0
    first = 1
    max_lines, max_bytes = limits()
    for n, line in enumerate(lines, start=1):
        c = cost(line)
        if c > max_bytes:
            if buf:
                yield Batch(first, "\n".join(buf) + "\n", count)
            yield TooLong(n, c)
            buf, size, count, first = [], 0, 0, n + 1
            max_lines, max_bytes = limits()
            continue
        if buf and (size + c > max_bytes or (line.strip() and count >= max_lines)):
            yield Batch(first, "\n".join(buf) + "\n", count)
            buf, size, count, first = [], 0, 0, n
            max_lines, max_bytes = limits()
        if not buf:
            first = n
        buf.append(line)
        size += c
        count += bool(line.strip())
    if buf:
        yield Batch(first, "\n".join(buf) + "\n", count)


def read_lines(stream: IO[bytes]) -> Iterator[str]:
    """The lines of a UTF-8 JSONL stream, split at ``\\n`` only (a JSON text holds no raw newline)."""
    for raw in stream:
        yield raw.decode("utf-8", "surrogateescape").rstrip("\n").removesuffix("\r")


def count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for raw in f if raw.strip())


def run(args: argparse.Namespace, socket: Path, out: Callable[[str], None] = print) -> dict[str, int]:
    """Import ``args.file`` batch by batch; prints each line's report (or each batch's JSON) and returns
    the summary over the whole file."""
    from tqdm import tqdm

    from memoryd.daemon.client.long_call import call_with_progress

    limits = {"max_lines": MAX_LINES, "max_request_bytes": MAX_REQUEST_BYTES}
    limits.update(_limits(socket))
    summary: Counter[str] = Counter()
    continues: str | None = None
    total = count_lines(Path(args.file)) if args.file != "-" else None
    stream = sys.stdin.buffer if args.file == "-" else Path(args.file).open("rb")  # noqa: SIM115 (closed below)
    tqdm.monitor_interval = 0
    bar = tqdm(total=total, desc="import", unit="line", dynamic_ncols=True, file=_terminal(), leave=False,
               disable=not sys.stderr.isatty())
    try:
        def room() -> tuple[int, int]:
            return int(limits["max_lines"]), int(limits["max_request_bytes"]) - ENVELOPE

        for b in batches(read_lines(stream), room):
            if isinstance(b, TooLong):
                rep = {"input_line": b.line, "decision": "invalid",
                       "reason": f"{b.size} bytes as JSON: over the daemon's request cap; split this entry"}
                summary["invalid"] += 1
                _show(args, {"dry_run": bool(args.dry_run), "entries": [rep]}, out, bar)
                continue
            params: dict[str, Any] = {"data": b.data, "dry_run": bool(args.dry_run)}
            if getattr(args, "namespace", None):
                params["namespace"] = args.namespace
            if continues is not None:  # a dry run: the daemon keeps what its earlier requests decided
                params["continues"] = continues
            start = bar.n

            def moved(done: int, of: int, start: int = start, size: int = b.lines) -> None:
                bar.update(start + (size * done // of if of else 0) - bar.n)

            result = call_with_progress(socket, "import", params, "import", progress=moved)
            limits.update(result.get("limits") or {})
            continues = result.get("import_id") if args.dry_run else None
            for r in result.get("entries", []):
                r["input_line"] = int(r["input_line"]) + b.first - 1
            summary.update(result.get("summary") or {})
            bar.update(start + b.lines - bar.n)
            _show(args, result, out, bar)
    finally:
        bar.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    return dict(summary)


def _limits(socket: Path) -> dict[str, int]:
    """The daemon's caps, from an empty dry run (a few bytes; it writes nothing and counts against nothing)."""
    from memoryd.daemon.client.rpc_client import Client

    with Client(socket) as client:
        found = client.call("import", {"data": "", "dry_run": True}).get("limits") or {}
    return {k: int(v) for k, v in found.items() if k in ("max_lines", "max_request_bytes")}


def _show(args: argparse.Namespace, result: dict[str, Any], out: Callable[[str], None], bar: Any) -> None:
    from tqdm import tqdm

    with tqdm.external_write_mode(file=_terminal()):
        if args.json:
            out(json.dumps(result, ensure_ascii=False))
            return
        for r in result.get("entries", []):
            where = f"  {r['path']}" + (f":{r['line']}" if r.get("line") else "") if r.get("path") else ""
            out(f"line {r['input_line']}: {r['decision']}{where}  {r.get('reason', '')}")


def _terminal() -> Any:
    return getattr(sys.stderr, "inner", sys.stderr)
