"""The query side of the index: from a query string to ranked, merged hits.

:mod:`~memoryd.indexer.storage.embedded.hybrid` runs a query: the vector and keyword legs
(the keyword leg bounded by :mod:`~memoryd.indexer.search.keyword_plan`), both scores
for every candidate, :mod:`~memoryd.indexer.search.fusion`, the rescoring of
:mod:`~memoryd.indexer.search.proximity`/:mod:`~memoryd.indexer.search.rescore` (query
words close together, files dated as the query names, read by
:mod:`~memoryd.indexer.search.querydates`), the optional reranking of
:mod:`~memoryd.indexer.search.rerank`, and :mod:`~memoryd.indexer.search.hits`' merge
of overlapping neighbours into one :class:`~memoryd.indexer.search.hits.SearchResult`.
:mod:`~memoryd.indexer.search.querytext` cleans the query first;
:mod:`~memoryd.indexer.search.context` packs hits into a token budget. Nothing here
writes: these modules only read the store and the vectors that the rest of
``memoryd.indexer`` maintains.
"""
