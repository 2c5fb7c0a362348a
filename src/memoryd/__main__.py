"""``python -m memoryd``: the ``memoryd`` command."""

import sys

from memoryd.daemon.cli import main

sys.exit(main())
