"""``memoryd import`` streams a file of any size under the daemon's caps, and a re-run after an interruption
adds nothing twice (issue #37 item 4), through the socket and the CLI."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client import cli, long_call
from memoryd.daemon.client.import_stream import Batch, TooLong, batches, cost
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.config import Config
from tests.helpers import running_daemon
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
CAP = 16_384
DONE = {"would_append": "appended", "would_reinforce": "reinforced", "would_replace": "replaced"}
WORDS = ("harbour", "violet", "granite", "lantern", "meadow", "copper", "thistle", "orchard", "falcon", "ember")


def _file(k: int, n: int) -> str:
    rows = [f"- Item {k}-{i}: the {WORDS[i % 10]} plan uses {WORDS[(i * 3) % 10]} number {i * 37}.\n"
            for i in range(n)]
    return f"# Notes {k}\n\n## Facts\n\n" + "".join(rows[: n // 2]) + "\nSome prose.\n\n## More\n\n" + \
        "".join(rows[n // 2:])


FILES = {**{f"notes/n{k}.md": _file(k, 60) for k in range(5)}, "peers/alice/MEMORY.md": _file(9, 40)}


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    def tweak(cfg: Config) -> Config:
        cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, max_request_bytes=CAP))
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))

    with running_daemon(tmp_path, short_dir / "m.sock", FILES, timeout=20, tweak=tweak) as started:
        yield started


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))}


def _clear(client: Client) -> None:
    for ns in ("default", "peer:alice"):
        client.call("clear", {"namespace": ns})


def test_batches_stay_under_both_caps_and_keep_line_numbers() -> None:
    lines = [json.dumps({"text": f"entry {i} " + "é" * (i % 7)}) for i in range(25)] + ["", "x" * 500]
    got = list(batches(iter(lines), lambda: (4, 300)))
    sent = [b for b in got if isinstance(b, Batch)]
    assert all(b.lines <= 4 and sum(cost(x) for x in b.data.split("\n")[:-1]) <= 300 for b in sent)
    assert [t.line for t in got if isinstance(t, TooLong)] == [27]  # alone over the cap: not sent
    assert "".join(b.data for b in sent).split("\n")[:-1] == lines[:26]  # every other line, once, in order
    firsts = [b.first for b in sent]
    assert firsts[0] == 1 and all(b.first == a.first + len(a.data.split("\n")) - 1 for a, b in itertools.pairwise(sent))


def test_an_export_bigger_than_a_request_imports_back_byte_for_byte(daemon, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    d, client, root = daemon
    sock = ["--socket", str(d.cfg.socket_path)]
    before = _snapshot(root)
    dump = tmp_path / "all.jsonl"
    assert cli.main(["export", *sock, "-o", str(dump)]) == 0
    assert dump.stat().st_size > 4 * CAP  # one request could not carry it
    _clear(client)
    calls: list[int] = []
    real = long_call.call_with_progress

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(len(a[2]["data"]))
        return real(*a, **k)

    monkeypatch.setattr(long_call, "call_with_progress", counted)
    capsys.readouterr()
    assert cli.main(["import", *sock, str(dump)]) == 0
    out = capsys.readouterr().out
    assert len(calls) >= 4 and max(calls) < CAP
    assert out.rstrip().endswith("imported: 340 restored")
    assert "line 340: restored  peers/alice/MEMORY.md" in out  # the file's own line numbers
    assert _snapshot(root) == before


def test_an_interrupted_import_run_again_adds_nothing_twice(daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    d, client, root = daemon
    sock = ["--socket", str(d.cfg.socket_path)]
    before = _snapshot(root)
    dump = tmp_path / "all.jsonl"
    dump.write_text(client.call("export", {})["text"], encoding="utf-8")
    _clear(client)
    real = long_call.call_with_progress
    calls: list[int] = []

    def killed_after_two(*a: Any, **k: Any) -> Any:
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C between two batches
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(long_call, "call_with_progress", killed_after_two)
    assert cli.main(["import", *sock, str(dump)]) != 0
    assert _snapshot(root) != before  # part of the file is in
    monkeypatch.setattr(long_call, "call_with_progress", real)
    capsys.readouterr()
    assert cli.main(["import", *sock, str(dump)]) == 0
    summary = capsys.readouterr().out.rstrip().rsplit("\n", 1)[-1]
    done = {v: int(n) for n, v in (part.split(" ") for part in summary.removeprefix("imported: ").split(", "))}
    assert done["unchanged"] > 0 and done["restored"] > 0 and done["unchanged"] + done["restored"] == 340
    assert _snapshot(root) == before  # every entry once, where it was


def test_a_restore_line_outside_the_root_is_refused_through_the_socket(daemon) -> None:
    _d, client, root = daemon
    before = _snapshot(root)
    data = "".join(json.dumps(r) + "\n" for r in (
        {"path": "../escape.md", "text": "An entry outside the root."},
        {"path": "notes/n0.md", "namespace": "peer:alice", "text": "Item 0-0: misfiled."},
        {"path": "notes/n0.md", "section": "Facts", "text": "Item 0-0: the harbour plan uses harbour number 0."}))
    res = client.call("import", {"data": data})
    assert [e["decision"] for e in res["entries"]] == ["rejected", "invalid", "unchanged"]
    assert "'..'" in res["entries"][0]["reason"] and res["limits"]["max_request_bytes"] == CAP
    assert _snapshot(root) == before and not (root.parent / "escape.md").exists()


def _texts(n: int) -> list[str]:
    return [f"The user noted item {i}: the {WORDS[i % 10]} plan uses {WORDS[(i * 3) % 10]} and "
            f"{WORDS[(i * 7) % 10]} number {i * 37}." for i in range(n)]


def test_a_dry_run_of_many_requests_judges_each_line_against_all_before_it(daemon, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The daemon keeps a dry run's decisions for its next request (``continues``): a line repeating one
    of an earlier request is a reinforcement in the dry run as in the real import, and the two agree."""
    d, _client, _root = daemon
    sock = ["--socket", str(d.cfg.socket_path)]
    first = "Met Lisbon's harbour master about violin lessons."
    pad = " It was written down in the shared planning notes together with the reasons, the owners and the dates."
    texts = [first, *(t + pad * 4 for t in _texts(39)), first]  # long lines: few, yet over the cap
    src = tmp_path / "new.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    assert src.stat().st_size > CAP

    def decisions(*extra: str) -> list[str]:
        capsys.readouterr()
        assert cli.main(["import", *sock, "--json", *extra, str(src)]) == 0
        rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
        assert len(rows) >= 2  # several requests
        got = sorted((e["input_line"], e["decision"]) for r in rows for e in r["entries"])
        assert [n for n, _ in got] == list(range(1, len(texts) + 1))
        return [DONE.get(x, x) for _, x in got]

    dry = decisions("--dry-run")
    real = decisions()
    assert dry[-1] == "reinforced" and dry == real
