"""flux-core's import path of the workflow context (``from flux.domain.execution_context
import ExecutionContext``), kept so its code runs unchanged (docs/migrating-from-flux-core.md).

The one module of ``flux.domain`` that imports the programming model, and only when
flux-core code imports it by this name: the layering contract names it as its exception.
"""

from flux.model.runtime import ExecutionContext

__all__ = ["ExecutionContext"]
