"""flux-core's ``ContextManager``, over this process's local runs: ``get(id)`` finds one,
``save(ctx)`` keeps it (with a ``start_resuming`` value), so flux-core scripts that resume
through it run unchanged. Server executions are the API's (``flux execution show``)."""

from __future__ import annotations

from flux.model.workflow import LocalExecution, keep_local_run, local_run

__all__ = ["ContextManager"]


class ContextManager:
    @staticmethod
    def create() -> "ContextManager":
        return ContextManager()

    def get(self, execution_id: str) -> LocalExecution:
        return local_run(execution_id)

    def save(self, ctx: LocalExecution) -> LocalExecution:
        keep_local_run(ctx)
        return ctx
