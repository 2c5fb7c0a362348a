"""``import``: one function decides what each line does, the same for a dry run and a real run, and the
real run then carries the decisions out.

:func:`plan` judges the lines in order against what is stored *and* against the
lines before them (:class:`Overlay`: what earlier lines of the same import wrote,
replaced or restored counts as stored), reading only (the files, the index's read
side, vectors kept in a memo), so it runs off the writer thread. A dry run reports
its decisions (:func:`dry_report`); a real run executes them on the writer thread
(:func:`execute`), in slices, in input order:

* a restore (a line with a ``path``, :mod:`memoryd.indexer.write.restore`) is
  written with the other restores of the same file that follow it, in one
  conditional write per file, and the file re-indexed once;
* a new memory carries out its dedup verdict (:meth:`MemoryWriter._execute`); the
  files it touched are re-indexed once per slice, not once per line.

Execution re-finds every entry by its text, so a file saved between the plan and
the write gets the same edit applied to its new text (or, when the entry a verdict
named is gone, an append).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.indexer.access import namespace_of, resolve_target
from memoryd.indexer.errors import BadTarget, WriteConflict
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.memblocks import BlockError
from memoryd.indexer.redaction import privacy
from memoryd.indexer.write.candidates import embed_entries, gather, read_text
from memoryd.indexer.write.dedup import APPEND, REPLACE, Candidate, Verdict, decide
from memoryd.indexer.write.intake import Accepted
from memoryd.indexer.write.restore import RESTORED, UNCHANGED, Placed, Restore, place

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray
    from memoryd.indexer.write.writer import MemoryWriter, Outcome

log = structlog.get_logger(__name__)

#: What a dry-run import reports for each decision of a real one.
WOULD = {"append": "would_append", "reinforce": "would_reinforce", "replace": "would_replace",
         RESTORED: "would_restore", UNCHANGED: UNCHANGED}
_DONE = {"append": "appended", "reinforce": "reinforced", "replace": "replaced", RESTORED: RESTORED,
         UNCHANGED: UNCHANGED}
OVERLAY_CANDIDATES = 300
"""At most this many of the entries written earlier in the same import are compared with a new one (the latest)."""


@dataclass(frozen=True)
class Step:
    """One accepted line and what :func:`plan` decided for it (``decision``: a key of :data:`WOULD`)."""

    line: int
    decision: str
    restore: Restore | None = None
    plan: Accepted | None = None
    verdict: Verdict | None = None
    refusal: dict[str, Any] | None = None  # a refused restore ("rejected"): stage, reason, rule

    @property
    def namespace(self) -> str:
        return str(self.plan.namespace) if self.plan is not None else str(namespace_of(self.path))

    @property
    def path(self) -> str:
        return self.restore.path if self.restore is not None else self.plan.target if self.plan else ""


Line = tuple[int, Accepted | Restore]


@dataclass(frozen=True)
class _Virtual:
    """An entry an earlier line of the import wrote (or will write)."""

    path: str
    text: str
    section: str | None
    namespace: str


@dataclass
class Overlay:
    """What is stored, as the lines planned so far leave it: the files as read, plus what earlier lines
    add, minus what they replace (``memo``: the entry vectors computed meanwhile)."""

    root: Any
    memo: dict[bytes, Any] = field(default_factory=dict)
    added: list[_Virtual] = field(default_factory=list)
    removed: set[tuple[str, str]] = field(default_factory=set)
    _texts: dict[str, set[str]] = field(default_factory=dict)
    _disk: dict[str, frozenset[str]] = field(default_factory=dict)

    def present(self, path: str, text: str) -> bool:
        if text in self._texts.get(path, ()):
            return True
        return text in self._stored(path) and (path, text) not in self.removed

    def add(self, v: _Virtual) -> None:
        self.added.append(v)
        self._texts.setdefault(v.path, set()).add(v.text)

    def drop(self, path: str, text: str) -> None:
        self.removed.add((path, text))
        if text in self._texts.get(path, ()):
            self._texts[path].discard(text)
            self.added = [v for v in self.added if (v.path, v.text) != (path, text)]

    def _stored(self, path: str) -> frozenset[str]:
        if path not in self._disk:
            text = read_text(self.root / path)
            try:
                self._disk[path] = frozenset(e.text for e in MdLines(text).entries) if text else frozenset()
            except BlockError:
                self._disk[path] = frozenset()
        return self._disk[path]

    def candidates(self, p: Accepted, embed: Callable[[Sequence[str]], FloatArray]) -> list[Candidate]:
        """The entries earlier lines wrote in ``p``'s namespace, scored against it; those in its route's
        own file and section are scoped (they may be reinforced or replaced, as if stored)."""
        ns = str(p.namespace)
        mine = [v for v in self.added if v.namespace == ns][-OVERLAY_CANDIDATES:]
        if not mine:
            return []
        vecs = embed([p.content, *(v.text for v in mine)])
        scores = vecs[1:] @ vecs[0]
        want = p.route.section.casefold()
        return [Candidate(v.path, 0, v.text, float(s), scoped=v.path == p.target and (v.section or "").casefold()
                          == want) for v, s in zip(mine, scores, strict=True)]


def plan(writer: MemoryWriter, lines: Sequence[Line], progress: Callable[[int], object] = lambda done: None,
         memo: dict[bytes, FloatArray] | None = None, overlay: Overlay | None = None) -> list[Step]:
    """The decision for each line, in order, each judged against what is stored and what the lines
    before it do. Reads only (vectors go to ``memo``, not the cache): safe off the writer thread.

    ``overlay``: what the earlier requests of the same dry run decided (:class:`Overlay`, kept by the
    caller), so a dry run sent in several requests judges each line against all the lines before it."""
    overlay = Overlay(writer.root) if overlay is None else overlay
    memo = overlay.memo if memo is None else memo

    def embed(texts: Sequence[str]) -> FloatArray:
        return embed_entries(writer.index, texts, memo=memo)

    out: list[Step] = []
    guarded: dict[str, dict[str, Any] | None] = {}
    for done, (n, what) in enumerate(lines, start=1):
        if isinstance(what, Restore):
            if what.path not in guarded:
                guarded[what.path] = _refusal(writer, what.path)
            refused = guarded[what.path] or (None if overlay.present(what.path, what.text) else _secret(what))
            if refused is not None:
                out.append(Step(n, "rejected", restore=what, refusal=refused))
            elif overlay.present(what.path, what.text):
                out.append(Step(n, UNCHANGED, restore=what))
            else:
                overlay.add(_Virtual(what.path, what.text, what.section, str(namespace_of(what.path))))
                out.append(Step(n, RESTORED, restore=what))
        else:
            cands = [c for c in gather(writer.index, writer.root, what, writer.cfg, memo=memo)
                     if (c.path, c.text) not in overlay.removed]
            v = decide(what.content, [*cands, *overlay.candidates(what, embed)], writer.thresholds)
            _apply(overlay, what, v)
            out.append(Step(n, v.action, plan=what, verdict=v))
        progress(done)
    return out


def _refusal(writer: MemoryWriter, rel: str) -> dict[str, Any] | None:
    """Why memoryd may not write ``rel`` (a link, a folder that is a file, ...), or None."""
    try:
        resolve_target(writer.root, rel)
    except BadTarget as exc:
        return {"stage": "path", "reason": str(exc)}
    return None


def _secret(r: Restore) -> dict[str, Any] | None:
    """The privacy filter over every line a restore would write (an entry already there writes nothing,
    so it is not asked: a re-import of a large export costs no filter time)."""
    secret = privacy.check("\n".join(r.block))
    return None if secret.passed else {"stage": "privacy", "rule": secret.rule, "reason": secret.reason}


def _apply(overlay: Overlay, p: Accepted, v: Verdict) -> None:
    """What a verdict leaves stored, for the lines after it."""
    ns = str(p.namespace)
    c = v.candidate
    if v.action == APPEND:
        overlay.add(_Virtual(p.target, p.content, p.route.section, ns))
    elif v.action == REPLACE and c is not None:
        section = next((x.section for x in overlay.added if (x.path, x.text) == (c.path, c.text)), p.route.section)
        overlay.drop(c.path, c.text)
        overlay.add(_Virtual(c.path, p.content, section, ns))


def dry_report(writer: MemoryWriter, steps: Sequence[Step]) -> list[dict[str, Any]]:
    """A dry run's report of ``steps``: the decision a real run would carry out, and where; a restore's
    line is where :func:`~memoryd.indexer.write.restore.place` puts it in the file as read now."""
    lines: dict[int, int] = {}
    for rel, group in _by_file(s for s in steps if s.restore is not None and s.decision != "rejected"):
        text = read_text(writer.root / rel)
        try:
            _new, placed = place(text, [s.restore for s in group if s.restore is not None], writer._clock(), rel)
        except BlockError:
            continue
        lines.update({s.line: p.line for s, p in zip(group, placed, strict=True)})
    out = []
    for s in steps:
        if s.decision == "rejected":
            out.append(_refused(s))
        elif s.restore is not None:
            out.append(_restore_report(s, WOULD[s.decision], lines.get(s.line, 0)))
        else:
            assert s.plan is not None and s.verdict is not None
            out.append(_would(s.line, s.plan, s.verdict))
    return out


def _by_file(steps: Any) -> list[tuple[str, list[Step]]]:
    groups: dict[str, list[Step]] = {}
    for s in steps:
        groups.setdefault(s.path, []).append(s)
    return list(groups.items())


def _restore_report(s: Step, decision: str, line: int, reason: str | None = None) -> dict[str, Any]:
    r = s.restore
    assert r is not None
    why = reason or ("the same entry is already in the file" if decision == UNCHANGED else
                     f"put back in {r.path}" + (f", section {r.section!r}" if r.section else ""))
    return {"input_line": s.line, "decision": decision, "reason": why, "path": r.path, "line": line,
            "namespace": s.namespace, "section": r.section}


def _refused(s: Step) -> dict[str, Any]:
    why = s.refusal or {}
    return _restore_report(s, "rejected", 0, str(why.get("reason", ""))) | {k: v for k, v in why.items()
                                                                           if k != "reason"}


def _would(n: int, p: Accepted, v: Verdict) -> dict[str, Any]:
    """A dry-run line's report: the decision dedup would take, and where."""
    c = v.candidate
    where = {"path": c.path, "line": c.line} if c is not None and v.action != APPEND else {"path": p.target}
    return {"input_line": n, "decision": WOULD[v.action], "reason": v.reason, "namespace": str(p.namespace),
            **where, **p.describe()}


