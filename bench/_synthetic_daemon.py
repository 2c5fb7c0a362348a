"""``memoryd run`` with the benchmark's synthetic passage vectors, to measure a kept corpus over the socket.

    python bench/_synthetic_daemon.py MODEL_DIR run --data-dir ... --root ... [memoryd run's options]

``bench/scale.py`` builds its 100k-chunk corpora with :class:`scale.SyntheticPassages` (the real
e5 model for chunking and queries, synthetic passage vectors: embedding 100k chunks for real
takes hours on 2 cores). A daemon with the real model would refuse that index (another
``model_id``), so this starts the real daemon — socket, threads, watcher, scheduler — with the
same wrapper around the model of ``MODEL_DIR``. Nothing else differs from ``memoryd run``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    from scale import SyntheticPassages

    import memoryd.daemon.app as app
    from memoryd.daemon.client.cli import main as memoryd
    from memoryd.indexer import engine
    from memoryd.indexer.embedding import load_embedder

    model_dir = Path(argv[0])

    def open_index(cfg: Any, read_only: bool = False, background_rebuilds: bool = False) -> Any:
        embedder = SyntheticPassages(load_embedder(cfg.embedding, model_dir))
        return engine.open_index(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)

    app.open_index = open_index  # what Daemon.startup calls
    return memoryd(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
