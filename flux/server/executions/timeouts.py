"""The workflow ``timeout``: a deadline from submission, across attempts and waits.

Past it the execution ends TIMED_OUT wherever it is: queued, waiting (asleep, paused,
on a child) or running. A running attempt is closed in the log at once; its worker
learns on its next checkpoint (refused: the execution has ended) or when its claim
is woken and the fleet registry no longer counts the execution as its own, and kills
the attempt. Children still running are cancelled (docs/waits.md).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, EventType, ExecutionState
from flux.server.eventlog import append_events
from flux.server.executions.lifecycle import cancel_children, finish, finished_event
from flux.server.models import ExecutionModel

#: Unfinished executions past their deadline (``ix_executions_deadline``, partial on them).
_PAST = (ExecutionModel.finished_at.is_(None), ExecutionModel.deadline.is_not(None))


def first_deadline(session: Session) -> float | None:
    """The earliest deadline of an unfinished execution (``ix_executions_deadline``)."""
    return session.scalar(select(func.min(ExecutionModel.deadline)).where(*_PAST))


def expire_deadlines(session: Session, now: float, limit: int) -> tuple[list[str], list[str]]:
    """End at most ``limit`` executions past their deadline TIMED_OUT, earliest first.
    Returns their ids and the workers to wake (those that ran them, and their children's)."""
    expired = session.scalars(
        select(ExecutionModel)
        .where(*_PAST, ExecutionModel.deadline < now)
        .order_by(ExecutionModel.deadline)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    workers: list[str] = []
    for execution in expired:
        limit = execution.deadline - execution.scheduled_at
        value = {"error": f"timeout of {limit:g}s exceeded (it was {execution.state})"}
        events = []
        if execution.state in HOLDING_STATES:
            events.append(finished_event(execution, "workflow timed out", now))
            workers.append(execution.worker_name)
        events.append(dict(type=EventType.WORKFLOW_TIMED_OUT, name=execution.workflow_name, value=value, time=now))
        append_events(session, execution, events)
        finish(session, execution, ExecutionState.TIMED_OUT, value, now)
        workers += cancel_children(session, execution.id)
    return [execution.id for execution in expired], [worker for worker in workers if worker]