def execute(writer: MemoryWriter, steps: Sequence[Step], start: int, session: dict[str, str] | None,
            budget_s: float, clock: Callable[[], float] = time.monotonic) -> tuple[list[dict[str, Any]], int]:
    """Carry out ``steps`` from ``start`` on until ``budget_s`` has passed (at least one file or line);
    their reports and where the next slice starts. Runs on the writer thread."""
    out: list[dict[str, Any]] = []
    touched: dict[str, list[dict[str, Any]]] = {}
    deadline = clock() + budget_s
    i = start
    while i < len(steps) and (i == start or clock() < deadline):
        s = steps[i]
        if s.decision == "rejected":
            out.append(_refused(s))
            i += 1
            continue
        if s.restore is not None:
            j = i + 1
            while j < len(steps) and steps[j].restore is not None and steps[j].path == s.path \
                    and steps[j].decision != "rejected":
                j += 1
            out += _restore_file(writer, steps[i:j])
            i = j
            continue
        j = i
        while j < len(steps) and _appends_to(steps[j]) == _appends_to(s) is not None:
            j += 1
        outcomes = _append_all(writer, steps[i:j]) if j > i else [writer._execute(_plan(s), _verdict(s), session)]
        for step, outcome in zip(steps[i:max(j, i + 1)], outcomes, strict=True):
            rep = {"input_line": step.line, **outcome.to_dict()}
            out.append(rep)
            touched.setdefault(outcome.path, []).append(rep)
            for extra in outcome.also or ():
                touched.setdefault(str(extra["path"]), [])
        i = max(j, i + 1)
    for rel, reps in touched.items():
        reason = writer._reindex(rel)
        for rep in reps if reason is not None else ():
            rep.update(indexed=False, index_note=reason)
    return out, i


