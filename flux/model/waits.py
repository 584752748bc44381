"""Durable waits in a workflow: ``sleep``, ``pause`` and ``call`` (docs/waits.md).

Each has an id that is the same in every attempt (``sleep:1``, ``pause:approval:1``,
``call:1``: its name and call number, like a task's) and is recorded in the event
log, so a later attempt replays it from ``completed_tasks`` instead of waiting again.
A wait that would hold a worker for long ends the attempt instead (``Suspended``,
reported as WORKFLOW_SUSPENDED): the server keeps the execution SLEEPING, PAUSED or
AWAITING_CHILD without a slot, and places it again, on any fitting worker, once the
wait is over; the new attempt replays up to the wait, which then returns at once.

``run_local`` plays the server's part in memory for ``Workflow.run``: it sleeps until
a long sleep is due, runs a called workflow in this process, and stops at a pause
(``LocalExecution.resume`` continues it).
"""

from __future__ import annotations

import asyncio
import os
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Mapping

from flux.domain.durations import parse_duration
from flux.domain.events import STATE_AFTER, EventType, ExecutionState
from flux.domain.gang import Gang, InvalidGang
from flux.domain.names import check_name
from flux.domain.waits import DEFAULT_DURABLE_SLEEP_THRESHOLD, THRESHOLD_ENV, WaitKind
from flux.model.runtime import (
    ExecutionContext,
    RunnableWorkflow,
    Suspended,
    current_context,
    current_task,
    make_event,
    run_workflow,
    to_json_value,
)

__all__ = ["ChildWorkflowError", "call", "pause", "sleep"]


class ChildWorkflowError(RuntimeError):
    """Raised by ``call`` when the child execution did not complete (failed, cancelled,
    timed out, or its workflow is unknown); ``state`` and ``child`` say which."""

    def __init__(self, message: str, state: str | None = None, child: str | None = None):
        super().__init__(message)
        self.state, self.child = state, child


def durable_sleep_threshold() -> float:
    """Seconds from which ``sleep`` ends the attempt (``FLUX_DURABLE_SLEEP_THRESHOLD``, default 30)."""
    value = os.environ.get(THRESHOLD_ENV)
    return parse_duration(value, THRESHOLD_ENV) if value else DEFAULT_DURABLE_SLEEP_THRESHOLD


def _workflow_context(what: str) -> ExecutionContext:
    ctx = current_context()
    if ctx is None:
        raise RuntimeError(f"flux.{what}() is awaited inside a workflow")
    if current_task() is not None:
        raise RuntimeError(
            f"flux.{what}() is awaited in the workflow's body, not inside a task (a task runs at least once)"
        )
    return ctx


def _seconds(duration: float | int | str | timedelta) -> float:
    if isinstance(duration, timedelta):
        duration = duration.total_seconds()
    if duration == 0 and not isinstance(duration, (bool, str)):
        return 0.0
    return parse_duration(duration, "sleep")


async def sleep(duration: float | int | str | timedelta) -> None:
    """Sleep durably: ``await sleep(3600)``, ``sleep("1h")``, ``sleep(timedelta(days=1))``.

    Shorter than ``FLUX_DURABLE_SLEEP_THRESHOLD`` it sleeps in place; longer, the
    attempt ends and the execution waits SLEEPING on the server until it is due.
    Either way a replay does not sleep again."""
    seconds = _seconds(duration)
    ctx = _workflow_context("sleep")
    wait_id = ctx.next_task_id(WaitKind.SLEEP.value)
    if wait_id in ctx.completed_tasks:
        return
    if seconds < durable_sleep_threshold():
        await asyncio.sleep(seconds)
        _record(ctx, WaitKind.SLEEP, wait_id, None)
        return
    raise Suspended({"kind": WaitKind.SLEEP.value, "id": wait_id, "seconds": seconds, "until": time.time() + seconds})


async def pause(name: str, payload: Any = None, *, output: Any = None) -> Any:
    """Wait for a person: the execution shows PAUSED with ``name`` (and ``payload``, any
    JSON, for whoever decides) and holds no worker until ``flux execution resume ID
    --input JSON``; returns that input (None without one). ``output=`` is flux-core's
    keyword for the payload."""
    if output is not None:
        if payload is not None:
            raise TypeError("pause() takes the payload once: payload= or flux-core's output=, not both")
        payload = output
    name = check_name(name, "pause")
    ctx = _workflow_context("pause")
    payload = to_json_value(
        payload, f"the payload of pause {name!r}", ctx.max_payload_size, _in_wait(ctx.max_payload_levels)
    )
    wait_id = ctx.next_task_id(f"{WaitKind.PAUSE.value}:{name}")
    if wait_id in ctx.completed_tasks:
        return ctx.completed_tasks[wait_id]
    raise Suspended({"kind": WaitKind.PAUSE.value, "id": wait_id, "name": name, "payload": payload})


