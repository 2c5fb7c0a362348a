"""The Markdown conventions memoryd reads and writes inside a memory file: the MACHINE and
USER blocks (:mod:`.memblocks`) and the per-entry markers (:mod:`.entrymeta`).
"""
