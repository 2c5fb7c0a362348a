"""The idle-time abstract job (issue #40, item 4): idle only, bounded steps, redacted text, no re-reads."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd.daemon.roots import RootMap
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.abstract_job import AbstractJob
from memoryd.indexer.llm.errors import LLMUnavailable
from memoryd.indexer.redaction import privacy
from memoryd.indexer.search.abstracts import AbstractStore

SECRET = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"


class FakeModel:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.down = False

    def health(self) -> dict[str, Any]:
        return {"model": "fake-1"}

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        if self.down:
            raise LLMUnavailable("llm server down")
        self.asked.append(messages[-1]["content"])
        return {"abstract": f"Abstract {len(self.asked)}."}


def test_the_job_abstracts_a_few_files_per_idle_step_and_never_sends_a_secret(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    for n in range(3):
        (root / "memory" / f"2025-01-0{n + 1}.md").write_text(f"# Day {n}\n\n- The deploy of day {n} went out.\n")
    (root / "MEMORY.md").write_text(f"# Memory\n\n- The CI token is {SECRET}\n")
    store = AbstractStore(tmp_path / "abstracts.sqlite")
    model, busy = FakeModel(), [True]
    roots = RootMap([root])
    job = AbstractJob(model=model, store=store, roots=lambda: roots, path_filter=PathFilter(("*.md",), ()),
                      max_file_bytes=1 << 20, redact_level="secrets", busy=lambda: busy[0], per_step=2)
    assert job.step() == 0 and model.asked == []  # the worker is busy: nothing
    busy[0] = False
    assert job.step() == 2 and job.step() == 2 and job.step() == 0  # four files, two a step, then done
    assert len(model.asked) == 4 and not any(SECRET in text for text in model.asked)
    text = (root / "MEMORY.md").read_text()
    assert store.get("fake-1", privacy.redact(text, "secrets")) is not None  # keyed by what the context reads
    (root / "MEMORY.md").write_text(text + "- Deploys go out on Tuesdays.\n")  # an edit: abstracted again
    model.down = True
    assert job.step() == 0  # the model is down: the edited file is tried again next step
    model.down = False
    assert job.step() == 1 and len(model.asked) == 5
    store.close()


class GatedModel(FakeModel):
    """A model whose first answer waits for ``release``: a call still running when the daemon stops."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = "answer") -> dict[str, Any]:
        self.entered.set()
        assert self.release.wait(10), "the test never released the model"
        return super().complete_json(messages, schema, name)


def test_a_model_call_that_outlives_shutdown_is_dropped_not_written_to_a_closed_store(tmp_path: Path) -> None:
    """At load, a slow model answered after stop() had given up waiting and the store was closed: the
    thread then wrote to a closed database (sqlite3.ProgrammingError) and went on to the next file."""
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    for n in range(3):
        (root / "memory" / f"2025-01-0{n + 1}.md").write_text(f"# Day {n}\n\n- The deploy of day {n} went out.\n")
    store = AbstractStore(tmp_path / "abstracts.sqlite")
    model, roots = GatedModel(), RootMap([root])
    job = AbstractJob(model=model, store=store, roots=lambda: roots, path_filter=PathFilter(("*.md",), ()),
                      max_file_bytes=1 << 20, redact_level="secrets", busy=lambda: False, per_step=3,
                      interval_s=0.01)
    errors: list[BaseException] = []

    def step() -> None:
        try:
            job.step()
        except BaseException as exc:  # what the job's own thread would have logged as abstracts.step_error
            errors.append(exc)

    t = threading.Thread(target=step)
    t.start()
    assert model.entered.wait(10)
    job.stop(timeout=0.01)  # shutdown gives up on the call in flight...
    store.close()  # ...and closes the store, as the daemon's closers do
    model.release.set()
    t.join(10)
    assert not t.is_alive() and errors == []
    assert len(model.asked) == 1  # no further file was sent to the model after the stop
    assert store.get("fake-1", "anything") is None and len(store) == 0
