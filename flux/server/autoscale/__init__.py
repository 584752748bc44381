"""Worker pools that scale from the queue's resource shapes (docs/autoscaling.md):
``schemas`` (the API's models), ``store`` (the rows), ``routes`` (``/pools``,
``/autoscale/desired``), ``loop`` (the scaling pass), ``providers`` (local,
kubernetes, command), ``notes`` (what explain adds); the planning itself is pure, in
``flux.scheduling.autoscale``."""
