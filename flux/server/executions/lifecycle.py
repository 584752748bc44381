"""An execution's state machine: every change of its state, and the events it logs.

SCHEDULED (``submission.submit``, or again after an attempt ended) -> CLAIMED (``claims.claim_all``: a new
attempt, whose number is the fencing token) -> delivered to its worker (``claims.deliver``)
-> RUNNING -> COMPLETED, FAILED or CANCELLED (``checkpoints.checkpoint``, ``cancel``,
``expire_pending``, ``finish``). An attempt that ends without finishing the workflow
(a crash, an eviction, a drain: ``end_attempt``) sends it back to SCHEDULED, after a
backoff when the end counts as a crash, or FAILS it once ``max_attempts`` crashes are
used up (``flux.domain.attempts``, docs/attempts.md). An attempt that reaches a
durable wait ends too, and the execution waits SLEEPING, PAUSED or AWAITING_CHILD
without a worker (``waits``, docs/waits.md); past its workflow's ``timeout`` it ends
TIMED_OUT (``timeouts``).

Every change appends to the execution's log in the same transaction, so the log and
the state never disagree. Worker calls are fenced by ``attempt`` and holder: once an
attempt has ended, the worker that ran it can no longer write to the execution.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd
from flux.domain.events import WAITING_STATES, EventType, ExecutionState
from flux.domain.policy import ExecutionPolicy
from flux.server import outbox, payloads, usage
from flux.server.errors import Conflict
from flux.server.eventlog import append_event, append_events
from flux.server.executions import finishes, gang_fate, waits
from flux.server.executions.gang_members import late as gangs_late
from flux.server.executions.reads import get_row, info
from flux.server.models import ExecutionModel
from flux.server.schemas import ExecutionInfo, Failure

S = ExecutionState


def cancel(session: Session, execution_id: str, namespace: str | None = None) -> tuple[ExecutionInfo, list[str]]:
    """Cancel now if no worker holds it (queued, or waiting: docs/waits.md); otherwise
    ask the worker. Its children (in its namespace) are cancelled too. Returns the workers to wake."""
    execution = get_row(session, execution_id, namespace)
    if execution.gang_id is not None:  # a member is cancelled with its gang
        return cancel(session, execution.gang_id, namespace)
    state = S(execution.state)
    if state.is_terminal:
        raise Conflict(f"execution {execution_id} is already {state.value}")
    if state is S.CANCELLING:
        return info(execution), [execution.worker_name]
    if execution.gang is not None and state in (S.CLAIMED, S.RUNNING):
        return info(execution), _cancel_gang(session, execution)
    if state is S.SCHEDULED or state.value in WAITING_STATES or (state is S.CLAIMED and not execution.delivered):
        reason = "cancelled before it started" if execution.attempt == 0 else f"cancelled while {state.value}"
        _cancelled_now(session, execution, state, reason)
        return info(execution), cancel_children(session, execution_id)  # ended first: their ends wake nobody
    _cancel_requested(session, execution)
    return info(execution), [execution.worker_name, *cancel_children(session, execution_id)]


def _cancelled_now(session: Session, execution: ExecutionModel, state: S, reason: str) -> None:
    """Cancelled where no worker has it (queued, waiting, or claimed but not yet delivered)."""
    now = time.time()
    value = {"reason": reason}
    cancelled = dict(type=EventType.WORKFLOW_CANCELLED, name=execution.workflow_name, value=value, time=now)
    opened = [finished_event(execution, "cancelled before it started", now)] if state is S.CLAIMED else []
    append_events(session, execution, [*opened, cancelled])
    finish(session, execution, S.CANCELLED, value, now)


def _cancel_requested(session: Session, execution: ExecutionModel) -> None:
    """CANCELLING: its worker stops it, and reports how it ended."""
    append_event(session, execution, EventType.WORKFLOW_CANCEL_REQUESTED, name=execution.workflow_name)
    execution.state = S.CANCELLING.value


def _cancel_gang(session: Session, gang: ExecutionModel) -> list[str]:
    """A placed gang: CANCELLING until its members, each cancelled, have ended."""
    _cancel_requested(session, gang)
    workers: list[str] = []
    for member in gang_fate.still_open(session, gang):
        workers += _cancel_member(session, member)
    return [w for w in workers if w]


def _cancel_member(session: Session, member: ExecutionModel) -> list[str]:
    state = S(member.state)
    if state is S.SCHEDULED or (state is S.CLAIMED and not member.delivered):
        _cancelled_now(session, member, state, "its gang was cancelled")
        return []
    _cancel_requested(session, member)
    return [member.worker_name]


def cancel_children(session: Session, parent_id: str) -> list[str]:
    """Cancel what a parent's calls started and has not ended. Returns the workers to wake."""
    workers: list[str] = []
    for child in waits.active_children(session, parent_id):
        workers += cancel(session, child)[1]
    return workers