def _plan(s: Step) -> Accepted:
    assert s.plan is not None
    return s.plan


def _verdict(s: Step) -> Verdict:
    assert s.verdict is not None
    return s.verdict


def _appends_to(s: Step) -> str | None:
    """The file a plain append of ``s`` goes to (None: not a plain append: a restore, an edit of an
    entry, a row of the Memory Bank's Decision Highlights)."""
    if s.plan is None or s.verdict is None or s.verdict.action != APPEND or s.plan.route.highlights:
        return None
    return s.plan.target


def _append_all(writer: MemoryWriter, group: Sequence[Step]) -> list[Outcome]:
    """Consecutive plain appends to one file, in one conditional write (not one rewrite of the file per line)."""
    from memoryd.indexer.write.writer import Outcome, _related

    rel = _plan(group[0]).target
    lines: list[int] = []

    def edit(text: str | None) -> mdedit.Edit:
        lines.clear()
        for s in group:
            e = writer._append(text, _plan(s))
            text = e.text
            lines.append(e.line)
        assert text is not None
        return mdedit.Edit(text, lines[-1], _plan(group[-1]).content)

    done, _ = writer._write(rel, edit)
    assert done is not None
    at: dict[str, int] = {}  # an append to an earlier section moved the ones before it down: read them again
    for e in MdLines(done.text).entries:
        at.setdefault(e.text, e.index + 1)
    out = []
    for s, first in zip(group, lines, strict=True):
        line = at.get(_plan(s).content, first)
        v, c = _verdict(s), _verdict(s).candidate
        out.append(Outcome("appended", v.reason, rel, line, str(_plan(s).namespace),
                           None if c is None else round(c.score, 4), related=_related(v)))
    log.info("write.imported_appends", path=rel, entries=len(group))
    return out


def _restore_file(writer: MemoryWriter, group: Sequence[Step]) -> list[dict[str, Any]]:
    """The restores of one file, in one conditional write; the file re-indexed once."""
    rel = group[0].path
    items = [s.restore for s in group if s.restore is not None]
    done: list[list[Placed]] = [[]]

    def edit(text: str | None) -> mdedit.Edit | None:
        new, placed = place(text, items, writer._clock(), rel)
        done[0] = placed
        return mdedit.Edit(new, placed[0].line, items[0].text) if new is not None else None

    try:
        resolve_target(writer.root, rel)
        wrote, _ = writer._write(rel, edit)
    except (BadTarget, WriteConflict) as exc:
        return [_restore_report(s, "rejected", 0, str(exc)) | {"stage": "path"} for s in group]
    note = writer._reindex(rel) if wrote is not None else None
    reps = [_restore_report(s, _DONE[p.decision], p.line) for s, p in zip(group, done[0], strict=True)]
    for rep in reps if note is not None else ():
        rep.update(indexed=False, index_note=note)
    log.info("write.restored", path=rel, restored=sum(p.decision == RESTORED for p in done[0]),
             unchanged=sum(p.decision == UNCHANGED for p in done[0]))
    return reps
