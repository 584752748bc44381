"""Flux: durable Python workflows dispatched to a fleet of resource-aware workers."""

from flux.domain.affinity import DoesNotExist, Exists, Gt, In, Lt, NotIn
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.routing import RoutingPolicy, label, load, metric, score
from flux.composition import map, pipeline  # noqa: A004 - flux.map, not the builtin, when imported by name
from flux.determinism import choice, now, randint, random, uuid4
from flux.domain.schedules import CatchUpPolicy, InvalidSchedule, OverlapPolicy, Schedule
from flux.runtime import ExecutionContext, TaskCall, current_task, progress, progress_nowait
from flux.task import TaskFailedError, parallel, task
from flux.waits import ChildWorkflowError, call, pause, sleep
from flux.workflow import LocalExecution, Workflow, workflow

__all__ = [
    "CatchUpPolicy",
    "ChildWorkflowError",
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
    "choice",
    "current_task",
    "label",
    "load",
    "metric",
    "now",
    "parallel",
    "pipeline",
    "progress",
    "progress_nowait",
    "randint",
    "random",
    "call",
    "pause",
    "score",
    "sleep",
    "task",
    "uuid4",
    "workflow",
]
# ``map`` is importable (``from flux import map``) but left out of ``__all__``: a star
# import must not shadow the builtin.
