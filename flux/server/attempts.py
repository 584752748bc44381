"""An execution's attempts: the claim that starts one, and every way one ends.

The attempt number is the fencing token (``flux.domain.attempts``): ``start`` bumps
it when dispatch gives the execution to a worker, so whatever the previous holder
still sends is refused. ``end`` closes an attempt that did not finish the workflow
(a crash, an eviction, a drain): the execution goes back to the queue, after a
backoff if the end counts as a crash, or fails with the cause named once
``max_attempts`` crashes are used up. A pending cancellation ends it as CANCELLED.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from flux.domain.attempts import AttemptEnd, AttemptPolicy
from flux.domain.events import EventType, ExecutionState
from flux.models import ExecutionModel
from flux.server.eventlog import append_events, event_rows

S = ExecutionState


def finish(session: Session, execution: ExecutionModel, state: ExecutionState, value: Any, at: float) -> None:
    """The execution is over: its terminal state, and its output or error."""
    execution.state = state.value
    execution.finished_at = at
    if state is S.COMPLETED:
        execution.output = value
    elif isinstance(value, dict):
        execution.error = value.get("error") or value.get("reason")


def start(execution: ExecutionModel, worker_name: str, allotment: dict | None, reason: str, now: float) -> list[dict]:
    """The CLAIMED transition: a new attempt on ``worker_name``. Returns its log rows
    (the caller inserts the rows of a whole round in one statement)."""
    execution.state = S.CLAIMED.value
    execution.worker_name = worker_name
    execution.attempt += 1
    execution.checkpoint_batch = 0
    execution.delivered = False
    execution.claimed_at = now
    execution.allotment = allotment or None
    execution.ready_at = None
    claimed = {"worker": worker_name, "attempt": execution.attempt, "reason": reason, "allotment": allotment}
    return event_rows(
        execution,
        [
            dict(type=EventType.WORKFLOW_CLAIMED, name=execution.workflow_name, value=claimed, time=now, worker_name=worker_name),
            dict(type=EventType.ATTEMPT_STARTED, name=execution.workflow_name,
                 value={"attempt": execution.attempt, "worker": worker_name}, time=now, worker_name=worker_name),
        ],
    )


def finished_event(execution: ExecutionModel, outcome: str, at: float) -> dict:
    """The ATTEMPT_ENDED that precedes a terminal event of an attempt that was running."""
    return dict(
        type=EventType.ATTEMPT_ENDED,
        name=execution.workflow_name,
        value={"attempt": execution.attempt, "end": AttemptEnd.FINISHED.value, "cause": outcome, "counted": False},
        time=at,
        worker_name=execution.worker_name,
    )


def end(session: Session, execution: ExecutionModel, kind: AttemptEnd, cause: str, policy: AttemptPolicy) -> None:
    """End the current attempt for a reason outside the workflow, and decide what follows."""
    now = time.time()
    worker = execution.worker_name
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
        error = f"{cause} (attempt {execution.attempt}; {execution.crashes} of {execution.max_attempts} attempts crashed)"
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
    execution.state = S.SCHEDULED.value
    execution.worker_name = None
    execution.delivered = False
    execution.allotment = None
    execution.started_at = None
    execution.checkpoint_batch = 0
    execution.pending_since = now
    execution.ready_at = now + delay if delay else None
    execution.unschedulable = None
    execution.placement_note = (
        f"backing off {delay:g}s before attempt {execution.attempt + 1} after: {cause}" if delay else None
    )
