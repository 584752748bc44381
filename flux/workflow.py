"""flux-core's ``from flux.workflow import workflow``: the same decorator as ``flux.workflow``
(``flux/__init__.py`` keeps ``flux.workflow`` the decorator after this module is imported)."""

from flux.model.workflow import LocalExecution, Workflow, workflow

__all__ = ["LocalExecution", "Workflow", "workflow"]
