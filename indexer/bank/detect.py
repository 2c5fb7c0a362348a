"""Which of the four maintenance flows (docs/memory-bank.md) a folder needs: init, upgrade, migrate or refresh.

``PATH`` may be the project folder (the bank is ``PATH/memory-bank``) or the
``memory-bank`` folder itself; the project (what the scan reads) is the
bank's parent either way. Detection reads at most ``MEMORY.md`` and changes
nothing.
"""

from __future__ import annotations

from pathlib import Path

from memoryd.indexer.bank.model import BANK_DIR, CURRENT_VERSION, BankError, Detection
from memoryd.indexer.bank.sections import lines_outside_fences
from memoryd.indexer.markdown.memblocks import (
    MACHINE_END,
    MACHINE_START,
    TEMPLATE_MARKER,
    USER_END,
    USER_START,
    BlockError,
    user_spans,
)

MEMORY = "MEMORY.md"
LEGACY_ENTRIES = ("_index.md", "brief.md", "active.md")
BLOCK_MARKERS = (MACHINE_START, MACHINE_END, USER_START, USER_END)


def locate(path: Path) -> tuple[Path, Path]:
    """``(bank, project)`` for a user-given PATH; raises :class:`BankError` if PATH is not a folder."""
    path = Path(path).expanduser().absolute()
    if not path.is_dir():
        raise BankError(f"{path}: not a folder (give the project folder or its memory-bank folder)")
    if path.name == BANK_DIR:
        return path, path.parent
    bank = path / BANK_DIR
    if bank.exists() and not bank.is_dir():
        raise BankError(f"{bank}: exists but is not a folder")
    return bank, path


def read_text(path: Path) -> str:
    """A bank file as text; raises :class:`BankError` naming it if it is unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BankError(f"{path}: cannot read: {exc}") from exc


def template_version(text: str) -> tuple[int, int] | None:
    """The first ``MEMORY_BANK_TEMPLATE:vX.Y`` marker outside USER blocks and code fences, or None."""
    try:
        spans = user_spans(text)
    except BlockError:
        spans = []
    for off, line in lines_outside_fences(text):
        m = TEMPLATE_MARKER.search(line)
        if m and not any(a <= off < b for a, b in spans):
            return int(m.group(1)), int(m.group(2))
    return None


def block_problems(text: str, require_user: bool = True) -> list[str]:
    """Why the block markers cannot be trusted (missing, out of order, unbalanced); empty if fine.

    ``require_user=False`` accepts a file without any USER block (refresh needs only the MACHINE block).
    """
    needed = BLOCK_MARKERS if require_user else (MACHINE_START, MACHINE_END)
    problems = [f"block marker {m} is missing" for m in needed if m not in text]
    a, b = text.find(MACHINE_START), text.find(MACHINE_END)
    if a >= 0 and b >= 0 and b < a:
        problems.append(f"{MACHINE_END} comes before {MACHINE_START}")
    try:
        user_spans(text)
    except BlockError as exc:
        problems.append(str(exc))
    return problems


def detect(path: Path) -> Detection:
    """Classify the bank at ``path`` (see module docstring). Raises :class:`BankError` on unreadable files."""
    bank, project = locate(path)
    memory = bank / MEMORY
    legacy = [n for n in LEGACY_ENTRIES if (bank / n).is_file()]
    if memory.is_file():
        return _detect_memory(bank, project, read_text(memory), legacy)
    if legacy:
        return Detection("migrate", bank, project, None,
                         (f"{BANK_DIR}/{MEMORY} does not exist but the old entry files {', '.join(legacy)} do: "
                          "migrate them to the v7.1 layout",))
    why = (f"{bank} does not exist: initialise a new v7.1 Memory Bank" if not bank.exists()
           else f"{BANK_DIR}/ has no {MEMORY} and no old entry files: initialise a v7.1 Memory Bank in it")
    return Detection("init", bank, project, None, (why,))


def _detect_memory(bank: Path, project: Path, text: str, legacy: list[str]) -> Detection:
    version = template_version(text)
    problems = tuple(block_problems(text))
    extra = (f"old entry files {', '.join(legacy)} are also present; they are left alone",) if legacy else ()
    want = f"v{CURRENT_VERSION[0]}.{CURRENT_VERSION[1]}"
    if version is None:
        reasons = (f"{BANK_DIR}/{MEMORY} has no MEMORY_BANK_TEMPLATE marker: upgrade it in place to {want}",)
        return Detection("upgrade", bank, project, None, reasons + extra, problems)
    found = f"v{version[0]}.{version[1]}"
    if version < CURRENT_VERSION:
        reasons = (f"{BANK_DIR}/{MEMORY} is template {found} (< {want}): upgrade it in place",)
        return Detection("upgrade", bank, project, version, reasons + extra, problems)
    reasons = (f"{BANK_DIR}/{MEMORY} is template {found} (>= {want}): refresh Project Snapshot, Routing Rules "
               "and the details/ indexes",)
    return Detection("refresh", bank, project, version, reasons + extra, problems)
