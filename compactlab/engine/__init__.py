"""The replay engine: one transcript through one policy, call by call.

``loop`` walks the calls (``replay``); ``context`` is the working context with its running
sizes; ``baseline`` the uncompacted history every run is measured against; ``invariants`` the
tool-pairing checks the API would apply; ``probes`` and ``retention`` what the context still holds
of what the agent later used; ``sizing``, ``cost`` and ``prices`` turn sizes into tokens and
dollars; ``records`` is the stable schema a run is written in. The layers the engine runs live in
``compactlab.engine.layers``, the feeds it reads from in ``compactlab.engine.feeds``.
"""
