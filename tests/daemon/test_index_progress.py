"""``memoryd index`` without a terminal: chunks/s and time left while the vectors are embedded, whichever
provider embeds them (a terminal gets the same from the progress bar)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.daemon import oneshot
from tests.helpers import make_config


def test_index_logs_rate_and_time_left_then_the_rate_it_reached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(40):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nA line about topic {i} and its details.\n", encoding="utf-8")
    monkeypatch.setattr(oneshot, "PROGRESS_EVERY_S", 0.0)
    assert oneshot.run_index(make_config(root, tmp_path / "data")) == 0  # logs JSON lines: stderr is no TTY
    logs = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    progress = [e for e in logs if e["event"] == "index.progress"]
    assert progress and progress[0]["provider"] == "hash"
    assert {"pending", "per_s", "eta_s"} <= progress[-1].keys()
    assert any(e["per_s"] is not None and e["eta_s"] is not None for e in progress)
    (done,) = [e for e in logs if e["event"] == "index.vectors_done"]
    assert done["vectors"] == 40 and done["per_s"] > 0 and done["provider"] == "hash"
