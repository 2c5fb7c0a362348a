"""The vectors the index fills in: a group's chunk vectors, the backlog of keyword-first
indexing (:mod:`.backlog`, :mod:`.deferred`, :mod:`.vectorfill`) and each chunk's line
vectors (:mod:`.line_vectors`), all written through the storage interface.
"""
