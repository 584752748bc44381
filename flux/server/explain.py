"""``GET /executions/{id}/placement``: why an execution waits, or why its worker won."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import EventType, ExecutionState
from flux.models import ExecutionEventModel
from flux.scheduling.explain import summarize, verdict
from flux.scheduling.matching import WorkerView
from flux.scheduling.placement import demand_from_row
from flux.server import executions
from flux.server.schemas import PlacementInfo, WorkerPlacement


def _last_claim(session: Session, execution_id: str) -> dict | None:
    return session.scalar(
        select(ExecutionEventModel.value)
        .where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type == EventType.WORKFLOW_CLAIMED.value,
        )
        .order_by(ExecutionEventModel.seq.desc())
        .limit(1)
    )


def placement(session: Session, execution_id: str, workers: list[WorkerView]) -> PlacementInfo:
    execution = executions.get_row(session, execution_id)
    demand = demand_from_row(execution.id, execution.requests, execution.affinity)
    verdicts = [verdict(demand.request, demand.affinity, worker) for worker in workers]
    states = {worker.name: worker.state for worker in workers}
    chosen = None
    if execution.state == ExecutionState.SCHEDULED.value:
        summary = summarize(verdicts)
    else:
        chosen = _last_claim(session, execution_id)
        summary = (
            f"dispatched to {chosen['worker']}: {chosen['reason']}" if chosen else f"{execution.state} without dispatch"
        )
    return PlacementInfo(
        execution_id=execution.id,
        state=execution.state,
        summary=summary,
        unschedulable=execution.unschedulable,
        workers=[
            WorkerPlacement(name=v.worker, state=states[v.worker], available=v.kind is None, reason=v.message)
            for v in verdicts
        ],
        chosen=chosen,
    )
