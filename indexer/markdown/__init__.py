"""Markdown text as memoryd reads and edits it: the outline, USER/MACHINE blocks, entry markers,
exact-line files and the edits on them, and the patch that undoes one.

Pure text, no I/O: the chunker, the writer and the bank all build on it, so it imports none of them.
"""
