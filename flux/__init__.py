"""Flux: durable Python workflows dispatched to a fleet of resource-aware workers.

What ``from flux import ...`` offers is imported on first use (PEP 562): a process that
uses one part of flux (a command of the CLI, a worker, the server) pays only for that
part, not for the whole programming model (docs/footprint.md).
"""

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what editors and type checkers see; tests/client/test_lazy_imports.py keeps it equal to _EXPORTS
    from flux.client.typed import (
        AsyncClient,
        Client,
        ExecutionCancelled,
        ExecutionError,
        ExecutionFailed,
        ExecutionTimedOut,
    )
    from flux.domain.affinity import DoesNotExist, Exists, Ge, Gt, In, Le, Lt, NotIn
    from flux.domain.concurrency import Concurrency
    from flux.domain.fluxcore_schedules import cron, interval, once
    from flux.domain.gang import Gang, GangContext
    from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
    from flux.domain.routing import RoutingPolicy, label, load, metric, score
    from flux.domain.schedules import CatchUpPolicy, InvalidSchedule, OverlapPolicy, Schedule
    from flux.domain.secrets import SecretsUnavailable
    from flux.domain.workflow_options import WorkflowOptions
    from flux.model.composition import map, pipeline  # noqa: F401, A004 - flux.map, not the builtin, when imported by name
    from flux.model.determinism import choice, now, randint, random, uuid4
    from flux.model.fluxcore import MigrationWarning
    from flux.model.runtime import ExecutionContext, TaskCall, current_task, progress, progress_nowait
    from flux.model.task import TaskFailedError, parallel, task
    from flux.model.waits import ChildWorkflowError, call, pause, sleep
    from flux.model.workflow import LocalExecution, Workflow, workflow


#: Each exported name and the module that defines it.
_EXPORTS = {
    "AsyncClient": "flux.client.typed",
    "Client": "flux.client.typed",
    "ExecutionCancelled": "flux.client.typed",
    "ExecutionError": "flux.client.typed",
    "ExecutionFailed": "flux.client.typed",
    "ExecutionTimedOut": "flux.client.typed",
    "DoesNotExist": "flux.domain.affinity",
    "Exists": "flux.domain.affinity",
    "Gt": "flux.domain.affinity",
    "Ge": "flux.domain.affinity",
    "Le": "flux.domain.affinity",
    "In": "flux.domain.affinity",
    "Lt": "flux.domain.affinity",
    "NotIn": "flux.domain.affinity",
    "Concurrency": "flux.domain.concurrency",
    "Gang": "flux.domain.gang",
    "GangContext": "flux.domain.gang",
    "InvalidResourceRequest": "flux.domain.resource_request",
    "ResourceRequest": "flux.domain.resource_request",
    "RoutingPolicy": "flux.domain.routing",
    "label": "flux.domain.routing",
    "load": "flux.domain.routing",
    "metric": "flux.domain.routing",
    "score": "flux.domain.routing",
    "map": "flux.model.composition",
    "pipeline": "flux.model.composition",
    "choice": "flux.model.determinism",
    "now": "flux.model.determinism",
    "randint": "flux.model.determinism",
    "random": "flux.model.determinism",
    "uuid4": "flux.model.determinism",
    "cron": "flux.domain.fluxcore_schedules",
    "interval": "flux.domain.fluxcore_schedules",
    "once": "flux.domain.fluxcore_schedules",
    "MigrationWarning": "flux.model.fluxcore",
    "CatchUpPolicy": "flux.domain.schedules",
    "InvalidSchedule": "flux.domain.schedules",
    "OverlapPolicy": "flux.domain.schedules",
    "Schedule": "flux.domain.schedules",
    "SecretsUnavailable": "flux.domain.secrets",
    "WorkflowOptions": "flux.domain.workflow_options",
    "ExecutionContext": "flux.model.runtime",
    "TaskCall": "flux.model.runtime",
    "current_task": "flux.model.runtime",
    "progress": "flux.model.runtime",
    "progress_nowait": "flux.model.runtime",
    "TaskFailedError": "flux.model.task",
    "parallel": "flux.model.task",
    "task": "flux.model.task",
    "ChildWorkflowError": "flux.model.waits",
    "call": "flux.model.waits",
    "pause": "flux.model.waits",
    "sleep": "flux.model.waits",
    "LocalExecution": "flux.model.workflow",
    "Workflow": "flux.model.workflow",
    "workflow": "flux.model.workflow",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:  # ``import flux; flux.model.runtime``: a submodule, imported on first use too
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'flux' has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


class _Package(types.ModuleType):
    """``flux.task`` and ``flux.workflow`` stay the decorators after flux-core's
    ``from flux.task import task`` imports the module of that name: the import system's
    ``setattr(flux, "task", <module>)`` is not kept (the module is in ``sys.modules``)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "AsyncClient",
    "CatchUpPolicy",
    "ChildWorkflowError",
    "Client",
    "Concurrency",
    "DoesNotExist",
    "ExecutionCancelled",
    "ExecutionContext",
    "ExecutionError",
    "ExecutionFailed",
    "ExecutionTimedOut",
    "Exists",
    "Gang",
    "GangContext",
    "Ge",
    "Gt",
    "In",
    "InvalidResourceRequest",
    "InvalidSchedule",
    "LocalExecution",
    "Le",
    "Lt",
    "MigrationWarning",
    "NotIn",
    "OverlapPolicy",
    "ResourceRequest",
    "RoutingPolicy",
    "Schedule",
    "SecretsUnavailable",
    "TaskCall",
    "TaskFailedError",
    "Workflow",
    "WorkflowOptions",
    "choice",
    "cron",
    "current_task",
    "interval",
    "label",
    "load",
    "metric",
    "now",
    "once",
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
