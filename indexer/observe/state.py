"""What each observed session has already sent, kept in the data dir (never under a memory root).

``observe`` is called with the whole transcript every turn (that is what hosts have at hand), so
idempotence is the point: a turn whose id (:func:`memoryd.indexer.observe.transcript.with_ids`)
is in ``seen`` is never captured again, whatever restarts happened between. Turns captured but
not yet extracted (no model, the model down, throttled) wait in ``pending``, redacted as captured,
for the next observe; at most ``max_pending`` of them (older ones stay captured only), and none
longer than the note they were captured in (:func:`drop_pending_in`, when retention deletes it).

One JSON file per (namespace, session), named by a hash of the two (session ids are the host's
and may hold anything), written atomically and 0600. Read and written on the index worker only,
so two observes of one session never interleave. A file that does not parse is treated as a
session never seen (its notes get the turns again, once): losing bookkeeping must not stop capture.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.indexer.atomic import atomic_write_text

STATE_DIR = "observe"


@dataclass
class Pending:
    id: str
    role: str
    text: str  # redacted, as captured
    note: str = ""  # the note (part) the turn was captured in: retention deleting it drops the turn here too

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "role": self.role, "text": self.text, "note": self.note}


@dataclass
class SessionState:
    namespace: str
    session: str
    note: str = ""  # the session note, relative to the first root ("" until the first capture)
    started: str = ""  # YYYY-MM-DD of the first capture: the note's date
    seen: list[str] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    extracted: int = 0  # turns extracted so far
    last_error: str | None = None  # the last extraction's failure, for status
    part: int = 1  # the note's part: a long session rolls over to 2, 3 … (memoryd.indexer.observe.notes.rolls_over)

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "session": self.session, "note": self.note, "started": self.started,
                "seen": self.seen, "pending": [p.to_json() for p in self.pending], "extracted": self.extracted,
                "last_error": self.last_error, "part": self.part}


def state_path(data_dir: Path, namespace: str, session: str) -> Path:
    digest = hashlib.sha256(f"{namespace}\0{session}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return data_dir / STATE_DIR / f"{digest}.json"


def load(data_dir: Path, namespace: str, session: str) -> SessionState:
    """The session's state; a fresh one when there is none (or it does not parse)."""
    path = state_path(data_dir, namespace, session)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("namespace") != namespace or raw.get("session") != session:
            raise ValueError("another session's file")
        return SessionState(namespace, session, str(raw.get("note", "")), str(raw.get("started", "")),
                            [str(s) for s in raw.get("seen", [])],
                            [Pending(str(p["id"]), str(p["role"]), str(p["text"]),
                                     str(p.get("note") or raw.get("note", "")))  # older files: the session's note
                             for p in raw.get("pending", [])],
                            int(raw.get("extracted", 0)), raw.get("last_error"), max(1, int(raw.get("part", 1))))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return SessionState(namespace, session)


def save(data_dir: Path, st: SessionState) -> None:
    path = state_path(data_dir, st.namespace, st.session)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(st.to_json(), ensure_ascii=False) + "\n")


def drop_pending_in(data_dir: Path, namespace: str, notes: set[str]) -> int:
    """Forget the pending turns of ``namespace``'s sessions that were captured in ``notes`` (deleted by
    retention): no conversation text outlives its note in the data dir. How many were dropped."""
    dropped = 0
    for st in all_states(data_dir):
        if st.namespace != namespace:
            continue
        kept = [p for p in st.pending if p.note not in notes]
        if len(kept) != len(st.pending):
            dropped += len(st.pending) - len(kept)
            st.pending = kept
            save(data_dir, st)
    return dropped


def all_states(data_dir: Path) -> list[SessionState]:
    """Every session's state (for ``status``: pending turns, last errors)."""
    out = []
    folder = data_dir / STATE_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            out.append(load(data_dir, str(raw["namespace"]), str(raw["session"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
