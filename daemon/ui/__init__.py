"""``memoryd ui``: a local web page to see, search and repair the memory, as a client of the daemon's socket.

Its few dependencies (Jinja2, Starlette, uvicorn, python-multipart, httptools) are in the default
install (docs/ui.md, "Install"); nothing in the rest of memoryd imports this package, so the CLI and
``reindex`` never pay for it. See docs/ui.md.
"""
