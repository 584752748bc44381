"""flux-core's ``from flux.task import task``: the same decorator as ``flux.task``
(``flux/__init__.py`` keeps ``flux.task`` the decorator after this module is imported)."""

from flux.model.fluxcore import TaskMetadata
from flux.model.task import Task, TaskOptions, task

__all__ = ["Task", "TaskMetadata", "TaskOptions", "task"]
