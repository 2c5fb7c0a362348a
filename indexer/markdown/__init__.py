"""Markdown text as memoryd reads and edits it: the outline (:mod:`.outline`), the MACHINE and USER
blocks (:mod:`.memblocks`), the per-entry markers (:mod:`.entrymeta`), exact-line files and the edits
on them (:mod:`.mdlines`, :mod:`.mdedit`, :mod:`.sections`), and the patch that undoes one (:mod:`.patch`).

Pure text, no I/O: the chunker, the writer and the bank all build on it, so it imports none of them.
"""
