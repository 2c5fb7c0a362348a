"""memoryd: a live hybrid search index over Markdown memory files, served over a Unix socket.

The one top-level import name of the distribution. The source tree keeps its
folders (``daemon/``, ``indexer/``, ``config/``, ``systemd/``, ``editors/``);
``pyproject.toml`` maps them to ``memoryd.daemon``, ``memoryd.indexer`` and the
package-data packages ``memoryd.config``, ``memoryd.systemd``, ``memoryd.editors``.
"""
