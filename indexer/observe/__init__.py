"""``observe``: conversations become memories (docs/conversations.md).

* :mod:`.transcript` — four transcript formats into :class:`~.transcript.Turn` lists, noise dropped;
* :mod:`.state` — what each session has already sent, durably (a re-sent transcript adds nothing);
* :mod:`.notes` — the capture's text: redacted turns rendered for a dated session note (its writes,
  retention included, are :mod:`memoryd.indexer.write.session_notes`'s);
* :mod:`.extract` — with ``[llm]``: one combined call, memories / experiences / profile signals.

A pure library: the daemon (daemon/api/observe.py) runs the writes on its index worker.
"""
