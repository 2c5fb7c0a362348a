"""``make_plan``: detect the case, then plan its flow. Reads the folder and the project; writes nothing."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from memoryd.indexer.bank.detect import detect
from memoryd.indexer.bank.flows import plan_init, plan_refresh, plan_upgrade
from memoryd.indexer.bank.migrate import plan_migrate
from memoryd.indexer.bank.model import Plan

_FLOWS = {"init": plan_init, "upgrade": plan_upgrade, "migrate": plan_migrate, "refresh": plan_refresh}


def make_plan(path: Path, today: date | None = None) -> Plan:
    """The operations that bring the bank at ``path`` to v7.1, in the order ``apply`` runs them.

    ``path`` is the project folder or its ``memory-bank`` folder; ``today`` dates a new Current
    Focus (default: the local date). Raises :class:`~memoryd.indexer.bank.model.BankError` when the flow must
    not run (broken block markers, a move onto an existing file, a secret in new text, an
    unreadable file); the message names the file and says what to fix.
    """
    det = detect(path)
    return _FLOWS[det.case](det, today or date.today())
