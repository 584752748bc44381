"""Executions: submit, deliver to a worker, checkpoint, cancel, and the reads.

Every state change appends to the execution's event log in the same transaction,
so the log and the state never disagree. Worker calls are fenced by ``attempt``
(``flux.server.attempts``): once an attempt has ended, the worker that ran it can
no longer write to the execution.
"""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from flux.domain.attempts import WORKER_REPORTED, AttemptEnd, AttemptPolicy
from flux.domain.events import HOLDING_STATES, STATE_AFTER, WORKER_EVENTS, EventType, ExecutionState
from flux.models import ExecutionEventModel, ExecutionModel
from flux.server import workflows
from flux.server import attempts
from flux.server.attempts import finish, finished_event
from flux.server.eventlog import INSERT_EVENT, append_event, append_events
from flux.server.errors import Conflict, Invalid, NotFound
from flux.server.schemas import (
    Checkpoint,
    CheckpointReply,
    ClaimedExecution,
    EventOut,
    ExecutionInfo,
    RunRequest,
)

S = ExecutionState


#: Built once: a statement made per call costs more to build than to run.
INSERT_EXECUTION = insert(ExecutionModel.__table__)


def submit(session: Session, name: str, run: RunRequest, policy: AttemptPolicy) -> ExecutionInfo:
    """Queue a run: two plain INSERTs (the execution and its first event), since a
    burst of submissions is bounded by what each costs the single writer."""
    workflow = workflows.header(session, name, run.version)
    now = time.time()
    row = dict(
        id=uuid.uuid4().hex,
        workflow_id=workflow.id,
        workflow_name=workflow.name,
        workflow_version=workflow.version,
        state=S.SCHEDULED.value,
        input=run.input,
        requests=workflow.requests,
        affinity=workflow.affinity,
        routing=workflow.routing,
        pending_timeout=workflow.pending_timeout,
        pending_since=now,
        attempt=0,
        crashes=0,
        max_attempts=workflow.max_attempts or policy.default_max_attempts,
        ready_at=None,
        version_pinned=run.version is not None,
        last_seq=1,
        checkpoint_batch=0,
        delivered=False,
        scheduled_at=now,
        row_version=1,  # the ORM's optimistic-concurrency counter starts at 1
    )
    session.execute(INSERT_EXECUTION, row)
    session.execute(
        INSERT_EVENT,
        dict(execution_id=row["id"], seq=1, type=EventType.WORKFLOW_SCHEDULED.value, name=workflow.name,
             task_id=None, value={"input": run.input}, time=now, worker_name=None),
    )
    fresh = dict.fromkeys(("output", "error", "worker_name", "unschedulable", "placement_note", "claimed_at", "started_at", "finished_at"))
    return info(SimpleNamespace(**row, **fresh))


def get_row(session: Session, execution_id: str) -> ExecutionModel:
    row = session.get(ExecutionModel, execution_id)
    if row is None:
        raise NotFound(f"execution {execution_id!r} not found")
    return row


def get(session: Session, execution_id: str) -> ExecutionInfo:
    return info(get_row(session, execution_id))


def list_executions(session: Session, state: str | None, workflow: str | None, limit: int) -> list[ExecutionInfo]:
    query = select(ExecutionModel).order_by(ExecutionModel.scheduled_at.desc()).limit(limit)
    if state:
        query = query.where(ExecutionModel.state == state.upper())
    if workflow:
        query = query.where(ExecutionModel.workflow_name == workflow)
    return [info(row) for row in session.scalars(query)]


def events(session: Session, execution_id: str, after: int = 0) -> list[EventOut]:
    get_row(session, execution_id)
    rows = session.scalars(
        select(ExecutionEventModel)
        .where(ExecutionEventModel.execution_id == execution_id, ExecutionEventModel.seq > after)
        .order_by(ExecutionEventModel.seq)
    )
    return [
        EventOut(seq=r.seq, type=r.type, name=r.name, task_id=r.task_id, value=r.value, time=r.time, worker_name=r.worker_name)
        for r in rows
    ]


def cancel(session: Session, execution_id: str) -> tuple[ExecutionInfo, str | None]:
    """Cancel now if no worker holds it; otherwise ask the worker. Returns the worker to wake."""
    execution = get_row(session, execution_id)
    state = S(execution.state)
    if state.is_terminal:
        raise Conflict(f"execution {execution_id} is already {state.value}")
    if state is S.CANCELLING:
        return info(execution), execution.worker_name
    if state is S.SCHEDULED or (state is S.CLAIMED and not execution.delivered):
        now = time.time()
        value = {"reason": "cancelled before it started"}
        cancelled = dict(type=EventType.WORKFLOW_CANCELLED, name=execution.workflow_name, value=value, time=now)
        opened = [finished_event(execution, "cancelled before it started", now)] if state is S.CLAIMED else []
        append_events(session, execution, [*opened, cancelled])
        finish(session, execution, S.CANCELLED, value, now)
        return info(execution), None
    append_event(session, execution, EventType.WORKFLOW_CANCEL_REQUESTED, name=execution.workflow_name)
    execution.state = S.CANCELLING.value
    return info(execution), execution.worker_name


def held_by(session: Session, worker_name: str) -> list[ExecutionModel]:
    return list(
        session.scalars(
            select(ExecutionModel).where(ExecutionModel.worker_name == worker_name, ExecutionModel.state.in_(HOLDING_STATES))
        )
    )


