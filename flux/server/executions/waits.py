"""Durable waits on the server (docs/waits.md).

An attempt that reaches a long ``sleep``, a ``pause`` or a ``call`` reports
WORKFLOW_SUSPENDED: its attempt ends (``suspended``, not a crash) and the execution
waits SLEEPING (until ``ready_at``), PAUSED or AWAITING_CHILD, holding no worker; a
call submits its child in the same transaction. The wait ends by ``wake_due`` (the
sleep is due), ``resume`` (a person's input) or ``child_ended`` (the child reached a
terminal state): WAIT_COMPLETED records its result under the wait's id, the next
attempt replays it like a task's result, and the execution is SCHEDULED again, for
any fitting worker.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd
from flux.domain.events import TERMINAL_STATES, EventType, ExecutionState
from flux.domain.policy import ExecutionPolicy
from flux.domain.waits import STATE_OF, WaitKind, child_id, note
from flux.server import outbox
from flux.server.errors import Conflict, Invalid, InvalidField, NotFound
from flux.server.eventlog import append_events
from flux.server.executions.reads import get_row, info
from flux.server.executions.submission import submit_child
from flux.server.models import ExecutionModel
from flux.server.schemas import EventIn, ExecutionInfo

S = ExecutionState
#: What the row keeps of each kind of wait (a call's input lives in its child).
KEPT = {WaitKind.SLEEP: ("until",), WaitKind.PAUSE: ("name", "payload"), WaitKind.CALL: ("workflow",)}
ENDED = [state.value for state in TERMINAL_STATES]


def suspend(
    session: Session, execution: ExecutionModel, event: EventIn, worker_name: str, policy: ExecutionPolicy
) -> None:
    """The attempt stopped at a durable wait: end it and wait without a worker."""
    wait = _wait_of(event)
    kind, now = WaitKind(wait["kind"]), time.time()
    if kind is WaitKind.CALL:
        wait["child"] = child_id(execution.id, wait["id"])
    attempt_end = {
        "attempt": execution.attempt,
        "end": AttemptEnd.SUSPENDED.value,
        "cause": note(wait),
        "counted": False,
    }
    append_events(
        session,
        execution,
        [
            dict(
                type=EventType.ATTEMPT_ENDED,
                name=execution.workflow_name,
                value=attempt_end,
                time=now,
                worker_name=worker_name,
            ),
            dict(
                type=EventType.WORKFLOW_SUSPENDED,
                name=event.name,
                task_id=wait["id"],
                value=wait,
                time=event.time,
                worker_name=worker_name,
            ),
        ],
    )
    execution.leave_worker()
    outbox.worker_left(session, worker_name)
    execution.state = STATE_OF[kind].value
    execution.wait = wait
    execution.ready_at = wait["until"] if kind is WaitKind.SLEEP else None
    execution.placement_note = note(wait)
    if kind is WaitKind.CALL:
        _start_child(session, execution, wait, event.value, policy, now)


def _wait_of(event: EventIn) -> dict:
    """The wait a WORKFLOW_SUSPENDED names, as the row keeps it (422 when malformed)."""
    value = event.value if isinstance(event.value, dict) else {}
    try:
        kind = WaitKind(value.get("kind"))
    except ValueError:
        raise Invalid(
            f"WORKFLOW_SUSPENDED needs a value with 'kind': sleep, pause or call, got {value.get('kind')!r}"
        ) from None
    if not event.task_id or value.get("id") != event.task_id:
        raise Invalid("WORKFLOW_SUSPENDED needs the wait's id as its task_id and as the value's 'id'")
    if kind is WaitKind.SLEEP and not isinstance(value.get("until"), (int, float)):
        raise Invalid("a sleep's WORKFLOW_SUSPENDED needs 'until' (Unix seconds)")
    if kind is not WaitKind.SLEEP and not isinstance(value.get("name" if kind is WaitKind.PAUSE else "workflow"), str):
        raise Invalid(
            f"a {kind.value}'s WORKFLOW_SUSPENDED needs its {'name' if kind is WaitKind.PAUSE else 'workflow'}"
        )
    return {"kind": kind.value, "id": event.task_id, **{key: value.get(key) for key in KEPT[kind]}}


def _start_child(
    session: Session, parent: ExecutionModel, wait: dict, call: dict, policy: ExecutionPolicy, now: float
) -> None:
    """Submit the call's child (``call``: the suspension's value, its ``input`` and, for a
    gang step, its ``gang``), once: a replayed call finds the child it started."""
    child = session.get(ExecutionModel, wait["child"])
    if child is None:
        try:
            submit_child(session, parent, wait["child"], wait["workflow"], call.get("input"), policy, call.get("gang"))
        except (NotFound, Conflict, InvalidField) as exc:  # the call fails, in the workflow, like a failed task
            _continue(session, parent, wait, {"child": None, "state": S.FAILED.value, "error": str(exc)}, now)
        return
    if child.state in ENDED:  # it ended before this attempt asked again
        _continue(session, parent, wait, child_result(child), now)


def child_result(child: ExecutionModel) -> dict:
    """What the parent's ``call`` returns (the output) or raises (the error)."""
    result: dict[str, Any] = {"child": child.id, "state": child.state}
    if child.state == S.COMPLETED.value:
        result["output"] = child.output
    else:
        result["error"] = child.error
    return result