async def call(workflow: RunnableWorkflow | str, input: Any = None, *, gang: Gang | Mapping | None = None) -> Any:
    """Run another workflow as a child execution, placed by its own requests and
    affinity, and return its output; ``ChildWorkflowError`` if it did not complete.
    The parent holds no worker while the child runs; cancelling it cancels the child.
    ``gang``: run the child as this gang (a ``Gang``, or fields changing the child's own,
    ``{"size": 8}``), as a run's ``gang`` does (docs/gangs.md); its output is rank 0's."""
    name = check_name(workflow if isinstance(workflow, str) else getattr(workflow, "name", None))
    ctx = _workflow_context("call")
    input = to_json_value(
        input, f"the input of the call of workflow {name!r}", ctx.max_payload_size, _in_wait(ctx.max_payload_levels)
    )
    asked = _gang_of(gang)
    wait_id = ctx.next_task_id(WaitKind.CALL.value)
    if wait_id in ctx.completed_tasks:
        return _child_result(name, ctx.completed_tasks[wait_id])
    local = _local.get()
    if local is not None:
        local.targets[wait_id] = workflow
    if local is not None and asked is not None:
        local.gangs[wait_id] = asked
    wait = {"kind": WaitKind.CALL.value, "id": wait_id, "workflow": name, "input": input}
    raise Suspended(wait if asked is None else {**wait, "gang": asked})


def _gang_of(gang: Gang | Mapping | None) -> dict | None:
    """A call's gang in its JSON form (the server checks it against its cap and the child's own)."""
    if gang is None or isinstance(gang, Gang):
        return None if gang is None else gang.to_dict()
    if not isinstance(gang, Mapping) or not all(isinstance(key, str) for key in gang):
        raise InvalidGang(f"call(gang=...): a Gang or a mapping of its fields such as {{'size': 4}}, got {gang!r}")
    return dict(gang)


def _in_wait(max_levels: int | None) -> int | None:
    """The levels a wait's payload may nest: WORKFLOW_SUSPENDED's value holds it one level down."""
    return None if max_levels is None else max_levels - 1


def _child_result(name: str, result: dict) -> Any:
    if result.get("state") == ExecutionState.COMPLETED.value:
        return result.get("output")
    error = result.get("error") or result.get("state")
    raise ChildWorkflowError(
        f"child workflow {name!r} ended {result.get('state')}: {error}", result.get("state"), result.get("child")
    )


def _record(ctx: ExecutionContext, kind: WaitKind, wait_id: str, value: Any) -> None:
    ctx.completed_tasks[wait_id] = value
    ctx.emit(make_event(EventType.WAIT_COMPLETED, kind.value, wait_id, value))


# --- local runs (Workflow.run) ---------------------------------------------------------


@dataclass
class _LocalRun:
    #: Called workflows by call id: a local run has no registry to find them by name.
    targets: dict[str, Any] = field(default_factory=dict)
    #: The gang a call asked its child to run as, by call id.
    gangs: dict[str, dict] = field(default_factory=dict)


_local: ContextVar[_LocalRun | None] = ContextVar("flux_local_run", default=None)


async def run_local(
    workflow: RunnableWorkflow,
    context: Callable[[int], ExecutionContext],
    attempt: int = 1,
    deadline: float | None = None,
    done: tuple[dict, Any] | None = None,
) -> tuple[ExecutionState, Any, int]:
    """Attempts in this process until the workflow ends, pauses or passes ``deadline``
    (Unix time). ``context(n)`` builds attempt n's context over one replay map;
    ``done``: a wait that is over (a resumed pause) and its result, recorded first.
    Returns the state, its value (the output, the failure, or the pending pause) and
    the last attempt."""
    token = _local.set(_LocalRun())
    state, value = ExecutionState.TIMED_OUT, None
    try:
        at = None if deadline is None else asyncio.get_running_loop().time() + deadline - time.time()
        async with asyncio.timeout_at(at) as scope:
            while True:
                ctx = context(attempt)
                if done is not None:
                    _record(ctx, WaitKind(done[0]["kind"]), done[0]["id"], done[1])
                outcome, value = await run_workflow(workflow, ctx)
                if outcome is not EventType.WORKFLOW_SUSPENDED:
                    state = STATE_AFTER[outcome]
                    break
                if value["kind"] == WaitKind.PAUSE:
                    state = ExecutionState.PAUSED
                    break
                done, attempt = (value, await _wait_locally(value)), attempt + 1
    except TimeoutError:
        pass
    finally:
        _local.reset(token)
    if scope.expired():
        state, value = ExecutionState.TIMED_OUT, {"error": "the workflow's timeout passed"}
        context(attempt).emit(make_event(EventType.WORKFLOW_TIMED_OUT, workflow.name, value=value))
    return state, value, attempt


async def _wait_locally(wait: dict) -> Any:
    """What the server does for a wait, in this process: sleep until due, or run the child."""
    if wait["kind"] == WaitKind.SLEEP:
        await asyncio.sleep(max(0.0, wait["until"] - time.time()))
        return None
    target = _local.get().targets.pop(wait["id"], None)
    if not hasattr(target, "run_async"):
        error = f"a local run calls a workflow object, not the name {wait['workflow']!r}"
        return {"state": ExecutionState.FAILED.value, "error": error}
    child = await target.run_async(wait["input"], gang=_local.get().gangs.pop(wait["id"], None))
    result = {"child": child.execution_id, "state": child.state.value}
    if child.succeeded:
        return {**result, "output": child.output}
    # the failure as recorded (JSON): a failed local run's output is the exception itself
    return {**result, "error": (child.failure or {}).get("error")}
