"""``observe``: conversations become memories (docs/conversations.md).

* :mod:`.transcript` — four transcript formats into :class:`~.transcript.Turn` lists, noise dropped;
* :mod:`.state` — what each session has already sent, durably (a re-sent transcript adds nothing);
* :mod:`.notes` — the capture: redacted turns appended to a dated session note, retention;
* :mod:`.extract` — with ``[llm]``: one combined call, memories / experiences / profile signals.

A pure library: the daemon (daemon/api/observe.py) runs the writes on its index worker.
"""
