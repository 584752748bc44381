"""An execution's append-only event log: numbering and inserting its rows.

Plain rows, not ORM objects: a worker's batch of events, or every claim of a
dispatch round, costs one executemany. The execution's own pending changes are
flushed first (autoflush), so the row and its log always move together in the
transaction.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from flux.domain.events import EventType
from flux.server.models import ExecutionEventModel, ExecutionModel

#: Built once: a statement made per call costs more to build than to run.
INSERT_EVENT = insert(ExecutionEventModel.__table__)


def append_event(
    session: Session,
    execution: ExecutionModel,
    type_: EventType,
    *,
    name: str | None = None,
    task_id: str | None = None,
    value: Any = None,
    at: float | None = None,
    worker_name: str | None = None,
) -> None:
    append_events(
        session,
        execution,
        [dict(type=type_, name=name, task_id=task_id, value=value, time=at, worker_name=worker_name)],
    )


def append_events(session: Session, execution: ExecutionModel, events: list[dict]) -> None:
    """Append to an execution's log in one statement, numbering after ``last_seq``."""
    rows = event_rows(execution, events)
    if rows:
        session.execute(INSERT_EVENT, rows)


def event_rows(execution: ExecutionModel, events: list[dict]) -> list[dict]:
    """The log rows of ``events``, numbered after ``last_seq`` (which moves on); for
    callers that insert the events of many executions in one statement."""
    rows = numbered(execution.id, execution.last_seq, events)
    execution.last_seq += len(rows)
    return rows


def numbered(execution_id: str, last_seq: int, events: list[dict]) -> list[dict]:
    """The log rows of ``events`` for an execution whose log ends at ``last_seq``: for
    set-based writers that move ``last_seq`` in their own statement."""
    now = time.time()
    return [
        {
            "execution_id": execution_id,
            "seq": last_seq + number,
            "type": event["type"].value,
            "name": event.get("name"),
            "task_id": event.get("task_id"),
            "value": event.get("value"),
            "time": event["time"] if event.get("time") is not None else now,
            "worker_name": event.get("worker_name"),
        }
        for number, event in enumerate(events, start=1)
    ]
