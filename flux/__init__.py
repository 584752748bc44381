"""Flux: durable Python workflows dispatched to a fleet of resource-aware workers."""

from flux.domain.affinity import DoesNotExist, Exists, Gt, In, Lt, NotIn
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.routing import RoutingPolicy, label, load, metric, score
from flux.domain.schedules import CatchUpPolicy, InvalidSchedule, OverlapPolicy, Schedule
from flux.runtime import ExecutionContext, TaskCall, current_task, progress, progress_nowait
from flux.task import TaskFailedError, parallel, task
from flux.workflow import LocalExecution, Workflow, workflow

__all__ = [
    "CatchUpPolicy",
    "DoesNotExist",
    "ExecutionContext",
    "Exists",
    "Gt",
    "In",
    "InvalidResourceRequest",
    "InvalidSchedule",
    "LocalExecution",
    "Lt",
    "NotIn",
    "OverlapPolicy",
    "ResourceRequest",
    "RoutingPolicy",
    "Schedule",
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
    "score",
    "task",
    "workflow",
]
