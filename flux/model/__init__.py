"""The programming model: what a workflow's author writes and what runs it.

``task`` and ``workflow`` (the decorators), ``runtime`` (the execution context and
replay), ``waits`` (durable sleep, pause, call), the durable API (``saga``, ``caching``,
``determinism``, ``composition``, ``calls``) and ``loader`` (source text to workflows).
Its names reach users through ``from flux import ...``; nothing here is imported with
the package (docs/footprint.md).
"""
