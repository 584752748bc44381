"""Domain vocabulary shared by the server, the worker and workflow code."""


def __getattr__(name: str) -> object:
    """flux-core's ``from flux.domain import ExecutionContext`` (see ``flux.domain.execution_context``)."""
    if name == "ExecutionContext":
        from flux.domain.execution_context import ExecutionContext

        return ExecutionContext
    raise AttributeError(f"module 'flux.domain' has no attribute {name!r}")
