"""Fair connection slots per peer uid, and refusal logs that cannot flood.

Why: every connection is a slot (a thread) and ``server.max_clients`` bounds them. A uid
bound in ``allowed_uids`` held all 256 with requests it never finished (each slot busy
until its read deadline, then reconnected at once): the owner's own calls were refused
"server busy" or waited 7-9 s, and the log took 35k ``server.busy`` lines in 90 s. So:

- each uid other than the owner may hold at most ``share`` slots (``max(8, total / 4)``);
- all of them together at most ``total - reserved``: the owner always has ``reserved``
  slots (``max(8, total / 4)``, at most half) that no other uid can take;
- the owner may use every slot (its own load is its own business).

Pure bookkeeping (no sockets, no threads): the server asks :meth:`SlotPolicy.full_pool`
under its lock with the open connections' uids, and evicts an idle connection of the pool
named, or refuses. :class:`RefusalLog` turns a stream of refusals into one line per uid
per ``interval_s`` carrying the count.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

log = structlog.get_logger(__name__)

Pool = Literal["uid", "others", "total"]
_MIN_SLOTS = 8
_MAX_UIDS_TRACKED = 1024  # the refusal log's memory: oldest uid forgotten first


@dataclass(frozen=True)
class SlotPolicy:
    """How ``total`` slots are shared between the owner and the other uids."""

    total: int
    owner: int

    @property
    def reserved(self) -> int:
        """Slots only the owner may take."""
        return min(max(_MIN_SLOTS, self.total // 4), self.total // 2)

    @property
    def share(self) -> int:
        """The most slots one uid other than the owner may hold."""
        return min(max(_MIN_SLOTS, self.total // 4), self.total - self.reserved)

    def full_pool(self, uid: int, open_uids: Iterable[int]) -> Pool | None:
        """Which limit a new connection of ``uid`` would break (its own share, the others' pool, the
        table), or None when it may take a slot. The caller frees a slot of that pool or refuses."""
        counts = Counter(open_uids)
        if uid != self.owner:
            if counts[uid] >= self.share:
                return "uid"
            if sum(n for u, n in counts.items() if u != self.owner) >= self.total - self.reserved:
                return "others"
        if sum(counts.values()) >= self.total:
            return "total"
        return None

    def in_pool(self, pool: Pool, uid: int, candidate: int) -> bool:
        """True if a connection of ``candidate`` counts against ``pool`` for a newcomer of ``uid``."""
        if pool == "uid":
            return candidate == uid
        if pool == "others":
            return candidate != self.owner
        return True

    def describe(self, pool: Pool, uid: int) -> str:
        """The refusal's reason, for the client."""
        if pool == "uid":
            return f"uid {uid} holds its share of {self.share} connections"
        if pool == "others":
            return f"other uids hold {self.total - self.reserved} connections ({self.reserved} are the owner's)"
        return f"{self.total} clients connected"


class RefusalLog:
    """Log one ``event`` line per uid per ``interval_s``, with how many refusals it stands for.

    The first refusal of a uid is logged at once (``refused=1``); the following ones within
    ``interval_s`` only counted, and the next line says ``refused=N`` for all of them.
    """

    def __init__(self, event: str, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._event = event
        self._interval = interval_s
        self._clock = clock
        self._seen: OrderedDict[int, tuple[float, int]] = OrderedDict()  # uid -> (last line at, refusals since)

    def note(self, uid: int, **fields: Any) -> bool:
        """Count one refusal of ``uid``; True when a line was written for it."""
        now = self._clock()
        last, pending = self._seen.pop(uid, (float("-inf"), 0))
        pending += 1
        if now - last >= self._interval:
            log.warning(self._event, uid=uid, refused=pending, interval_s=self._interval, **fields)
            self._seen[uid] = (now, 0)
            written = True
        else:
            self._seen[uid] = (last, pending)
            written = False
        while len(self._seen) > _MAX_UIDS_TRACKED:
            self._seen.popitem(last=False)
        return written
