"""Worker pools that scale from the queue's resource shapes (docs/autoscaling.md):
``schemas`` (the API's models), ``store`` (the rows, the metrics' figures), ``notes``
(what explain adds), ``providers`` (local, kubernetes, command). The planning itself is
pure, in ``flux.scheduling.autoscale``; the loop that acts on it is
``flux.server.scaling`` and the routes ``flux.server.pool_routes`` (both reach
``Services``, which this package never imports, so dispatch's explain can read it)."""
