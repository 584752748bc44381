"""What a replay needs besides completed tasks (``reads._completed_tasks``): the values
deterministic builtins recorded (VALUE_RECORDED, by call id) and the rollbacks that
ended (ROLLBACK_COMPLETED / ROLLBACK_FAILED, by task id), so a later attempt returns
the same values and never runs an ended rollback again. One query over the log."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from flux.domain.events import ROLLBACK_ENDED, EventType
from flux.server.models import ExecutionEventModel

VALUE_RECORDED = EventType.VALUE_RECORDED.value


def recorded(session: Session, execution_id: str) -> dict[str, Any]:
    """``{"recorded": {call id: value}, "rolled_back": [task id, ...]}`` for the job."""
    rows = session.execute(
        select(ExecutionEventModel.type, ExecutionEventModel.task_id, ExecutionEventModel.value)
        .where(
            ExecutionEventModel.execution_id == execution_id,
            ExecutionEventModel.type.in_([VALUE_RECORDED, *ROLLBACK_ENDED]),
        )
        .order_by(ExecutionEventModel.seq)
    )
    values: dict[str, Any] = {}
    rolled_back: list[str] = []
    for type_, task_id, value in rows:
        if type_ == VALUE_RECORDED:
            values[task_id] = value
        else:
            rolled_back.append(task_id)
    return {"recorded": values, "rolled_back": rolled_back}
