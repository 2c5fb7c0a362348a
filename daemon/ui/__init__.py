"""``memoryd ui``: a local web page to see, search and repair the memory, as a client of the daemon's socket.

Needs the ``ui`` extra (``pip install 'memoryd[ui]'``: Jinja2, Starlette, uvicorn); nothing in the
rest of memoryd imports this package, so the CLI and ``reindex`` never pay for it. See docs/ui.md.
"""
