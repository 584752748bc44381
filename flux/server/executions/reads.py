"""Reading executions: one, a list, its event log, what a worker holds, and the job a
worker is sent for an attempt. No state changes here (``lifecycle`` makes them)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import HOLDING_STATES, EventType
from flux.server.models import ExecutionEventModel, ExecutionModel
from flux.server import workflows
from flux.server.errors import NotFound
from flux.server.schemas import ClaimedExecution, EventOut, ExecutionInfo


def get_row(session: Session, execution_id: str) -> ExecutionModel:
    row = session.get(ExecutionModel, execution_id)
    if row is None:
        raise NotFound(f"execution {execution_id!r} not found")
    return row


def get(session: Session, execution_id: str) -> ExecutionInfo:
    return info(get_row(session, execution_id))


def list_executions(
    session: Session, state: str | None, workflow: str | None, limit: int, id_prefix: str | None = None,
    schedule: str | None = None,
) -> list[ExecutionInfo]:
    """Newest first; ``id_prefix`` finds the executions whose id starts with it (what
    the CLI resolves a typed prefix with, like ``git`` and ``docker`` do); ``schedule``:
    the runs a schedule started."""
    query = select(ExecutionModel).order_by(ExecutionModel.scheduled_at.desc()).limit(limit)
    if id_prefix:
        query = query.where(ExecutionModel.id.startswith(id_prefix.lower(), autoescape=True))
    if state:
        query = query.where(ExecutionModel.state == state.upper())
    if workflow:
        query = query.where(ExecutionModel.workflow_name == workflow)
    if schedule:
        query = query.where(ExecutionModel.schedule == schedule)
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


def held_by(session: Session, worker_name: str) -> list[ExecutionModel]:
    return list(
        session.scalars(
            select(ExecutionModel).where(ExecutionModel.worker_name == worker_name, ExecutionModel.state.in_(HOLDING_STATES))
        )
    )


def job_for(session: Session, execution: ExecutionModel, traceparent: str | None = None) -> ClaimedExecution:
    """What a worker is sent to run an attempt: the source, the input, and the
    results of tasks that completed in earlier attempts (replayed, not re-run);
    ``traceparent``: the span its attempt hangs under (the claim's; docs/tracing.md)."""
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
        traceparent=traceparent,
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
        schedule=row.schedule,
        scheduled_for=row.scheduled_for,
    )


