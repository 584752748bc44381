"""Flux: durable Python workflows dispatched to a fleet of resource-aware workers."""

from flux.domain.affinity import DoesNotExist, Exists, Gt, In, Lt, NotIn
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.routing import RoutingPolicy, label, load, metric, score
from flux.runtime import ExecutionContext, TaskCall, current_task, progress, progress_nowait
from flux.task import TaskFailedError, parallel, task
from flux.waits import ChildWorkflowError, call, pause, sleep
from flux.workflow import LocalExecution, Workflow, workflow

__all__ = [
    "ChildWorkflowError",
    "DoesNotExist",
    "ExecutionContext",
    "Exists",
    "Gt",
    "In",
    "InvalidResourceRequest",
    "LocalExecution",
    "Lt",
    "NotIn",
    "ResourceRequest",
    "RoutingPolicy",
    "TaskCall",
    "TaskFailedError",
    "Workflow",
    "current_task",
    "label",
    "load",
    "metric",
    "parallel",
    "progress",
    "progress_nowait",
    "call",
    "pause",
    "score",
    "sleep",
    "task",
    "workflow",
]
