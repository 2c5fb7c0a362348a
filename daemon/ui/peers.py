"""Which uid is at the other end of a loopback TCP connection (Linux ``/proc/net/tcp``).

Why: a Unix socket tells the server its peer's uid (``SO_PEERCRED``); TCP does not, and
browsers send 127.0.0.1's cookies to every port, so a server of another local user that the
browser visits receives the UI's cookie and can replay it. The kernel's table of TCP
sockets names each socket's owner: the row whose local end is the peer's address and
whose remote end is ours is the client's socket, and its ``uid`` column says who opened it.
The UI serves only the uid that started it (the browser runs as the same user); a peer
that cannot be found (another network namespace, a connection already gone) is refused.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _hex_address(host: str, port: int) -> set[str]:
    """How ``host:port`` reads in the kernel's tables (IPv4, and IPv4-mapped IPv6 in ``tcp6``)."""
    packed = socket.inet_aton(host)
    v4 = f"{struct.unpack('<I', packed)[0]:08X}"
    mapped = "0000000000000000FFFF0000" + v4
    return {f"{v4}:{port:04X}", f"{mapped}:{port:04X}"}


def tcp_peer_uid(peer: tuple[str, int], local: tuple[str, int], tables: Sequence[str] = TABLES,
                 attempts: int = 3) -> int | None:
    """The uid owning the socket at ``peer`` connected to ``local`` (both IPv4 ``(host, port)``); None if unknown.

    The kernel writes these tables a page at a time, so a read racing other sockets opening
    and closing can skip a row: a miss is read again (``attempts`` times) before it counts.
    """
    theirs, ours = _hex_address(*peer), _hex_address(*local)
    for _ in range(attempts):
        uid = _lookup(theirs, ours, tables)
        if uid is not None:
            return uid
    return None


def _lookup(theirs: set[str], ours: set[str], tables: Sequence[str]) -> int | None:
    for table in tables:
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 7 and cols[1] in theirs and cols[2] in ours:  # any state: a client may half-close
                return int(cols[7])
    return None
