"""The ``memoryd`` command's stable entry point (the console script and ``python -m memoryd.daemon.cli``).

The command itself lives in :mod:`memoryd.daemon.client.cli`, with the rest of the client side;
this name stays because installed scripts, unit files and editor hooks call it.
"""

from __future__ import annotations

import sys

from memoryd.daemon.client.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
