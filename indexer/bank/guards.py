"""The Memory Bank's guards (docs/memory-bank.md, "Guards"), checked again at apply time
whatever the plan says.

Only ``.md`` files are written, moved or deleted; nothing outside the bank
folder is touched (symlinks included); text memoryd writes must not carry a
secret. Secrets are what the write path's privacy filter
(:mod:`memoryd.indexer.redaction.privacy`) calls ``secret`` (keys, tokens, passwords,
private keys, credentials in URLs, card and ID numbers), in the text or its
folded form. Its ``network`` kind (private IPs, internal host names) is not
refused here: a bank must never hold credentials or private data, and a project's
README naming its staging host is ordinary documentation. Messages name the
kind of secret, never the value.
"""

from __future__ import annotations

from pathlib import Path

from memoryd.indexer.bank.model import BankError
from memoryd.indexer.markdown.memblocks import BlockError, user_spans
from memoryd.indexer.redaction import privacy

_REASONS = {rule.name: rule.reason for rule in reversed(privacy.RULES)}


def _found(text: str) -> set[tuple[str, str]]:
    """``(kind, matched text)`` pairs in ``text`` outside USER blocks (memoryd never writes inside those)."""
    try:
        spans = user_spans(text)
    except BlockError:
        spans = []
    for a, b in reversed(spans):
        text = text[:a] + text[b:]
    found: set[tuple[str, str]] = set()
    for form in (text, privacy.fold(text)):
        found |= {(f.rule, form[f.start:f.end]) for f in privacy.find(form, (privacy.SECRET,))}
    return found


def added_secret(old: str, new: str) -> str | None:
    """Why ``new`` holds a secret that ``old`` had not (the privacy rule's reason), or None.

    Comparing with the old text means a secret already sitting in a file does not block
    memoryd from appending a section; memoryd only refuses to *add* one.
    """
    fresh = _found(new) - _found(old)
    return _REASONS[min(fresh)[0]] if fresh else None


def refuse_secrets(rel: str, old: str, new: str, source: str = "") -> None:
    """Raise :class:`BankError` if writing ``new`` over ``old`` at ``rel`` would add a secret-looking string."""
    reason = added_secret(old, new)
    if reason:
        origin = f" (taken from {source})" if source else ""
        raise BankError(f"memory-bank/{rel}: refusing to write: the new text{origin} {reason}; "
                        "remove it and run again")


def checked_path(bank: Path, rel: str, *, markdown: bool = True) -> Path:
    """``bank/rel`` after checking it stays inside the bank (symlinks resolved) and, if asked, ends in .md."""
    if markdown and not rel.endswith(".md"):
        raise BankError(f"memory-bank/{rel}: refusing: memoryd writes only .md files in a Memory Bank")
    path = bank / rel
    root = bank.resolve()
    resolved = path.resolve()
    if rel.startswith("/") or ".." in Path(rel).parts or not resolved.is_relative_to(root):
        raise BankError(f"{path}: refusing: the path leads outside {bank}")
    return path