def _continue(session: Session, execution: ExecutionModel, wait: dict, result: Any, now: float) -> None:
    """The wait is over: record its result (replayed by the next attempt) and queue it."""
    append_events(
        session,
        execution,
        [
            dict(type=EventType.WAIT_COMPLETED, name=wait["kind"], task_id=wait["id"], value=result, time=now),
        ],
    )
    execution.state = S.SCHEDULED.value
    execution.wait = None
    execution.ready_at = None
    execution.pending_since = now
    execution.placement_note = None


def wake_due(session: Session, now: float, limit: int) -> list[str]:
    """At most ``limit`` sleepers whose time has come, earliest first, queued again
    (``ix_executions_state_ready``)."""
    due = session.scalars(
        select(ExecutionModel)
        .where(ExecutionModel.state == S.SLEEPING.value, ExecutionModel.ready_at <= now)
        .order_by(ExecutionModel.ready_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    for execution in due:
        _continue(session, execution, execution.wait, None, now)
    return [execution.id for execution in due]


def first_wake(session: Session) -> float | None:
    """When the first sleeper is due (``ix_executions_state_ready``), if any sleeps."""
    return session.scalar(select(func.min(ExecutionModel.ready_at)).where(ExecutionModel.state == S.SLEEPING.value))


def resume(session: Session, execution_id: str, input: Any, namespace: str | None = None) -> ExecutionInfo:
    """A person's answer to a pause: ``pause()`` returns ``input`` in the next attempt."""
    execution = get_row(session, execution_id, namespace)
    if execution.state != S.PAUSED.value:
        raise Conflict(f"execution {execution_id} is {execution.state}, not PAUSED")
    _continue(session, execution, execution.wait, input, time.time())
    return info(execution)


def child_ended(session: Session, child: ExecutionModel) -> str | None:
    """A child reached a terminal state: its parent, waiting on it, is queued again.
    Returns the parent's id when it was."""
    parent = session.get(ExecutionModel, child.parent_id)
    if parent is None or parent.state != S.AWAITING_CHILD.value or (parent.wait or {}).get("child") != child.id:
        return None
    _continue(session, parent, parent.wait, child_result(child), time.time())
    return parent.id


def active_children(session: Session, parent_id: str) -> list[str]:
    """The children of an execution that have not ended (``ix_executions_parent``)."""
    return list(
        session.scalars(
            select(ExecutionModel.id).where(ExecutionModel.parent_id == parent_id, ExecutionModel.state.not_in(ENDED))
        )
    )
