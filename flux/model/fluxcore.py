"""flux-core's call forms on our tasks and workflows (docs/migrating-from-flux-core.md):
an approval before a task (``requires_approval``: a ``pause`` named ``approval.<task>``),
a result kept by an ``output_storage`` (the log records its reference), the
``metadata=True`` argument, name templates (``name="batch_{n}"``), secrets saved for
local runs, and the ``MigrationWarning`` for each construct whose meaning here differs.

Each is built from what the model already has (``pause``, the task call), so a migrated
task is recorded, replayed and placed exactly like a native one.
"""

from __future__ import annotations

import inspect
import uuid
from dataclasses import dataclass
from typing import Any

from flux.domain.fluxcore_routing import Unmapped
from flux.model.differences import GUIDE, MigrationWarning, _warned, differs  # noqa: F401 - re-exported
from flux.model.runtime import ExecutionContext, current_task
from flux.model.waits import pause

RUNNERS = ("inprocess", "subprocess", "docker", "docker-airgapped")


def flux_core_placement(runner: str | None, durability: str) -> None:
    """flux-core's ``runner=`` and ``durability=`` on a workflow: validated as flux-core did,
    then warned about, since neither constrains anything here."""
    if runner is not None:
        if runner not in RUNNERS:
            raise ValueError(f"runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
        differs(
            "workflow runner=",
            "not a dispatch constraint here: the worker's own runner (flux start worker --runner) runs it",
        )
    if durability not in ("durable", "transient"):
        raise ValueError(f"durability must be 'durable' or 'transient', got {durability!r}")
    if durability == "transient":
        differs("workflow durability='transient'", "every execution is durable here: each task's result is recorded")


def local_only(policy: Any) -> Any:
    """flux-core's input-resolved ``affinity``/``routing`` (``flux.routing.Unmapped``): a local
    run ignores it, as flux-core's inline runs ignored affinity; registering is refused."""
    if not isinstance(policy, Unmapped):
        return policy
    differs(
        f"flux.routing {', '.join(policy.constructs)}",
        f"ignored by a local run; registering the workflow on a server is refused ({policy.message()})",
    )
    return None


def differences(rollback: Any, secret_requests: Any) -> None:
    """The task options whose meaning here is not flux-core's, warned about when decorating."""
    if rollback is not None:
        differs(
            "task rollback=",
            "runs as a saga compensation of a task that COMPLETED, newest first, "
            "when the workflow fails; flux-core ran it for the task that failed",
        )
    if secret_requests:
        differs(
            "task secret_requests=",
            "secret values are masked (***) in the results, events and output "
            "the run records; flux-core recorded them as they were",
        )


class ApprovalRejected(RuntimeError):
    """The resume of an approval pause said no (``{"approved": false}``): the task does not run."""


@dataclass(frozen=True)
class TaskMetadata:
    """What a task with ``metadata=True`` receives as its ``metadata`` argument."""

    task_id: str
    task_name: str


def approval_payload(task_name: str, args: tuple, kwargs: dict) -> dict:
    return {"type": "approval_required", "task_name": task_name, "args": list(args), "kwargs": dict(kwargs)}


async def approved(task_name: str, args: tuple, kwargs: dict) -> None:
    """The pause before an approval-gated task; a resume with ``{"approved": false}`` (or
    ``false``) refuses it, anything else lets it run."""
    verdict = await pause(f"approval.{task_name}", approval_payload(task_name, args, kwargs))
    if verdict is False or (isinstance(verdict, dict) and verdict.get("approved") is False):
        reason = verdict.get("reason") if isinstance(verdict, dict) else None
        raise ApprovalRejected(f"task {task_name!r} was not approved" + (f": {reason}" if reason else ""))


async def needs_approval(task: Any, args: tuple, kwargs: dict) -> bool:
    """``requires_approval``: True, or flux-core's predicate of the call's arguments (by
    parameter name, awaited if async), evaluated in the workflow's body on every replay."""
    spec = task.options.requires_approval
    if not callable(spec):
        return bool(spec)
    try:
        bound = inspect.signature(task.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    except TypeError:
        pass
    verdict = spec(*args, **kwargs)
    return bool(await verdict if inspect.isawaitable(verdict) else verdict)


async def gated_call(task: Any, ctx: ExecutionContext, args: tuple, kwargs: dict) -> Any:
    """A task call as flux-core's options shape it: approval first, the stored result restored."""
    if await needs_approval(task, args, kwargs):
        await approved(task.name, args, kwargs)
    result = await ctx.call_task(task, args, kwargs)
    storage = task.options.output_storage
    return storage.retrieve(result) if storage is not None else result


def with_metadata(task: Any, kwargs: dict) -> dict:
    """``metadata=TaskMetadata(...)`` added to the body's arguments when the task asked for it."""
    call = current_task()
    if not task.options.metadata or call is None:
        return kwargs
    return {**kwargs, "metadata": TaskMetadata(call.task_id, task.name)}


async def stored(task: Any, value: Any) -> Any:
    """A result an ``output_storage`` keeps: what the log records is its reference."""
    storage = task.options.output_storage
    if storage is None:
        return value
    call = current_task()  # one reference per call of each execution: concurrent executions never share one
    return storage.store(f"{call.execution_id}-{call.task_id}" if call else f"{task.name}-{uuid.uuid4().hex}", value)


def formatted_name(task: Any, args: tuple, kwargs: dict) -> str:
    """flux-core's ``name="sum_fibo_{iteration}"``: the template filled with this call's
    arguments (by parameter name, defaults included); a name it cannot fill fails the call."""
    try:
        bound = inspect.signature(task.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return task.name.format(**bound.arguments)
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"task {task.name!r}: the name template cannot be filled from the call's arguments: {exc}"
        ) from None


#: Secrets saved with flux-core's ``SecretManager.current().save(...)`` in this process:
#: what a local ``Workflow.run`` hands to tasks (beside its own ``secrets=``).
LOCAL_SECRETS: dict[str, str] = {}
