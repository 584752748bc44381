"""Reading a gang for people (docs/gangs.md): its members as its ``GET /executions/ID``
lists them (``flux execution show``, ``logs --rank``, the console's page).

A gang's row holds no worker and writes no task events of its own: what a person looks
for (where each rank runs, its state, its log) is on its members' rows. One statement,
on ``ix_executions_gang`` (``gang_id``, ``rank``), reading only the columns shown: a gang
of 256 costs one index range, not 256 rows' payloads.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from flux.server.models import ExecutionModel
from flux.server.schemas import GangMemberInfo

_MEMBERS = (
    select(
        ExecutionModel.rank,
        ExecutionModel.id,
        ExecutionModel.worker_name,
        ExecutionModel.attempt,
        ExecutionModel.state,
        ExecutionModel.started_at,
        ExecutionModel.finished_at,
    )
    .where(ExecutionModel.gang_id == bindparam("gang"))
    .order_by(ExecutionModel.rank)
)


def members_info(session: Session, gang_id: str) -> list[GangMemberInfo]:
    """The gang's members by rank."""
    return [GangMemberInfo(**row._asdict()) for row in session.execute(_MEMBERS, {"gang": gang_id})]
