"""Webhooks (docs/hooks.md): ``store`` (hooks, deliveries, redelivery, a test),
``sending`` (one signed POST to a checked address), ``delivery`` (the loop that sends
what is due), ``routes`` and ``schemas``. What enqueues an event is
``flux.server.outbox``, outside this package: every state change calls it, and it
imports nothing of this."""
