"""Ingestion: from files on disk to rows ready to commit (files → chunks → keyword terms → vectors).

:mod:`.files` reads and walks the roots, :mod:`.chunker` cuts Markdown into windows,
:mod:`.embedtext` says what text is embedded and what feeds the keyword terms,
:mod:`.ingest` prepares a batch of files, :mod:`.reconcile` makes the index match the
roots, :mod:`.indexstats` counts what an indexing call did. Nothing here commits.
"""
