"""The worker protocol and the fleet's routes, as service functions (the way
``flux.server.executions`` is organised): each takes the typed request, does its
transactions through ``Services``, changes the registry's members through their
named methods, wakes whoever waits, and returns the typed reply.

``registration`` (``register``), ``heartbeat``, ``claim`` (the long poll),
``leaving`` (a worker draining itself, and ``shutdown``), ``draining`` (an operator's
drain and undrain, and the reads that show liveness), ``routes`` (``/workers``)."""
