"""Fair connection slots (issue #38, item 11).

A uid bound in ``allowed_uids`` held all 256 slots with requests it never finished: the
owner's calls failed "server busy" or took 7-9 s, and 35k ``server.busy`` lines were
logged in 90 s. Now each other uid holds at most its share, the owner keeps reserved
slots, and the refusals are logged once per uid per interval with a count.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.rpc.fairness import RefusalLog, SlotPolicy
from tests.e2e.test_second_uid import TOOLS, _as, _interpreter, other_user  # noqa: F401 (other_user: a fixture)
from tests.helpers import socket_server
from tests.security.test_transport_load import _read_line

OWNER, BOB, CAROL = 1000, 1001, 1002


def test_each_other_uid_gets_a_share_and_the_owner_keeps_its_reserve() -> None:
    slots = SlotPolicy(256, OWNER)
    assert (slots.share, slots.reserved) == (64, 64)
    assert slots.full_pool(BOB, [BOB] * 63) is None
    assert slots.full_pool(BOB, [BOB] * 64) == "uid"
    others = [BOB] * 64 + [CAROL] * 64 + [1003] * 64  # 192 = 256 - the owner's 64
    assert slots.full_pool(1004, others) == "others"
    assert slots.full_pool(OWNER, others) is None  # the owner still gets in
    assert slots.full_pool(OWNER, others + [OWNER] * 63) is None
    assert slots.full_pool(OWNER, others + [OWNER] * 64) == "total"
    assert slots.full_pool(BOB, [OWNER] * 255) is None  # the owner's own load does not lock a peer out...
    assert slots.full_pool(BOB, [OWNER] * 256) == "total"  # ...until the table is full
    assert slots.in_pool("uid", BOB, BOB) and not slots.in_pool("uid", BOB, CAROL)
    assert slots.in_pool("others", BOB, CAROL) and not slots.in_pool("others", BOB, OWNER)


@pytest.mark.parametrize(("total", "share", "reserved"), [(1, 1, 0), (2, 1, 1), (16, 8, 8), (64, 16, 16)])
def test_small_tables_still_admit_both(total: int, share: int, reserved: int) -> None:
    slots = SlotPolicy(total, OWNER)
    assert (slots.share, slots.reserved) == (share, reserved)
    assert slots.full_pool(BOB, []) is None and slots.full_pool(OWNER, []) is None


def test_refusals_are_logged_once_per_uid_per_interval_with_a_count() -> None:
    now = [0.0]
    busy = RefusalLog("server.busy", 10.0, clock=lambda: now[0])
    with capture_logs() as logs:
        for i in range(1000):
            now[0] = i * 0.005  # 1000 refusals in 5 s
            busy.note(BOB)
        busy.note(CAROL)  # another uid has its own line
        now[0] = 10.0
        busy.note(BOB)
    lines = [(e["uid"], e["refused"]) for e in logs if e["event"] == "server.busy"]
    assert lines == [(BOB, 1), (CAROL, 1), (BOB, 1000)]


# -- a real second user floods the socket --------------------------------------------------------

FLOOD = r"""
import socket, sys
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    try:
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"search","params":{"query":"never fini')
    except OSError:
        pass  # refused before it read: fine
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()
"""


def _first_line(path: Path) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"ping"}\n')
        return _read_line(s)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="creating a second user needs root")
@pytest.mark.skipif(any(shutil.which(x) is None for x in TOOLS), reason=f"needs {', '.join(TOOLS)}")
def test_a_bound_uid_holding_every_slot_cannot_lock_the_owner_out(
    short_dir: Path, other_user: pwd.struct_passwd,  # noqa: F811 (the fixture imported above)
) -> None:
    other = other_user
    os.chmod(short_dir, 0o755)
    sock = short_dir / "run" / "s.sock"
    # no eviction and a long read deadline: only fairness can let the owner in
    server = socket_server(sock, {"ping": lambda p, peer: "pong"}, allowed_uids={other.pw_uid: "peer:alice"},
                          max_clients=32, evict_idle_after_s=3600.0, read_timeout_s=60.0)
    with server, capture_logs() as logs:
        flood = subprocess.Popen([shutil.which("setpriv") or "setpriv", *_as(other)[1:], _interpreter(other),
                                  "-I", "-c", FLOOD, str(sock), "32"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 env={"PATH": "/usr/bin:/bin"})
        try:
            assert flood.stdout is not None and flood.stdout.readline().strip() == "ready"
            # Accepted in order: every flood connection was admitted or refused before this one.
            for _ in range(8):
                assert _first_line(sock) == {"jsonrpc": "2.0", "id": 7, "result": "pong"}
        finally:
            flood.kill()
            flood.communicate(timeout=10)  # reaps it and closes the pipes
    busy = [e for e in logs if e["event"] == "server.busy"]
    assert [(e["uid"], e["pool"], e["refused"]) for e in busy] == [(other.pw_uid, "uid", 1)]  # 24 refusals
