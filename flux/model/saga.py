"""Rollbacks (the saga pattern): when a workflow fails, undo what its completed tasks did.

A task's ``rollback=`` is its compensation. When the workflow's code fails (an
exception leaves it), the rollback of every task that *completed* in the execution
(first run, replayed or taken from the cache) runs before WORKFLOW_FAILED is
recorded, the most recently completed first. Each is recorded: ROLLBACK_STARTED, then
ROLLBACK_COMPLETED or ROLLBACK_FAILED (with the error), under the task's id. A rollback
that fails does not stop the others. A rollback that ended is never run again: a
replay after a crash mid-rollback skips it (``ExecutionContext.rolled_back``, from the
log); one that was running when the attempt died runs again (at least once, like a
task body).

The rollback receives the task's arguments (``secrets`` too, if it has that
parameter) and, if it has a ``result`` parameter, the task's result.
"""

from __future__ import annotations

from typing import Any

from flux.domain.events import EventType, make_event
from flux.model.calls import call_with, describe_error


def order(ctx: Any) -> list[str]:
    """Task ids to compensate, the most recently completed first (completion order is
    the order of ``completed_tasks``: replayed results first, in the log's order)."""
    return [task_id for task_id in reversed(list(ctx.completed_tasks)) if task_id in ctx.compensations]


async def compensate(ctx: Any) -> None:
    """Run the rollbacks of a failed workflow; each recorded, none stopping the others."""
    for task_id in order(ctx):
        if task_id in ctx.rolled_back:
            continue  # ended in an earlier attempt
        task, args, kwargs = ctx.compensations[task_id]
        ctx.emit(make_event(EventType.ROLLBACK_STARTED, task.name, task_id, {}))
        try:
            if task.options.secret_requests:
                kwargs = {**kwargs, "secrets": await ctx.secrets_for(task)}
            await call_with(task.options.rollback, args, kwargs, result=ctx.completed_tasks[task_id])
        except Exception as exc:  # noqa: BLE001 - recorded; the other rollbacks still run
            ctx.emit(make_event(EventType.ROLLBACK_FAILED, task.name, task_id, {"error": describe_error(exc)}))
        else:
            ctx.emit(make_event(EventType.ROLLBACK_COMPLETED, task.name, task_id, {}))
        ctx.rolled_back.add(task_id)
