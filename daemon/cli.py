"""The ``memoryd`` command's stable entry point (the console script and ``python -m memoryd.daemon.cli``).

The command itself lives in :mod:`memoryd.daemon.client.cli`, with the rest of the client side;
this name stays because installed scripts, unit files and editor hooks call it.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """The command; ``memoryd observe --hook HOST`` (the agents' capture hook) skips loading the whole CLI:
    a host waits for its hook, and the full parser costs ~0.2 s of imports on a loaded machine."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["observe"] and "--hook" in args:
        from memoryd.daemon.client.cli_observe import hook_main

        return hook_main(args[1:])
    if args[:2] == ["bank", "reply"]:  # the context hook's answer to a 💾 proposal: the prompt waits for it
        from memoryd.daemon.client.cli_bank_loop import reply_main

        return reply_main(args[2:])
    from memoryd.daemon.client.cli import main as full

    return full(argv)


__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
