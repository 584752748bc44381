"""An execution's state machine: every change of its state, and the events it logs.

SCHEDULED (``submission.submit``, or again after an attempt ended) -> CLAIMED (``claims.claim_all``: a new
attempt, whose number is the fencing token) -> delivered to its worker (``claims.deliver``)
-> RUNNING -> COMPLETED, FAILED or CANCELLED (``checkpoint``, ``cancel``,
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

import enum
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.attempts import WORKER_REPORTED, AttemptEnd
from flux.domain.events import STATE_AFTER, WAITING_STATES, WORKER_EVENTS, EventType, ExecutionState
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.server import outbox, payloads, task_cache, usage
from flux.server.errors import Conflict, Invalid
from flux.server.eventlog import INSERT_EVENT, append_event, append_events, numbered
from flux.server.executions import finishes, gang_fate, setbased, waits
from flux.server.executions.gang_members import late as gangs_late
from flux.server.executions.reads import get_row, info
from flux.server.models import ExecutionModel
from flux.server.schemas import Checkpoint, CheckpointReply, ExecutionInfo, Failure

S = ExecutionState


class Ended(enum.Enum):
    """What a checkpoint's batch ended: whom its route wakes."""

    #: The attempt goes on (only those who follow its events).
    NOTHING = enum.auto()
    #: The execution is over and nothing was queued by it: its worker has a free slot.
    EXECUTION = enum.auto()
    #: The attempt ended otherwise (queued again, waiting, a child started) or a parent
    #: waiting on it was queued again: dispatch looks.
    ATTEMPT = enum.auto()


def checkpoint(
    session: Session, worker_name: str, execution_id: str, body: Checkpoint, policy: ExecutionPolicy
) -> tuple[CheckpointReply, Ended]:
    """Append a worker's batch of events. Returns the reply and what it ended.

    Only the worker holding the current attempt may write (else 409: fenced). Batches
    are numbered per attempt; one re-sent because the response to it was lost (the
    worker cannot tell) is acknowledged without being appended again, and one that
    skips a number is refused. A terminal event ends the attempt and the execution;
    an ATTEMPT_ENDED (the child died, the memory ceiling, a drain) ends the attempt
    only (``end_attempt``).
    """
    execution = fenced_row(session, worker_name, execution_id, body.attempt)
    if body.batch <= execution.checkpoint_batch:
        return CheckpointReply(state=execution.state, cancel=execution.state == S.CANCELLING.value), Ended.NOTHING
    if S(execution.state).is_terminal:
        raise Conflict(f"execution {execution_id} is already {execution.state}")
    if body.batch != execution.checkpoint_batch + 1:
        raise Conflict(
            f"checkpoint batch {body.batch} of execution {execution_id} skips {execution.checkpoint_batch + 1}"
        )
    types = [_worker_event_type(event) for event in body.events]
    task_cache.record(session, execution, body.events)  # cache=True results, in this transaction
    if not any(type_ in _ENDING or STATE_AFTER.get(type_) not in (None, S.RUNNING) for type_ in types):
        return _plain_checkpoint(session, worker_name, execution, body, types), Ended.NOTHING
    execution.checkpoint_batch = body.batch
    logged = []
    for event, type_ in zip(body.events, types):
        if type_ is EventType.ATTEMPT_ENDED:
            kind, cause = _reported_end(event.value)
            append_events(session, execution, logged)
            end_attempt(session, execution, kind, cause, policy)
            return CheckpointReply(state=execution.state, cancel=False), Ended.ATTEMPT
        if type_ is EventType.WORKFLOW_SUSPENDED:
            append_events(session, execution, logged)
            if execution.state == S.CANCELLING.value:  # cancelled before it could wait
                value = {"reason": "cancelled"}
                cancelled = dict(
                    type=EventType.WORKFLOW_CANCELLED, name=execution.workflow_name, value=value, time=event.time
                )
                append_events(
                    session, execution, [finished_event(execution, "workflow cancelled", event.time), cancelled]
                )
                finish(session, execution, S.CANCELLED, value, event.time)
            elif execution.gang_id is not None:  # its peers run on: a member cannot wait on the server
                _member_cannot_wait(session, execution, event)
            else:
                waits.suspend(session, execution, event, worker_name, policy)
            return CheckpointReply(state=execution.state, cancel=False), Ended.ATTEMPT
        new_state = STATE_AFTER.get(type_)
        if new_state is not None and new_state is not S.RUNNING:
            logged.append(finished_event(execution, f"workflow {new_state.value.lower()}", event.time))
        value = payloads.STORED.get(type_.value, event.value)  # the output: a reference to the row's copy
        logged.append(
            dict(
                type=type_,
                name=event.name,
                task_id=event.task_id,
                value=value,
                time=event.time,
                worker_name=worker_name,
            )
        )
        if new_state is S.RUNNING:
            execution.started_at = execution.started_at or event.time
            if execution.state == S.CLAIMED.value:
                execution.state = S.RUNNING.value
                outbox.execution_event(session, execution, HookEventType.EXECUTION_STARTED)
        elif new_state is not None:
            # The terminal event closes the log (stragglers are dropped). Finished first, so
            # that the row's end and the log's go out as ONE UPDATE (the insert flushes it).
            finish(session, execution, new_state, event.value, event.time)
            append_events(session, execution, logged)
            return CheckpointReply(
                state=execution.state, cancel=False
            ), Ended.ATTEMPT if execution.parent_id else Ended.EXECUTION
    append_events(session, execution, logged)
    return CheckpointReply(state=execution.state, cancel=execution.state == S.CANCELLING.value), Ended.NOTHING