def deliver(session: Session, worker_name: str) -> tuple[list[ClaimedExecution], list[str], list[ExecutionModel]]:
    """Hand over what dispatch assigned to this worker, and list what it must cancel.

    An execution that cannot be handed over (its workflow version is gone, its data
    cannot be serialized) fails alone with the reason; the claim and the rest go on.
    Also returns everything the worker now holds, for the fleet registry's cache.
    """
    held = held_by(session, worker_name)
    cancel = [e.id for e in held if e.state == S.CANCELLING.value]
    claimed = []
    for execution in held:
        if execution.state != S.CLAIMED.value or execution.delivered:
            continue
        execution.delivered = True
        try:
            claimed.append(_claimed(session, execution))
        except UNDELIVERABLE as exc:
            error, now = f"cannot be delivered to a worker: {exc}", time.time()
            failed = dict(type=EventType.WORKFLOW_FAILED, name=execution.workflow_name, value={"error": error}, time=now)
            append_events(session, execution, [finished_event(execution, "workflow failed", now), failed])
            finish(session, execution, S.FAILED, {"error": error}, now)
    return claimed, cancel, [e for e in held if not S(e.state).is_terminal]


#: What building one execution's claim may raise; database errors still fail the transaction.
UNDELIVERABLE = (NotFound, ValueError, TypeError, RecursionError)


def _claimed(session: Session, execution: ExecutionModel) -> ClaimedExecution:
    source, filename = workflows.source_of(session, execution.workflow_name, execution.workflow_version)
    claim = ClaimedExecution(
        id=execution.id,
        workflow_name=execution.workflow_name,
        workflow_version=execution.workflow_version,
        source=source,
        filename=filename,
        input=execution.input,
        attempt=execution.attempt,
        # a first attempt has nothing to replay: spare the query
        completed_tasks=_completed_tasks(session, execution.id) if execution.attempt > 1 else {},
        requests=execution.requests,
        gpus=(execution.allotment or {}).get("gpus"),
    )
    claim.model_dump_json()  # fails here, alone, rather than in the response with the others
    return claim


def _completed_tasks(session: Session, execution_id: str) -> dict[str, Any]:
    rows = session.execute(
        select(ExecutionEventModel.task_id, ExecutionEventModel.value).where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type == EventType.TASK_COMPLETED.value,
        )
    )
    return {task_id: value for task_id, value in rows}


def checkpoint(
    session: Session, worker_name: str, execution_id: str, body: Checkpoint, policy: AttemptPolicy
) -> tuple[CheckpointReply, bool]:
    """Append a worker's batch of events. Returns the reply and whether the attempt ended.

    Only the worker holding the current attempt may write (else 409: fenced). Batches
    are numbered per attempt; one re-sent because the response to it was lost (the
    worker cannot tell) is acknowledged without being appended again, and one that
    skips a number is refused. A terminal event ends the attempt and the execution;
    an ATTEMPT_ENDED (the child died, the memory ceiling, a drain) ends the attempt
    only (``flux.server.attempts.end``).
    """
    execution = get_row(session, execution_id)
    if execution.worker_name != worker_name:
        raise Conflict(f"execution {execution_id} is not held by worker {worker_name!r}")
    if body.attempt != execution.attempt:
        raise Conflict(f"execution {execution_id} attempt {body.attempt} is stale (current attempt {execution.attempt})")
    if body.batch <= execution.checkpoint_batch:
        return CheckpointReply(state=execution.state, cancel=execution.state == S.CANCELLING.value), False
    if S(execution.state).is_terminal:
        raise Conflict(f"execution {execution_id} is already {execution.state}")
    if body.batch != execution.checkpoint_batch + 1:
        raise Conflict(f"checkpoint batch {body.batch} of execution {execution_id} skips {execution.checkpoint_batch + 1}")
    types = [_worker_event_type(event) for event in body.events]
    execution.checkpoint_batch = body.batch
    logged = []
    for event, type_ in zip(body.events, types):
        if type_ is EventType.ATTEMPT_ENDED:
            kind, cause = _reported_end(event.value)
            append_events(session, execution, logged)
            attempts.end(session, execution, kind, cause, policy)
            return CheckpointReply(state=execution.state, cancel=False), True
        new_state = STATE_AFTER.get(type_)
        if new_state is not None and new_state is not S.RUNNING:
            logged.append(finished_event(execution, f"workflow {new_state.value.lower()}", event.time))
        logged.append(dict(type=type_, name=event.name, task_id=event.task_id, value=event.value, time=event.time, worker_name=worker_name))
        if new_state is S.RUNNING:
            execution.started_at = execution.started_at or event.time
            if execution.state == S.CLAIMED.value:
                execution.state = S.RUNNING.value
        elif new_state is not None:
            append_events(session, execution, logged)  # the terminal event closes the log: stragglers are dropped
            finish(session, execution, new_state, event.value, event.time)
            return CheckpointReply(state=execution.state, cancel=False), True
    append_events(session, execution, logged)
    return CheckpointReply(state=execution.state, cancel=execution.state == S.CANCELLING.value), False


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


def info(row: ExecutionModel) -> ExecutionInfo:
    return ExecutionInfo(
        id=row.id,
        workflow_name=row.workflow_name,
        workflow_version=row.workflow_version,
        state=row.state,
        input=row.input,
        output=row.output,
        error=row.error,
        worker_name=row.worker_name,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        crashes=row.crashes,
        requests=row.requests,
        affinity=row.affinity,
        routing=row.routing,
        unschedulable=row.unschedulable,
        placement_note=row.placement_note,
        scheduled_at=row.scheduled_at,
        claimed_at=row.claimed_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
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
        append_event(session, execution, EventType.WORKFLOW_FAILED, name=execution.workflow_name, value={"error": error}, at=now)
        finish(session, execution, S.FAILED, {"error": error}, now)
    return [e.id for e in expired]
