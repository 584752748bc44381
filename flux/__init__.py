"""Flux: durable Python workflows dispatched to a fleet of resource-aware workers."""

from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.runtime import ExecutionContext
from flux.task import TaskFailedError, parallel, task
from flux.workflow import LocalExecution, Workflow, workflow

__all__ = [
    "ExecutionContext",
    "InvalidResourceRequest",
    "LocalExecution",
    "ResourceRequest",
    "TaskFailedError",
    "Workflow",
    "parallel",
    "task",
    "workflow",
]
