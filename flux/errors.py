"""flux-core's ``flux.errors`` names for ours (docs/migrating-from-flux-core.md):
``except ExecutionError`` catches what a failed task raises in the workflow here,
``TaskFailedError``, whose ``inner_exception`` is what the task's body raised."""

from flux.model.fluxcore import ApprovalRejected
from flux.model.runtime import ExecutionTimeoutError, TaskFailedError

ExecutionError = TaskFailedError

__all__ = ["ApprovalRejected", "ExecutionError", "ExecutionTimeoutError"]