def _member_cannot_wait(session: Session, member: ExecutionModel, event) -> None:  # noqa: ANN001 - an EventIn
    """A gang member reached a durable wait (``sleep``, ``pause``, ``call``): it fails, and
    so its gang (docs/gangs.md): its peers would run on without it, or wait for it on
    their workers for as long as it waits on the server."""
    kind = event.value.get("kind", "wait") if isinstance(event.value, dict) else "wait"
    error = (
        f"a gang member cannot make a durable wait ({kind}): its peers run on without it; "
        "wait inside a task (asyncio.sleep) or before the gang starts"
    )
    failed = dict(type=EventType.WORKFLOW_FAILED, name=member.workflow_name, value={"error": error}, time=event.time)
    append_events(session, member, [finished_event(member, "workflow failed", event.time), failed])
    finish(session, member, S.FAILED, {"error": error}, event.time)


#: What ends the attempt in a batch (the rest of such a batch goes through the ORM).
_ENDING = frozenset({EventType.ATTEMPT_ENDED, EventType.WORKFLOW_SUSPENDED})


def _plain_checkpoint(
    session: Session, worker_name: str, execution: ExecutionModel, body: Checkpoint, types: list[EventType]
) -> CheckpointReply:
    """A batch that ends neither the attempt nor the execution (most of them): the row's
    change is one fenced Core UPDATE (``setbased``), its events one INSERT."""
    logged = [
        dict(
            type=type_,
            name=event.name,
            task_id=event.task_id,
            value=payloads.STORED.get(type_.value, event.value),
            time=event.time,
            worker_name=worker_name,
        )
        for event, type_ in zip(body.events, types)
    ]
    started = next(
        (event.time for event, type_ in zip(body.events, types) if STATE_AFTER.get(type_) is S.RUNNING), None
    )
    running = started is not None and execution.state == S.CLAIMED.value
    rows = numbered(execution.id, execution.last_seq, logged)
    progressed = EventType.TASK_COMPLETED in types  # what a preemption would lose starts again here
    setbased.checkpointed(
        session,
        execution,
        checkpoint_batch=body.batch,
        last_seq=execution.last_seq + len(rows),
        state=S.RUNNING.value if running else execution.state,
        started_at=execution.started_at or started,
        progress_at=time.time() if progressed else execution.progress_at,
    )
    if running:
        outbox.execution_event(session, execution, HookEventType.EXECUTION_STARTED)
    if rows:
        session.execute(INSERT_EVENT, rows)
    return CheckpointReply(state=execution.state, cancel=execution.state == S.CANCELLING.value)


