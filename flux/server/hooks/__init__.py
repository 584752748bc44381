"""Webhooks (docs/hooks.md): ``store`` (hooks, deliveries, redelivery), ``outbox``
(``enqueue``: an event into the outbox, in the caller's transaction; this replica's
copy of the subscriptions), ``sending`` (one signed POST to a checked address),
``delivery`` (the loop that sends what is due), ``routes`` and ``schemas``."""