def end_attempt(
    session: Session, execution: ExecutionModel, kind: AttemptEnd, cause: str, policy: ExecutionPolicy
) -> None:
    """End the current attempt for a reason outside the workflow, and decide what follows."""
    now = time.time()
    worker = execution.worker_name
    if kind is AttemptEnd.PREEMPTED:
        usage.record_lost(session, execution, now)
    if execution.gang_id is not None and execution.state != S.CANCELLING.value:
        gang_fate.release(session, execution, kind, cause, now)  # its gang counts, and is queued again whole
        _end_gang(session, gang_fate.member_left(session, execution, kind, cause, policy, now), now)
        return
    if kind.counts:
        execution.crashes += 1
    events = [
        dict(
            type=EventType.ATTEMPT_ENDED,
            name=execution.workflow_name,
            value={"attempt": execution.attempt, "end": kind.value, "cause": cause, "counted": kind.counts},
            time=now,
            worker_name=worker,
        )
    ]
    if execution.state == S.CANCELLING.value:
        value = {"reason": cause}
        events.append(dict(type=EventType.WORKFLOW_CANCELLED, name=execution.workflow_name, value=value, time=now))
        append_events(session, execution, events)
        finish(session, execution, S.CANCELLED, value, now)
        return
    if kind.counts and execution.crashes >= execution.max_attempts:
        error = (
            f"{cause} (attempt {execution.attempt}; {execution.crashes} of {execution.max_attempts} attempts crashed)"
        )
        value = {"error": error, "cause": cause, "attempts": execution.attempt}
        events.append(dict(type=EventType.WORKFLOW_FAILED, name=execution.workflow_name, value=value, time=now))
        append_events(session, execution, events)
        finish(session, execution, S.FAILED, value, now)
        return
    delay = policy.delay(execution.crashes) if kind.counts else 0.0
    events.append(
        dict(
            type=EventType.WORKFLOW_RESCHEDULED,
            name=execution.workflow_name,
            value={"reason": cause, "worker": worker, "retry_in": delay},
            time=now,
        )
    )
    append_events(session, execution, events)
    execution.leave_worker()
    execution.state = S.SCHEDULED.value
    outbox.worker_left(session, worker)
    execution.pending_since = now
    execution.ready_at = now + delay if delay else None
    execution.placement_note = (
        f"backing off {delay:g}s before attempt {execution.attempt + 1} after: {cause}" if delay else None
    )


def finish(session: Session, execution: ExecutionModel, state: ExecutionState, value: Any, at: float) -> None:
    """The execution is over: its terminal state, and its output or error; a parent
    waiting on it is queued again (docs/waits.md)."""
    execution.state = state.value
    execution.finished_at = at
    execution.wait = None
    execution.preempted_by = execution.preempt_deadline = None
    ran = at - execution.started_at if execution.started_at else None
    finishes.record(session, finishes.Finished(execution.namespace, execution.workflow_name, state.value, ran))
    if state is S.COMPLETED:
        execution.output = value
    elif isinstance(value, dict):
        execution.error = value.get("error") or value.get("reason")
        failure = Failure.parsed(value)  # what user code raised, when it did: the worker's event carries it
        execution.failure = failure.model_dump() if failure else None
    if execution.parent_id is not None:
        waits.child_ended(session, execution)
    outbox.execution_ended(session, execution)
    outbox.worker_left(session, execution.worker_name)
    if execution.gang_id is not None:
        _end_gang(session, gang_fate.member_finished(session, execution), at)
    if execution.gang is not None:  # its members that still run end with it
        for member in gang_fate.still_open(session, execution):
            gang_fate.wake(session, *_cancel_member(session, member))


#: The event that closes a gang's log, by how it ends.
_CLOSING = {
    S.COMPLETED: EventType.WORKFLOW_COMPLETED,
    S.FAILED: EventType.WORKFLOW_FAILED,
    S.CANCELLED: EventType.WORKFLOW_CANCELLED,
    S.TIMED_OUT: EventType.WORKFLOW_TIMED_OUT,
}


def end_late_gangs(session: Session, policy: ExecutionPolicy, now: float) -> float:
    """End the attempts of gangs whose members did not all start within ``start_timeout``
    (``gang_fate.late``); returns when the next placed gang's time is up (inf: none)."""
    late, due = gangs_late(session, now)
    for gang in late:
        _end_gang(session, gang_fate.late(session, gang, policy, now), now)
    return due


def _end_gang(session: Session, outcome: gang_fate.Outcome | None, at: float) -> None:
    """A gang ends as its members decided (``gang_fate``): logged, then finished."""
    if outcome is None:
        return
    gang, state, value = outcome
    type_ = _CLOSING[state]
    shown = payloads.STORED.get(type_.value, value)
    append_event(session, gang, type_, name=gang.workflow_name, value=shown, at=at)
    finish(session, gang, state, value, at)
    gang_fate.changed(session, gang)


def finished_event(execution: ExecutionModel, outcome: str, at: float) -> dict:
    """The ATTEMPT_ENDED that precedes a terminal event of an attempt that was running."""
    return dict(
        type=EventType.ATTEMPT_ENDED,
        name=execution.workflow_name,
        value={"attempt": execution.attempt, "end": AttemptEnd.FINISHED.value, "cause": outcome, "counted": False},
        time=at,
        worker_name=execution.worker_name,
    )


def expire_pending(session: Session, now: float) -> list[str]:
    """Fail executions that waited in SCHEDULED past their workflow's ``pending_timeout``."""
    expired = session.scalars(
        select(ExecutionModel).where(
            ExecutionModel.state == S.SCHEDULED.value,
            ExecutionModel.pending_timeout.is_not(None),
            ExecutionModel.pending_since + ExecutionModel.pending_timeout < now,
        )
    ).all()
    for execution in expired:
        why = execution.unschedulable or execution.placement_note or "no worker took it"
        error = f"pending_timeout of {execution.pending_timeout:g}s exceeded: {why}"
        append_event(
            session, execution, EventType.WORKFLOW_FAILED, name=execution.workflow_name, value={"error": error}, at=now
        )
        finish(session, execution, S.FAILED, {"error": error}, now)
    return [e.id for e in expired]