def fenced_row(session: Session, worker_name: str, execution_id: str, attempt: int) -> ExecutionModel:
    """The execution a worker writes to, if it holds it under this attempt (else 409:
    fenced). What a superseded attempt sends (events, log lines) is refused here."""
    execution = get_row(session, execution_id, payloads=False)
    if execution.worker_name != worker_name:
        raise Conflict(f"execution {execution_id} is not held by worker {worker_name!r}")
    if attempt != execution.attempt:
        raise Conflict(f"execution {execution_id} attempt {attempt} is stale (current attempt {execution.attempt})")
    return execution


def _worker_event_type(event) -> EventType:  # noqa: ANN001 - an EventIn
    try:
        type_ = EventType(event.type)
    except ValueError:
        raise Invalid(f"unknown event type {event.type!r}") from None
    if type_ not in WORKER_EVENTS:
        raise Invalid(f"workers cannot report {type_.value} events")
    return type_


def _reported_end(value: Any) -> tuple[AttemptEnd, str]:
    """An ATTEMPT_ENDED a worker may send: ``{"end": one of WORKER_REPORTED, "cause": text}``."""
    allowed = ", ".join(sorted(kind.value for kind in WORKER_REPORTED))
    if not isinstance(value, dict) or not isinstance(value.get("cause"), str) or not value["cause"]:
        raise Invalid(f"ATTEMPT_ENDED needs a value {{'end': one of {allowed}, 'cause': text}}")
    try:
        kind = AttemptEnd(value.get("end"))
    except ValueError:
        kind = None
    if kind not in WORKER_REPORTED:
        raise Invalid(f"a worker may end an attempt as one of {allowed}, not {value.get('end')!r}")
    return kind, value["cause"][:1000]


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
        now = time.time()
        value = {
            "reason": "cancelled before it started" if execution.attempt == 0 else f"cancelled while {state.value}"
        }
        cancelled = dict(type=EventType.WORKFLOW_CANCELLED, name=execution.workflow_name, value=value, time=now)
        opened = [finished_event(execution, "cancelled before it started", now)] if state is S.CLAIMED else []
        append_events(session, execution, [*opened, cancelled])
        finish(session, execution, S.CANCELLED, value, now)
        return info(execution), cancel_children(session, execution_id)  # ended first: their ends wake nobody
    append_event(session, execution, EventType.WORKFLOW_CANCEL_REQUESTED, name=execution.workflow_name)
    execution.state = S.CANCELLING.value
    return info(execution), [execution.worker_name, *cancel_children(session, execution_id)]


def _cancel_gang(session: Session, gang: ExecutionModel) -> list[str]:
    """A placed gang: CANCELLING until its members, each cancelled, have ended."""
    append_event(session, gang, EventType.WORKFLOW_CANCEL_REQUESTED, name=gang.workflow_name)
    gang.state = S.CANCELLING.value
    workers: list[str] = []
    for member in gang_fate.still_open(session, gang):
        workers += _cancel_member(session, member)
    return [w for w in workers if w]


def _cancel_member(session: Session, member: ExecutionModel) -> list[str]:
    state = S(member.state)
    if state is S.SCHEDULED or (state is S.CLAIMED and not member.delivered):
        now = time.time()
        value = {"reason": "its gang was cancelled"}
        cancelled = dict(type=EventType.WORKFLOW_CANCELLED, name=member.workflow_name, value=value, time=now)
        opened = [finished_event(member, "cancelled before it started", now)] if state is S.CLAIMED else []
        append_events(session, member, [*opened, cancelled])
        finish(session, member, S.CANCELLED, value, now)
        return []
    append_event(session, member, EventType.WORKFLOW_CANCEL_REQUESTED, name=member.workflow_name)
    member.state = S.CANCELLING.value
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
