"""A worker's checkpoint: a batch of its attempt's events, fenced by attempt and holder,
appended in order, each moving the state machine (``lifecycle``) where it says: a
workflow's end finishes the execution, an attempt's end sends it back or fails it, a
durable wait suspends it (docs/attempts.md, docs/waits.md)."""

from __future__ import annotations

import enum
import time
from typing import Any

from sqlalchemy.orm import Session

from flux.domain.attempts import WORKER_REPORTED, AttemptEnd
from flux.domain.events import STATE_AFTER, WORKER_EVENTS, EventType, ExecutionState
from flux.domain.hooks import HookEventType
from flux.domain.policy import ExecutionPolicy
from flux.server import outbox, payloads, task_cache
from flux.server.errors import Conflict, Invalid
from flux.server.eventlog import INSERT_EVENT, append_events, numbered
from flux.server.executions import setbased, waits
from flux.server.executions.lifecycle import end_attempt, finish, finished_event
from flux.server.executions.reads import get_row
from flux.server.models import ExecutionModel
from flux.server.schemas import Checkpoint, CheckpointReply

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
